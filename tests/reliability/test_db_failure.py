"""The database failing under a request: a clear 503, never a 500, and no partial writes.

1. Over real HTTP (live_server): a message batch has inserted its rows and waits on the
   Account's audit lock, which the test holds from another connection; the test then
   terminates the request's backend with pg_terminate_backend. The client gets 503
   `database_unavailable` with a message and Retry-After; none of the batch is stored
   (ATOMIC_REQUESTS); the retry stores it exactly once (client ids) and the audit chain
   verifies.
2. In a subprocess whose settings point at a closed port (no database at all): the
   request transaction cannot even begin, and /readyz, the API and the console all answer
   503 (JSON in the one error shape for the API), never a 500.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from django.db import connection

from knowledge import audit, services
from knowledge.models import AuditEntry, Message, Session
from memhouse.core.tenancy import account_context
from tests.reliability.helpers import assert_error

REPO = Path(__file__).resolve().parents[2]


def _side_connection() -> psycopg.Connection:
    """A second connection to the test database, as the application role."""
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"] or None, port=s["PORT"] or None, user=s["USER"],
                           password=s.get("PASSWORD") or None, dbname=s["NAME"])


def _batch(n: int = 3) -> dict:
    return {"scope": "/", "session": "chat-db-1", "messages": [
        {"id": f"chat-db-1:{i}", "peer_key": "caroline", "text": f"I planted {i + 2} tulips."}
        for i in range(n)]}


def _post(live_server, key: str, body: dict) -> httpx.Response:
    return httpx.post(f"{live_server.url}/api/v1/messages", json=body, timeout=60,
                      headers={"Authorization": f"Bearer {key}"})


@pytest.mark.django_db(transaction=True)
def test_backend_killed_mid_request_is_503_and_nothing_is_half_written(live_server,
                                                                       committed_world):
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
        audit_before = AuditEntry.objects.count()
    holder = _side_connection()
    holder.execute("SELECT pg_advisory_xact_lock(%s)", [audit._lock_key(w.account.id)])
    watcher = _side_connection()  # autocommit: a fresh pg_stat_activity snapshot each query
    watcher.autocommit = True
    result: dict[str, httpx.Response] = {}
    request = threading.Thread(target=lambda: result.setdefault(
        "r", _post(live_server, w.agent_key, _batch())))
    request.start()
    try:
        # The request has written its rows and now waits for the audit lock we hold.
        deadline, victim = time.monotonic() + 30, None
        while victim is None and time.monotonic() < deadline:
            row = watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' "
                "AND wait_event = 'advisory'").fetchone()
            victim = row[0] if row else None
            time.sleep(0.05)
        assert victim is not None, "the request never reached the audit lock"
        # It has written already: its transaction holds an xid (rows inserted, uncommitted).
        xid = watcher.execute("SELECT backend_xid FROM pg_stat_activity WHERE pid = %s",
                             [victim]).fetchone()
        assert xid is not None and xid[0] is not None
        assert watcher.execute("SELECT pg_terminate_backend(%s)", [victim]).fetchone()[0]
        request.join(60)
    finally:
        holder.rollback()  # releases the lock (also when the test failed early)
        request.join(60)
        holder.close()
        watcher.close()
    r = result["r"]
    error = assert_error(r, 503, "database_unavailable")
    assert "retry" in error["message"].lower()
    assert int(r.headers["Retry-After"]) > 0
    with account_context(w.account.id):
        assert not Message.objects.exists()  # the whole batch was rolled back
        assert not Session.objects.exists()
        assert AuditEntry.objects.count() == audit_before

    # The client retries: stored exactly once, and a second retry is a no-op.
    first = _post(live_server, w.agent_key, _batch())
    assert first.status_code == 202, first.text
    assert [m["status"] for m in first.json()["messages"]] == ["created"] * 3
    again = _post(live_server, w.agent_key, _batch())
    assert again.status_code == 202, again.text
    assert [m["status"] for m in again.json()["messages"]] == ["duplicate"] * 3
    with account_context(w.account.id):
        assert sorted(Message.objects.values_list("client_message_id", flat=True)) == [
            f"chat-db-1:{i}" for i in range(3)]
        assert Session.objects.count() == 1
        assert audit.verify(w.account.id).ok
    # The server itself recovered: the next request on that thread works.
    me = httpx.get(f"{live_server.url}/api/v1/me", timeout=30,
                   headers={"Authorization": f"Bearer {w.agent_key}"})
    assert me.status_code == 200


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_PROBE = r"""
import json, django
django.setup()
from django.test import Client
c = Client(raise_request_exception=False)
out = {}
for name, method, path, body in [
        ("readyz", "get", "/readyz", None),
        ("healthz", "get", "/healthz", None),
        ("api_search", "post", "/api/v1/search", {"query": "x"}),
        ("api_me", "get", "/api/v1/me", None),
        ("console", "get", "/console/", None)]:
    kwargs = {"HTTP_AUTHORIZATION": "Bearer mh_abc_def"}
    if body is not None:
        kwargs.update(data=json.dumps(body), content_type="application/json")
    r = getattr(c, method)(path, **kwargs)
    out[name] = {"status": r.status_code, "type": r.get("Content-Type", ""),
                 "retry_after": r.get("Retry-After"), "body": r.content.decode()[:400]}
print("RESULT " + json.dumps(out))
"""


def test_with_the_database_unreachable_everything_answers_503():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "memhouse.settings",
           "DATABASE_URL": f"postgresql://memhouse@127.0.0.1:{_closed_port()}/memhouse",
           "MEMHOUSE_CELERY_EAGER": "true", "MEMHOUSE_RATE_LIMIT_PER_MINUTE": "0"}
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, done.stderr[-3000:]
    out = json.loads(lines[-1].removeprefix("RESULT "))
    assert out["healthz"]["status"] == 200  # liveness needs no database
    ready = out["readyz"]
    assert ready["status"] == 503, ready
    assert json.loads(ready["body"])["checks"]["database"] == "unavailable"
    for name in ("api_search", "api_me"):
        got = out[name]
        assert got["status"] == 503, (name, got)
        assert got["type"].startswith("application/json"), got
        error = json.loads(got["body"])["error"]
        assert error["code"] == "database_unavailable" and error["message"], got
        assert got["retry_after"] and int(got["retry_after"]) > 0
    assert out["console"]["status"] == 503, out["console"]
    assert out["console"]["retry_after"]
