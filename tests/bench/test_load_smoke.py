"""Smoke tests of the load benchmark's and the reliability report's pure parts (no server,
no worker, no load): statistics, the batch plan over a LoCoMo-shaped file, the JUnit
parser and the report's exit rule."""

from __future__ import annotations

import json
from pathlib import Path

from bench import load, reliability_report
from bench.common import load_locomo

LOCOMO = [{
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann Lee", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"dia_id": f"D1:{i}", "speaker": "Ann Lee" if i % 2 else "Bob",
                       "text": f"turn {i}" if i != 3 else " "} for i in range(1, 6)],
        "session_2_date_time": "10:00 am on 9 May, 2023",
        "session_2": [{"dia_id": "D2:1", "speaker": "Bob", "text": "hello"}],
    },
    "qa": [{"question": "What did Bob say?", "category": 4}],
}]


def test_percentile_matches_linear_interpolation():
    assert load.percentile([], 50) is None
    assert load.percentile([5.0], 99) == 5.0
    assert load.percentile([1, 2, 3, 4], 50) == 2.5
    assert load.percentile(list(range(101)), 95) == 95
    s = load.latency_summary([0.1, 0.2, 0.3])
    assert s["n"] == 3 and s["p50"] == 200.0 and s["max"] == 300.0


def test_batch_plan_is_endless_and_ids_are_unique_per_round(tmp_path: Path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO))
    convs = load_locomo(path)
    plan = load.batch_plan(convs, batch_size=2)
    batches = [next(plan) for _ in range(6)]
    # round 0: session 1 has 4 non-empty turns (2 batches), session 2 one; then round 1
    assert [(b.round, b.session, len(b.turns)) for b in batches] == [
        (0, 1, 2), (0, 1, 2), (0, 2, 1), (1, 1, 2), (1, 1, 2), (1, 2, 1)]
    ids = [i for b in batches for i in b.client_ids()]
    assert len(ids) == len(set(ids)) == 10
    assert batches[0].session_key == "conv-x:session_1"
    skipped = load.batch_plan(convs, batch_size=2, skip_round0=frozenset({"conv-x"}))
    assert next(skipped).round == 1  # a preloaded conversation starts in round 1
    assert load.question_reader("What did Bob say?", convs[0].speakers) == "Bob"
    assert load.question_reader("Where did ann go?", convs[0].speakers) == "Ann Lee"
    assert load.question_reader("Who?", convs[0].speakers) == "Ann Lee"


def test_op_report_counts_errors_and_429s_apart():
    R = load.Result
    results = [R("ingest", 0, 0.1, "ok", 10, 10, 0), R("ingest", 1, 0.2, "http_500", 10),
               R("search", 0, 0.05, "ok", candidates=3, dropped=("lexical:timeout",)),
               R("search", 0, 0.05, "http_429"), R("search", 0, 1.0, "TransportError:timeout")]
    ops = load.op_report(results, wall=10)
    assert ops["ingest"]["errors"] == {"http_500": 1}
    assert ops["ingest"]["messages_accepted"] == 10
    assert ops["ingest"]["messages_in_failed_requests"] == 10
    assert ops["search"]["rate_limited_429"] == 1
    assert ops["search"]["errors"] == {"TransportError:timeout": 1}
    assert ops["search"]["dropped_strategies"] == {"lexical:timeout": 1}


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
 <testcase classname="tests.reliability.test_bad_input" name="test_unicode" time="0.5">
  <properties><property name="inputs_tried" value="12"/></properties></testcase>
 <testcase classname="tests.security.test_cross_account" name="test_matrix[a|b]" time="1.0">
  <properties><property name="facts" value="9 routes, all 404"/></properties></testcase>
 <testcase classname="tests.knowledge.test_rls.TestCatalogue" name="test_forced" time="0.1">
  <failure message="table x has no policy">assert False</failure></testcase>
 <testcase classname="tests.knowledge.test_queue" name="test_redis_down" time="0.0">
  <skipped message="no redis"/></testcase>
</testsuite></testsuites>"""


def test_report_parses_junit_and_fails_on_a_failed_test(tmp_path: Path):
    xml = tmp_path / "junit.xml"
    xml.write_text(JUNIT)
    cases = reliability_report.parse_junit(xml)
    by = {c.name: c for c in cases}
    assert by["TestCatalogue::test_forced"].file == "tests/knowledge/test_rls.py"
    assert by["TestCatalogue::test_forced"].outcome == "failed"
    assert by["test_redis_down"].outcome == "skipped"
    loadj = {"messages": {"sent": 10, "stored": 9, "lost": 1}, "totals": {}}
    assert reliability_report.load_figures(loadj)["lost"] == 1
    out = tmp_path / "r.md"
    rc = reliability_report.main(["--junit-xml", str(xml), "--skip-load", "--out", str(out)])
    text = out.read_text()
    assert rc == 1
    assert "| inputs tried | 12 |" in text
    assert "9 routes, all 404" in text and "test_matrix[a\\|b]" in text
    assert "## Isolation and row-level security" in text and "## Faults" in text
