"""Pooled connections never carry an Account: not after a real HTTP request on a
persistent connection, not after a Celery task, and not on the retrieval engine's
persistent per-strategy connections."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import httpx
import pytest
from django.db import connection, connections

from knowledge import services as ks
from knowledge.lifecycle import transition
from knowledge.models import Scope
from memhouse.core.tenancy import ACCOUNT_SETTING, account_context

pytestmark = pytest.mark.django_db(transaction=True)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _probe() -> dict[str, Any]:
    """In the server thread, on its pooled connection, outside any transaction."""
    from knowledge.models import Knowledge

    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid(), current_setting(%s, true)", [ACCOUNT_SETTING])
        pid, setting = cur.fetchone()
    return {"pid": pid, "setting": setting, "in_atomic": connection.in_atomic_block,
            "knowledge_rows": Knowledge.objects.count()}


@pytest.fixture
def pooled_server(settings: Any) -> Iterator[str]:
    """Django's WSGI app in ONE server thread with CONN_MAX_AGE > 0, so every request
    (and the probe) runs on the same persistent database connection."""
    from django.core.wsgi import get_wsgi_application

    db = connections.settings["default"]
    old_age = db["CONN_MAX_AGE"]
    db["CONN_MAX_AGE"] = 600
    settings.MEMHOUSE_RATE_LIMIT_PER_MINUTE = 0
    django_app = get_wsgi_application()

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if environ["PATH_INFO"] == "/__close":  # close the pooled connection in its thread
            connection.close()
            start_response("204 No Content", [])
            return [b""]
        if environ["PATH_INFO"] == "/__probe":
            body = json.dumps(_probe()).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        return django_app(environ, start_response)

    server = make_server("127.0.0.1", 0, app, server_class=WSGIServer, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        url = f"http://127.0.0.1:{server.server_port}/__close"
        httpx.get(url, timeout=10)
        server.shutdown()
        server.server_close()
        db["CONN_MAX_AGE"] = old_age


def _corpus(w: Any) -> tuple[str, str]:
    from retrieval.vectors import embed_knowledge

    with account_context(w.account.id):
        a = ks.knowledge_propose(account_id=w.account.id, statement="Acme pooled zebra fact.",
                                 scope=w.scope, subject_peer=None, actor="system:test",
                                 sensitivity="public")
        transition(a, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    with account_context(w.other_account.id):
        b = ks.knowledge_propose(account_id=w.other_account.id,
                                 statement="Other pooled zebra fact.",
                                 scope=Scope.objects.get(path="/marketing"), subject_peer=None,
                                 actor="system:test", sensitivity="public")
        transition(b, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    embed_knowledge(w.account.id, [str(a.id)])
    embed_knowledge(w.other_account.id, [str(b.id)])
    return str(a.id), str(b.id)


def test_a_persistent_request_connection_carries_no_account(committed_world, pooled_server,
                                                            record_property):
    w = committed_world
    a_id, b_id = _corpus(w)
    with httpx.Client(base_url=pooled_server, timeout=30) as http:
        first = http.get("/__probe").json()
        assert first["setting"] in (None, "") and first["knowledge_rows"] == 0
        pids = {first["pid"]}
        for key, scope, mine, theirs in ((w.agent_key, "/marketing/social", a_id, b_id),
                                         (w.outsider_key, "/marketing", b_id, a_id),
                                         (w.agent_key, "/marketing/social", a_id, b_id)):
            r = http.post("/api/v1/search", headers={"Authorization": f"Bearer {key}"},
                          json={"query": "pooled zebra", "scope": scope, "deadline_ms": 5000})
            assert r.status_code == 200, r.text
            ids = {c["id"] for c in r.json()["candidates"]}
            assert mine in ids and theirs not in ids
            me = http.get("/api/v1/me", headers={"Authorization": f"Bearer {key}"})
            assert me.status_code == 200
            after = http.get("/__probe").json()
            # Same backend, so the connection really was reused; no Account left on it.
            pids.add(after["pid"])
            assert after["setting"] in (None, ""), after
            assert not after["in_atomic"] and after["knowledge_rows"] == 0
        assert len(pids) == 1
    record_property("facts", "pooled request connection: 3 authenticated requests on one "
                             "PostgreSQL backend, no Account setting left after any")


def test_a_celery_task_leaves_no_account_on_the_connection(committed_world, settings):
    from django.db import transaction

    settings.CELERY_TASK_ALWAYS_EAGER = True
    w = committed_world
    with account_context(w.account.id):
        item = ks.knowledge_propose(account_id=w.account.id, statement="Acme task fact.",
                                    scope=w.scope, subject_peer=None, actor="system:test")
        transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    from retrieval.entity_tasks import index_entities

    before_pid = _pid()
    index_entities.delay(str(w.account.id), [str(item.id)])
    from governance.tasks import sweep_unprocessed

    sweep_unprocessed.delay(older_than_seconds=0)  # enters every Account in turn
    assert _pid() == before_pid
    with connection.cursor() as cur:
        cur.execute("SELECT current_setting(%s, true)", [ACCOUNT_SETTING])
        assert cur.fetchone()[0] in (None, "")
    from knowledge.models import Knowledge, Message

    assert Knowledge.objects.count() == 0 and Message.objects.count() == 0
    with transaction.atomic():
        assert not Knowledge.objects.exists()


def _pid() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        return int(cur.fetchone()[0])


def _strategy_state() -> dict[int, tuple[Any, int]]:
    """pid -> (account setting, transaction status) of every strategy connection, read
    while no search runs."""
    from retrieval import engine

    out: dict[int, tuple[Any, int]] = {}
    with engine._strategy_connections_lock:
        wrappers = list(engine._strategy_connections)
    for wrapper in wrappers:
        raw = wrapper.connection
        if raw is None or raw.closed:
            continue
        status = int(raw.info.transaction_status)
        with raw.cursor() as cur:
            cur.execute("SELECT pg_backend_pid(), current_setting(%s, true)", [ACCOUNT_SETTING])
            pid, setting = cur.fetchone()
        out[pid] = (setting, status)
    return out


def test_strategy_connections_carry_no_account_between_searches(committed_world,
                                                                record_property):
    from dataclasses import replace

    from memhouse.core.principal import Reader
    from retrieval import engine
    from retrieval.profiles import resolve_profile

    w = committed_world
    a_id, b_id = _corpus(w)
    seen: set[int] = set()
    for account, scope_path, mine, theirs in (
            (w.account, "/marketing/social", a_id, b_id),
            (w.other_account, "/marketing", b_id, a_id),
            (w.account, "/marketing/social", a_id, b_id)):
        with account_context(account.id):
            scope = Scope.objects.get(path=scope_path)
            reader = Reader(account_id=account.id, posture="public_only")
            profile = replace(resolve_profile(requested="balanced", scope=scope,
                                              default="balanced"), deadline_ms=5000)
            result = engine.search(reader=reader, scope=scope, query="pooled zebra",
                                   profile=profile, limit=10)
        ids = {c["id"] for c in result.candidates}
        raw_ids = {kid for lst in result.lists.values() for kid, _ in lst}
        assert mine in ids and theirs not in ids and theirs not in raw_ids
        state = _strategy_state()
        assert state, "the strategy threads kept no connection"
        for pid, (setting, status) in state.items():
            assert setting in (None, ""), f"strategy backend {pid} still bound to {setting}"
            assert status == 0, f"strategy backend {pid} left a transaction open"
        if seen:
            assert seen & set(state), "the second search did not reuse any strategy connection"
        seen |= set(state)
    record_property("facts", f"strategy connections: {len(seen)} persistent backends reused "
                             f"across A/B/A searches, none left bound to an Account")
