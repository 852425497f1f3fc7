"""Liveness and readiness probes (no authentication, no Account, no content)."""

from __future__ import annotations

from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
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
    except Exception:  # a probe reports, it does not raise
        checks["database"] = "unavailable"
    ok = all(v == "ok" for v in checks.values())
    return JsonResponse({"status": "ok" if ok else "unavailable", "checks": checks},
                        status=200 if ok else 503)
