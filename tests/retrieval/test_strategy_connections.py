"""The search fan-out's connections: each strategy thread keeps its connection between
searches, binds every transaction to the reader's Account in one round trip, and never
carries one Account's setting into another search. Real PostgreSQL, real threads."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from django.db import DEFAULT_DB_ALIAS, connection

from knowledge.models import Scope
from memhouse.core.principal import internal_reader
from memhouse.core.tenancy import account_context
from retrieval import engine
from retrieval.profiles import BASE_PROFILES, with_deadline
from retrieval.strategies.base import StrategyResult

pytestmark = pytest.mark.django_db(transaction=True)

# Behaviour, not speed: a loaded machine must not turn a strategy into a timeout.
BALANCED = with_deadline(BASE_PROFILES["balanced"], 20_000)


def _scope(account_id, path):
    with account_context(account_id):
        return Scope.objects.get(path=path)


def _search(account_id, scope, query="hiking", **kw):
    with account_context(account_id):
        return engine.search(reader=internal_reader(account_id), scope=scope, query=query,
                             profile=BALANCED, limit=5, **kw)


def test_no_account_setting_outlives_a_strategys_transaction(committed_world, monkeypatch):
    """Two Accounts' searches take turns on the same strategy threads: each strategy sees
    exactly its reader's Account (the setting and what row-level security lets it read),
    a strategy that fails mid-transaction leaves nothing behind for the next search, and
    afterwards no thread's connection holds an Account at all."""
    w = committed_world
    a, b = w.account.id, w.other_account.id
    scopes = {a: _scope(a, "/marketing/social"), b: _scope(b, "/marketing")}
    peers = {a: 4, b: 1}  # alice, bob, carol, scribe / mallory
    seen: list[tuple[object, str, int, int]] = []
    fail_next = [True]

    def probe(ctx):
        with connection.cursor() as cur:
            cur.execute("SELECT current_setting('memhouse.account_id', true), "
                        "pg_backend_pid(), (SELECT count(*) FROM memhouse_peer)")
            bound, pid, visible_peers = cur.fetchone()
            seen.append((ctx.reader.account_id, bound, pid, visible_peers))
            if fail_next[0]:  # a database error mid-transaction, Account A's
                fail_next[0] = False
                cur.execute("SELECT 1 / 0")
        return StrategyResult("lexical")

    monkeypatch.setitem(engine.FIRST_STAGE, "lexical", probe)
    first = _search(a, scopes[a])
    assert {"name": "lexical", "reason": "error"} in first.strategies["dropped"]
    for i in range(12):
        account = (b, a)[i % 2]
        res = _search(account, scopes[account])
        assert "lexical" not in {d["name"] for d in res.strategies["dropped"]}
    assert len(seen) == 13
    for reader_account, bound, _, visible_peers in seen:
        assert bound == str(reader_account)
        assert visible_peers == peers[reader_account]
    # The threads kept their connections: fewer backends than strategy runs.
    assert len({pid for _, _, pid, _ in seen}) < len(seen)

    # Every pool thread's connection, outside any transaction: no Account.
    workers = engine._pool._max_workers
    barrier = threading.Barrier(workers)

    def session_account() -> str | None:
        barrier.wait(timeout=30)  # one task per thread: each waits for all the others
        engine._ready_connection(DEFAULT_DB_ALIAS)  # registered, so the suite closes it
        with connection.cursor() as cur:
            cur.execute("SELECT current_setting('memhouse.account_id', true)")
            return cur.fetchone()[0]

    settings = [f.result(timeout=60) for f in
                [engine._pool.submit(session_account) for _ in range(workers)]]
    assert all(not s for s in settings), settings


def test_a_strategy_that_cannot_apply_is_answered_without_a_thread(committed_world,
                                                                    monkeypatch):
    """Temporal without as_of (most searches) never reaches a thread, a connection or a
    transaction; the search still reports it not applicable, as before."""
    w = committed_world
    scope = _scope(w.account.id, "/marketing/social")
    calls: list[object] = []
    real = engine.FIRST_STAGE["temporal"]

    def counted(ctx):
        calls.append(ctx.as_of)
        return real(ctx)

    monkeypatch.setitem(engine.FIRST_STAGE, "temporal", counted)
    res = _search(w.account.id, scope)
    assert calls == []
    assert "temporal" in res.strategies["not_applicable"]
    assert {"strategy": "temporal", "outcome": "not_applicable",
            "reason_class": "applicability"} in res.retrieval_outcomes
    as_of = datetime(2024, 1, 1, tzinfo=UTC)
    res = _search(w.account.id, scope, as_of=as_of)
    assert calls == [as_of]
