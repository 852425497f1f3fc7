"""Retrieval's Prometheus metrics (served by memhouse.observability's /metrics view from
the process's default registry). They carry no statement or query text."""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter

STRATEGY_OUTCOMES = Counter(
    "memhouse_strategy_outcomes_total", "Retrieval strategy outcomes per profile",
    ["profile", "strategy", "outcome"])


def record_search(profile: str, strategies: dict[str, Any],
                  outcomes: list[dict[str, str]] | None = None) -> None:
    for name in strategies.get("contributed", []):
        STRATEGY_OUTCOMES.labels(profile, name, "contributed").inc()
    for name in strategies.get("empty", []):
        STRATEGY_OUTCOMES.labels(profile, name, "empty").inc()
    for name in strategies.get("not_applicable", []):
        STRATEGY_OUTCOMES.labels(profile, name, "not_applicable").inc()
    for dropped in strategies.get("dropped", []):
        STRATEGY_OUTCOMES.labels(profile, dropped["name"], f"dropped_{dropped['reason']}").inc()
    # A lane dropped past its own time (semantic.said_when, ...): semantic itself counted
    # above as contributed; operators see how often the lane is left out at their scale.
    for o in outcomes or []:
        if o.get("outcome") == "dropped":
            STRATEGY_OUTCOMES.labels(profile, o["strategy"], f"dropped_{o['reason_class']}").inc()
