"""Prometheus metrics and JSON logs carry routes, outcomes and counts, never content."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from memhouse.observability import JsonFormatter
from tests.retrieval.test_search import corpus  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_metrics_report_routes_and_strategy_outcomes_without_text(live_server,
                                                                   corpus):  # noqa: F811
    w, _ = corpus
    r = httpx.post(f"{live_server.url}/api/v1/search", timeout=30,
                   headers={"Authorization": f"Bearer {w.agent_key}"},
                   json={"query": "hiking mountains", "scope": "/marketing/social",
                         "deadline_ms": 5000})
    assert r.status_code == 200
    text = httpx.get(f"{live_server.url}/metrics", timeout=30).text
    assert 'memhouse_request_seconds_count{method="POST",route="api/v1/search",' \
           'status="2xx"}' in text
    assert 'memhouse_strategy_outcomes_total{outcome="contributed",profile="balanced",' \
           'strategy="semantic"}' in text
    assert "memhouse_pipeline_lag_seconds" in text
    assert "hiking" not in text and "mountains" not in text


def test_a_lane_dropped_past_its_time_is_counted_under_its_own_name():
    from prometheus_client import REGISTRY

    from retrieval.metrics import record_search

    labels = {"profile": "balanced", "strategy": "semantic.said_when",
              "outcome": "dropped_timeout"}
    before = REGISTRY.get_sample_value("memhouse_strategy_outcomes_total", labels) or 0.0
    record_search("balanced", {"contributed": ["semantic"]},
                  [{"strategy": "semantic.said_when", "outcome": "dropped",
                    "reason_class": "timeout"},
                   {"strategy": "temporal", "outcome": "not_applicable",
                    "reason_class": "applicability"}])
    assert REGISTRY.get_sample_value("memhouse_strategy_outcomes_total", labels) == before + 1
    # not_applicable comes from `strategies`, never twice from the outcomes
    assert REGISTRY.get_sample_value("memhouse_strategy_outcomes_total", {
        "profile": "balanced", "strategy": "temporal",
        "outcome": "dropped_applicability"}) is None


def test_json_log_lines_are_objects_with_extras():
    record = logging.LogRecord("memhouse.test", logging.WARNING, __file__, 1,
                               "strategy %s failed", ("lexical",), None)
    record.account_id = "a1"
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "WARNING" and line["message"] == "strategy lexical failed"
    assert line["account_id"] == "a1" and line["logger"] == "memhouse.test"
