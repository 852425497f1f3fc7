"""Prometheus metrics and structured logs. Neither carries statement or query text.

Metrics live in the default registry of each process (web workers behind a load
balancer are scraped one by one). What happens in Celery workers is read from the
broker's Redis at scrape time instead, so any web process reports it: queue depth and the
age of the oldest message per queue (from the ``memhouse_enqueued_at`` publish header),
per-task start lag (recorded by workers in ``task_prerun``) and the beat heartbeat age.
Model calls are counted where they run (``memhouse_model_calls_total``); the durable,
per-Account count is the usage ledger.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, SummaryMetricFamily

log = logging.getLogger(__name__)

# Broker keys written by memhouse.celery's signal handlers and read by the scrape below.
# They live here, the lower module, so metrics never import the Celery app (no cycle).
ENQUEUED_HEADER = "memhouse_enqueued_at"
TASK_LAG_KEY = "memhouse:metrics:task_start_lag"
BEAT_HEARTBEAT_KEY = "memhouse:beat:heartbeat"

REQUEST_LATENCY = Histogram(
    "memhouse_request_seconds", "HTTP request latency by route and status class",
    ["route", "method", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
MODEL_CALLS = Counter("memhouse_model_calls_total",
                      "Generation-model calls by purpose (schema name) and outcome",
                      ["purpose", "outcome"])
MODEL_CALLS_UNATTRIBUTED = Counter(
    "memhouse_model_calls_unattributed_total",
    "Model calls no Account could be billed for (a metering gap; should stay 0)", ["purpose"])
MODEL_TOKENS = Counter("memhouse_model_tokens_total",
                       "Tokens the provider reported, by purpose and type", ["purpose", "type"])
MODEL_CALL_SECONDS = Histogram("memhouse_model_call_seconds",
                               "Model call duration including retries", ["purpose"],
                               buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
PIPELINE_LAG = Gauge("memhouse_pipeline_lag_seconds",
                     "Age of the oldest message not yet extracted, per process scrape")
DEAD_LETTERED = Gauge("memhouse_messages_dead_lettered",
                      "Messages whose extraction failed and that wait for an administrator "
                      "(GET /api/v1/admin/dead-letters); should stay 0")
VERSIONS_DEAD_LETTERED = Gauge(
    "memhouse_document_versions_dead_lettered",
    "Live document versions set aside (processing raised, too many statements, or cut off "
    "MEMHOUSE_MAX_INGEST_ATTEMPTS times) that wait for an administrator "
    "(GET /api/v1/admin/dead-letters); should stay 0")


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


_PRIORITY_SEP = "\x06\x16"  # kombu's Redis transport: <queue><sep><priority> lists
_PRIORITY_STEPS = (3, 6, 9)


def queue_names(client: Any) -> list[str]:
    """The default queue, the named queues (reported at 0 before their first message),
    and every queue bound in the broker (kombu's binding sets)."""
    names = {str(getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery")),
             *getattr(settings, "MEMHOUSE_QUEUE_TASKS", {})}
    for key in client.scan_iter(match="_kombu.binding.*", count=100):
        for member in client.smembers(key):
            text = member.decode() if isinstance(member, bytes) else str(member)
            names.add(text.split(_PRIORITY_SEP)[-1])
    return sorted(n for n in names if n)


def _enqueued_at(raw: bytes | str | None) -> float | None:
    if not raw:
        return None
    try:
        value = json.loads(raw).get("headers", {}).get(ENQUEUED_HEADER)
        return float(value) if value is not None else None
    except (ValueError, TypeError, AttributeError):
        return None


def broker_metrics(url: str, now: float | None = None) -> CollectorRegistry:
    """Worker-side state read from the broker's Redis, as a registry of its own.
    Raises when Redis does not answer (the caller reports that as NaN)."""
    import redis

    now = time.time() if now is None else now
    client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    depth = GaugeMetricFamily("memhouse_queue_depth",
                              "Messages waiting in a Celery queue (all priorities)",
                              labels=["queue"])
    oldest = GaugeMetricFamily(
        "memhouse_queue_oldest_message_age_seconds",
        "Seconds since the oldest waiting message was published (0 when empty)",
        labels=["queue"])
    for queue in queue_names(client):
        lists = [queue, *(f"{queue}{_PRIORITY_SEP}{p}" for p in _PRIORITY_STEPS)]
        count, ages = 0, []
        for name in lists:
            length = int(client.llen(name))
            count += length
            if length:  # LPUSH on publish, BRPOP on consume: the oldest is at the tail
                stamp = _enqueued_at(client.lindex(name, -1))
                if stamp is not None:
                    ages.append(max(0.0, now - stamp))
        depth.add_metric([queue], count)
        oldest.add_metric([queue], max(ages) if ages else (float("nan") if count else 0.0))
    lag = SummaryMetricFamily("memhouse_task_start_lag_seconds",
                              "Publish-to-start wait of tasks, recorded by workers",
                              labels=["task"])
    last = GaugeMetricFamily("memhouse_task_start_lag_last_seconds",
                             "Start lag of the most recent task per name", labels=["task"])
    worst = GaugeMetricFamily("memhouse_task_start_lag_max_seconds",
                              "Largest start lag since the previous scrape", labels=["task"])
    fields = {(k.decode() if isinstance(k, bytes) else k): float(v)
              for k, v in client.hgetall(TASK_LAG_KEY).items()}
    for task in sorted({k.rsplit("|", 1)[0] for k in fields}):
        lag.add_metric([task], count_value=int(fields.get(f"{task}|count", 0.0)),
                       sum_value=fields.get(f"{task}|sum", 0.0))
        last.add_metric([task], fields.get(f"{task}|last", 0.0))
        worst.add_metric([task], fields.get(f"{task}|max", 0.0))
        client.hset(TASK_LAG_KEY, f"{task}|max", 0)
    beat = GaugeMetricFamily("memhouse_beat_heartbeat_age_seconds",
                             "Seconds since celery beat last ticked (NaN: never seen)")
    raw = client.get(BEAT_HEARTBEAT_KEY)
    try:
        beat.add_metric([], max(0.0, now - float(json.loads(raw)["at"])) if raw
                        else float("nan"))
    except (ValueError, KeyError, TypeError):
        beat.add_metric([], float("nan"))
    up = GaugeMetricFamily("memhouse_broker_up", "1 when the broker answered this scrape")
    up.add_metric([], 1)
    families = [up, depth, oldest, lag, last, worst, beat]

    class _Snapshot:
        def collect(self) -> Any:
            return families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot())  # type: ignore[arg-type]
    return registry


def _broker_down() -> bytes:
    up = GaugeMetricFamily("memhouse_broker_up", "1 when the broker answered this scrape")
    up.add_metric([], 0)

    class _Down:
        def collect(self) -> Any:
            return [up]

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Down())  # type: ignore[arg-type]
    return generate_latest(registry)


def _broker_text() -> bytes:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return b""  # no broker: work runs in-process
    try:
        return generate_latest(broker_metrics(settings.CELERY_BROKER_URL))
    except Exception:
        log.warning("metrics: the broker did not answer")
        return _broker_down()


def _refresh_gauges() -> None:
    from django.db.models import Min
    from django.utils import timezone

    from knowledge.accounts import list_account_ids
    from knowledge.ingest.dead_letter import dead_versions
    from knowledge.models import Message
    from memhouse.core.db_router import replica_reads
    from memhouse.core.tenancy import account_context

    oldest = None
    dead = dead_docs = 0
    for account_id in list_account_ids():
        # Gauges tolerate the replica's lag: read there when one is configured.
        with account_context(account_id), replica_reads(account_id):
            pending = Message.objects.filter(extracted_at__isnull=True)
            # Dead letters wait for a person, not for the pipeline: counted on their own.
            first = pending.filter(extraction_failed_at__isnull=True).aggregate(
                m=Min("inserted_at"))["m"]
            dead += pending.filter(extraction_failed_at__isnull=False).count()
            dead_docs += dead_versions(account_id).count()
        if first is not None and (oldest is None or first < oldest):
            oldest = first
    PIPELINE_LAG.set((timezone.now() - oldest).total_seconds() if oldest else 0.0)
    DEAD_LETTERED.set(dead)
    VERSIONS_DEAD_LETTERED.set(dead_docs)


@transaction.non_atomic_requests  # each Account is entered in its own transaction
def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics: Prometheus text format (content-free; guard it at the proxy)."""
    _refresh_gauges()
    broker = _broker_text()
    return HttpResponse(generate_latest() + broker, content_type=CONTENT_TYPE_LATEST)


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


# Paths that carry a secret: invitation links issued before the token moved after '#'
# (issue #34) still open at /console/invitation/<token>/, and the request line is what
# an access log keeps.
_SECRET_PATH = re.compile(r"(/console/invitation/)(?!code/)[^/\s?\"]+")


class RedactSecretPaths(logging.Filter):
    """Replace the token in an old-form invitation path with [redacted] in a request log
    record (runserver's `django.server`; gunicorn's access log is the proxy's business:
    docs/deploy.md)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_SECRET_PATH.sub(r"\1[redacted]", a) if isinstance(a, str)
                                else a for a in record.args)
        if isinstance(record.msg, str):
            record.msg = _SECRET_PATH.sub(r"\1[redacted]", record.msg)
        return True
