"""bench/ingest.py --split: a part's CPU is exclusive (what it calls into another part is
that part's), the parts add up to the thread's CPU, and install/uninstall patch and
restore the pipeline's functions, including names imported elsewhere."""

from __future__ import annotations

import time

from bench.ingest_split import Split


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_nested_parts_are_charged_exclusively_and_add_up():
    split = Split()
    split.thread_started()
    start = time.thread_time()
    with split.part("placement"):
        _burn(0.05)
        with split.part("sql"):
            _burn(0.1)
        _burn(0.05)
    split.thread_done()
    total = time.thread_time() - start
    assert 0.09 <= split.cpu["sql"] < 0.13
    assert 0.09 <= split.cpu["placement"] < 0.13  # not the 0.2 s the block lasted
    assert abs(sum(split.cpu.values()) - total) < 0.01
    report = split.report(messages=10, process_cpu=total, postgres_cpu=None)
    assert report["cpu_ms_per_message"]["sql"] == round(split.cpu["sql"] * 100, 2)
    shares = list(report["cpu_ms_per_message"].values())
    assert shares == sorted(shares, reverse=True)  # largest first


def test_install_wraps_the_pipeline_and_uninstall_restores_it():
    import governance.intake.pipeline as pipeline
    from governance.intake import gates

    before = (gates.gate_a_refusal, pipeline.agent_claim_about_user,
              pipeline.knowledge_propose_many)
    split = Split().install()
    try:
        # Wrapped where defined and where imported by name.
        assert gates.gate_a_refusal.__split_original__ is before[0]
        assert pipeline.agent_claim_about_user.__split_original__ is before[1]
        assert pipeline.knowledge_propose_many.__split_original__ is before[2]
        assert gates.gate_a_refusal.__name__ == "gate_a_refusal"
    finally:
        split.uninstall()
    assert (gates.gate_a_refusal, pipeline.agent_claim_about_user,
            pipeline.knowledge_propose_many) == before
