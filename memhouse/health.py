"""Liveness and readiness probes (no authentication, no Account, no content)."""

from __future__ import annotations

from django.conf import settings
from django.db import connection, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse


# Probes run outside ATOMIC_REQUESTS: the request transaction would need the database
# before the probe could report that it is unavailable (and liveness needs none at all).
@transaction.non_atomic_requests
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _database() -> dict[str, str]:
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles "
                        "WHERE rolname = current_user")
            row = cur.fetchone()
        checks["database"] = "ok" if row and not row[0] else "unsafe_role"
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
        checks["migrations"] = "ok" if not pending else "pending"
        with connection.cursor() as cur:
            cur.execute("SELECT proleakproof FROM pg_proc WHERE oid = "
                        "'pg_catalog.ts_match_vq(tsvector, tsquery)'::regprocedure")
            row = cur.fetchone()
        # Not leakproof: row-level security keeps the full-text index out of every
        # lexical search (correct but slow); docs/deploy/init-db.sql has the fix.
        checks["lexical_index"] = "ok" if row and row[0] else "degraded"
    except Exception:  # a probe reports, it does not raise
        checks["database"] = "unavailable"
    return checks


def _replica() -> dict[str, str]:
    """With DATABASE_REPLICA_URL: ``ok`` (a standby, as a role bound by row-level
    security), ``unsafe_role`` (a superuser or BYPASSRLS role: replica reads would cross
    Accounts; not ready), ``not_in_recovery`` (a writable server, not a standby) or
    ``unreachable``. The last two still serve: the app never writes there, and reads go
    to the primary while the replica cannot be reached."""
    from memhouse.core.db_router import REPLICA, replica_configured

    if not replica_configured():
        return {}
    try:
        with connections[REPLICA].cursor() as cur:
            cur.execute("SELECT rolsuper OR rolbypassrls, pg_is_in_recovery() FROM pg_roles "
                        "WHERE rolname = current_user")
            row = cur.fetchone()
    except Exception:  # a probe reports, it does not raise
        return {"replica": "unreachable"}
    if row is None or row[0]:
        return {"replica": "unsafe_role"}
    return {"replica": "ok" if row[1] else "not_in_recovery"}


def _broker() -> str:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return "not_used"  # work runs in-process
    try:
        import redis

        redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=1).ping()
        return "ok"
    except Exception:
        return "unavailable"


def _embedder() -> str:
    try:
        from retrieval.embedding import get_embedder

        get_embedder().identity  # noqa: B018  (resolves the model files and their digest)
        return "ok"
    except Exception:
        return "unavailable"


def _llm() -> tuple[str, str | None]:
    """The generation provider: ``not_used`` without one; else whether it takes
    structured output, and in which form (memhouse.core.llm.readiness probes it, cached)."""
    from django.core.exceptions import ImproperlyConfigured

    from memhouse.core.llm import OpenAICompatibleProvider, get_provider, readiness

    try:
        provider = get_provider()
    except (ImproperlyConfigured, ValueError):
        return "misconfigured", None
    if provider is None:
        return "not_used", None
    if not isinstance(provider, OpenAICompatibleProvider):
        return "ok", None
    return readiness(provider)


def _beat() -> dict[str, object]:
    """The beat schedule as this process sees it: ``running`` (its in-process beat, under
    `manage.py serve`, ticks: when it last did, which entry is due next), ``standby``
    (another serve on this database ticks), ``disabled`` (serve --no-beat /
    MEMHOUSE_SERVE_BEAT=false), ``stalled`` (running, but no pass for a minute) or
    ``not_in_process`` (gunicorn and the like: a separate `celery beat` runs it; its
    health check and /metrics watch it). Reported, never a reason to be unready: the
    API serves without it."""
    import time

    from memhouse.core.celery_schedule import beat_report

    report = beat_report()
    last = report.pop("last_tick_epoch", None)
    if report.get("state") == "running" and isinstance(last, (int, float)) and (
            time.time() - last > 60):
        report["state"] = "stalled"
    return report


@transaction.non_atomic_requests
def readyz(request: HttpRequest) -> JsonResponse:
    llm, response_format = _llm()
    checks = {**_database(), **_replica(), "broker": _broker(), "embedder": _embedder(),
              "llm": llm}
    # "degraded" still serves: a slow full-text index, or a model server that is down for
    # now (every model feature falls back to its model-free path, call by call), as does
    # a model whose first probe is still running, or a replica that is down or no standby.
    # A model that takes no structured output, or refuses our key/model/URL, never will:
    # not ready.
    ok = all(v in ("ok", "not_used", "degraded", "probing", "unreachable", "not_in_recovery")
             for v in checks.values())
    return JsonResponse({"status": "ok" if ok else "unavailable", "checks": checks,
                         "llm_response_format": response_format, "beat": _beat()},
                        status=200 if ok else 503)
