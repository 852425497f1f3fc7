"""Prometheus metrics and structured logs. Neither carries statement or query text.

Metrics live in the default registry of each process (web workers behind a load
balancer are scraped one by one; queue depth is read from the broker at scrape time).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

REQUEST_LATENCY = Histogram(
    "memhouse_request_seconds", "HTTP request latency by route and status class",
    ["route", "method", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
STRATEGY_OUTCOMES = Counter(
    "memhouse_strategy_outcomes_total", "Retrieval strategy outcomes per profile",
    ["profile", "strategy", "outcome"])
QUEUE_DEPTH = Gauge("memhouse_queue_depth", "Messages waiting in a Celery queue", ["queue"])
PIPELINE_LAG = Gauge("memhouse_pipeline_lag_seconds",
                     "Age of the oldest message not yet extracted, per process scrape")


class MetricsMiddleware:
    """Times every request under its URL route pattern (never the raw path or body)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = match.route if match is not None and match.route else "unmatched"
        REQUEST_LATENCY.labels(route=route, method=request.method or "",
                               status=f"{response.status_code // 100}xx").observe(
            time.perf_counter() - started)
        return response


def record_search(profile: str, strategies: dict[str, Any]) -> None:
    for name in strategies.get("contributed", []):
        STRATEGY_OUTCOMES.labels(profile, name, "contributed").inc()
    for name in strategies.get("empty", []):
        STRATEGY_OUTCOMES.labels(profile, name, "empty").inc()
    for name in strategies.get("not_applicable", []):
        STRATEGY_OUTCOMES.labels(profile, name, "not_applicable").inc()
    for dropped in strategies.get("dropped", []):
        STRATEGY_OUTCOMES.labels(profile, dropped["name"], f"dropped_{dropped['reason']}").inc()


def _refresh_gauges() -> None:
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        try:
            import redis

            client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=0.5)
            QUEUE_DEPTH.labels("celery").set(client.llen("celery"))
        except Exception:
            QUEUE_DEPTH.labels("celery").set(float("nan"))
    from django.db.models import Min
    from django.utils import timezone

    from knowledge.models import Message
    from memhouse.tenancy import account_context, list_account_ids

    oldest = None
    for account_id in list_account_ids():
        with account_context(account_id):
            first = Message.objects.filter(extracted_at__isnull=True).aggregate(
                m=Min("inserted_at"))["m"]
        if first is not None and (oldest is None or first < oldest):
            oldest = first
    PIPELINE_LAG.set((timezone.now() - oldest).total_seconds() if oldest else 0.0)


@transaction.non_atomic_requests  # each Account is entered in its own transaction
def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics: Prometheus text format (content-free; guard it at the proxy)."""
    _refresh_gauges()
    return HttpResponse(generate_latest(), content_type=CONTENT_TYPE_LATEST)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and structured extras.
    Log calls pass ids and counts, never statement or query text."""

    _STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage(),
        }
        out.update({k: v for k, v in record.__dict__.items() if k not in self._STANDARD})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)
