"""`bench/ingest.py --processes`: the parts that decide whether a run is right and leaves
nothing behind, on real processes and a real Redis (the whole command, with Celery
workers and PostgreSQL, is checked by running it: bench/README.md "Worker processes").

- the comparison with the in-process run names each state and transition that differs;
- the broker counts as idle only with no queued and no unacknowledged task;
- stopping the workers kills a process group whose leader ignores SIGTERM, pool child
  included;
- a process tree's CPU includes a child that has already exited.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from bench import common, ingest_processes
from bench.ingest_processes import Worker, WorkerGroup

BROKER = "redis://127.0.0.1:6379/12"  # a database of its own, emptied by the test


def _outcome(**over: object) -> dict:
    base = {"messages": 10, "messages_extracted": 10, "statements": 3,
            "knowledge_by_state": {"proposed": 0, "active": 2, "rejected": 1},
            "knowledge_sources": 3, "vectors": 2, "entity_mentions": 0,
            "transition_total": 6,
            "transitions": [{"from": None, "to": "proposed", "reason": "f4_pipeline_proposed",
                             "count": 3},
                            {"from": "proposed", "to": "active", "reason": "f4_gate_pass",
                             "count": 2}]}
    base.update(over)
    return base


def test_comparison_names_what_differs():
    ref = _outcome()
    assert ingest_processes.compare_outcomes(ref, _outcome()) == {}
    run = _outcome(knowledge_by_state={"proposed": 0, "active": 1, "rejected": 2},
                   transitions=[*ref["transitions"][:1],
                                {"from": "proposed", "to": "active", "reason": "f4_gate_pass",
                                 "count": 1}],
                   vectors=1, audit_entries=99)  # a key the reference lacks is not compared
    diffs = ingest_processes.compare_outcomes(ref, run)
    assert diffs == {
        "state:active": {"reference": 2, "run": 1},
        "state:rejected": {"reference": 1, "run": 2},
        "transition:proposed->active:f4_gate_pass": {"reference": 2, "run": 1},
    }
    # The indexes are compared apart: fewer vectors is no different decision.
    assert ingest_processes.compare_outcomes(ref, _outcome(vectors=1)) == {}
    assert ingest_processes.compare_outcomes(ref, run, ingest_processes.INDEXES) == {
        "vectors": {"reference": 2, "run": 1}}


def test_reference_outcome_reads_an_in_process_result():
    payload = {"messages": 10, "messages_extracted": 9, "knowledge_sources": 3, "vectors": 2,
               "entity_mentions_after_pipeline": 0,
               "lifecycle": {"statements": 3, "final_state_distribution": {"active": 3},
                             "transition_total": 6, "transitions": []}}
    out = ingest_processes.reference_outcome(payload)
    assert out["messages_extracted"] == 9 and out["knowledge_by_state"] == {"active": 3}
    assert set(out) == {*ingest_processes.COMPARED, *ingest_processes.INDEXES}


def test_feed_all_is_round_robin_over_conversations():
    order = ingest_processes.feed_order({"a": [1, 2, 3], "b": [1], "c": [1, 2]})
    assert order == [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("c", 2), ("a", 3)]


@pytest.mark.queue
def test_broker_idle_only_without_queued_or_unacked_tasks():
    client = redis.Redis.from_url(BROKER)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail("this test needs Redis on 127.0.0.1:6379 (.ci/run starts it)")
    client.flushdb()
    try:
        client.sadd("_kombu.binding.extraction", "x")  # not a queue
        client.hset(common.PROBE_KEY, "1", "{}")
        client.rpush(common.EXTRACTED_KEY, "[]")  # the probe's list is not a queue
        assert ingest_processes.broker_idle(client)
        client.rpush("embedding", "task")
        assert not ingest_processes.broker_idle(client)
        assert ingest_processes.broker_sizes(client) == {"embedding": 1, "unacked": 0}
        client.delete("embedding")
        client.hset("unacked", "tag", "task")
        assert not ingest_processes.broker_idle(client)
        client.delete("unacked")
        assert ingest_processes.broker_idle(client)
    finally:
        client.flushdb()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie is gone for our purpose
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_stop_kills_a_stubborn_group_and_its_children(tmp_path: Path):
    # A leader that ignores SIGTERM (as a worker stuck in a task would not stop) with a
    # child of its own (as a pool process).
    script = ("import signal, subprocess, sys, time\n"
              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
              "print(child.pid, flush=True)\n"
              "time.sleep(300)\n")
    log = tmp_path / "w.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=out,
                                start_new_session=True)
    group = WorkerGroup([Worker("stubborn", proc, log)])
    child = None
    try:
        deadline = time.monotonic() + 30
        while not log.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(log.read_text().split()[0])
        assert common.child_pids(proc.pid) == [child]
        group.check_alive()  # running: no error

        assert group.stop(grace=0.5) == ["stubborn"]
        assert proc.poll() is not None
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
        assert group.workers == []
        assert group.stop() == []  # idempotent
    finally:  # whatever failed above, this test leaves no process behind
        for pid in (proc.pid, child):
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]
        proc.wait(timeout=10)


def test_check_alive_names_a_dead_worker(tmp_path: Path):
    log = tmp_path / "w.log"
    log.write_text("ImportError: no module named nowhere\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    group = WorkerGroup([Worker("dead", proc, log)])
    with pytest.raises(ingest_processes.BenchError, match=r"(?s)exited with code 3.*no module"):
        group.check_alive()


def test_tree_cpu_counts_a_child_that_exited():
    before = common.tree_cpu(os.getpid())
    subprocess.run([sys.executable, "-c",
                    "import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.5: pass"], check=True)
    after = common.tree_cpu(os.getpid())
    assert before is not None and after is not None
    assert after[1] - before[1] >= 0.4  # reaped: in this process's cutime/cstime
    assert common.tree_cpu(2 ** 22 + 7) is None  # no such process
