"""The read replica against a real streaming hot standby (tests/standby.py) of the test
run's embedded PostgreSQL, configured as DATABASE_REPLICA_URL would configure it.

Proof that a read was served by the standby: replay is paused (pg_wal_replay_pause), a
statement is written on the primary, and the read does not see it, then does once replay
resumes. The standby is one module-wide; every test starts with replay running and caught
up."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, router, transaction

import memhouse.settings as project_settings
from knowledge import selectors, services
from knowledge.models import Knowledge, UsageEntry
from memhouse.core import db_router, embedded_db
from memhouse.core.db_router import REPLICA, read_alias, replica_reads
from memhouse.core.env import env_str
from memhouse.core.principal import internal_reader
from memhouse.core.tenancy import account_context, set_account
from retrieval.engine import close_strategy_connections
from retrieval.models import Projection
from tests.governance.helpers import active_about
from tests.standby import Standby, StandbyUnavailable, start_standby

# `replica` beside `default`: the tests also use the replica connection directly. It is
# a test mirror (TEST.MIRROR), so the test case never flushes it.
pytestmark = pytest.mark.django_db(transaction=True, databases=[DEFAULT_DB_ALIAS, REPLICA])

COLD = "Alice plays the cello in a string quartet."
LAGGING = "Alice keeps bees on her allotment."
SCOPE = "/marketing/social"  # the world's scope, where its statements are


def _unavailable(reason: str) -> None:
    # CI has the embedded server and its binaries: there a missing piece is a failure.
    if os.environ.get("CI") == "true":
        pytest.fail(f"no standby: {reason}")
    pytest.skip(f"no standby: {reason}")


@pytest.fixture(scope="module")
def standby(django_db_setup: Any, django_db_blocker: Any,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standby]:
    """A standby of the primary holding the test database, as the `replica` connection."""
    if env_str("DATABASE_URL"):
        _unavailable("the standby is made from the embedded server; DATABASE_URL is set")
    with django_db_blocker.unblock():
        try:
            node = start_standby(embedded_db.ensure_embedded(),
                                 tmp_path_factory.mktemp("replica"))
        except StandbyUnavailable as exc:
            _unavailable(str(exc))
        test_db = str(connections[DEFAULT_DB_ALIAS].settings_dict["NAME"])
        entry = project_settings.replica_database(node.url(test_db))
        connections.settings[REPLICA] = connections.configure_settings(
            {DEFAULT_DB_ALIAS: {}, REPLICA: entry})[REPLICA]
        try:
            yield node
        finally:
            close_strategy_connections()  # the strategy threads' replica connections too
            connections[REPLICA].close()
            del connections[REPLICA]
            del connections.settings[REPLICA]
            node.stop()


@pytest.fixture
def replica(standby: Standby) -> Iterator[Standby]:
    standby.resume()
    yield standby
    standby.resume()  # a failed test never leaves the next one lagging


def _get(live_server: Any, key: str, path: str, **params: Any) -> httpx.Response:
    r = httpx.get(f"{live_server.url}/api/v1/{path}", params=params, timeout=60,
                  headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200, r.text
    return r


def _post(live_server: Any, key: str, path: str, body: dict[str, Any],
          status: int = 200) -> httpx.Response:
    r = httpx.post(f"{live_server.url}/api/v1/{path}", json=body, timeout=60,
                   headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == status, r.text
    return r


def _listed(live_server: Any, key: str, **params: Any) -> set[str]:
    return {i["id"] for i in _get(live_server, key, "knowledge", **params).json()["items"]}


def _search(live_server: Any, key: str, query: str, **body: Any) -> dict[str, Any]:
    # A cold process on a shared machine: time enough that no strategy is dropped.
    r = _post(live_server, key, "search", {"query": query, "scope": SCOPE,
                                           "deadline_ms": 10_000, **body})
    assert r.json()["strategies"]["dropped"] == [], r.json()["strategies"]
    return dict(r.json())


def _found(live_server: Any, key: str, query: str, **body: Any) -> set[str]:
    return {c["id"] for c in _search(live_server, key, query, **body)["candidates"]}


def _statement(world: Any, text: str) -> str:
    with account_context(world.account.id):
        return str(active_about(world, text).pk)


def test_replica_safe_reads_are_served_by_the_standby(
        replica: Standby, committed_world: Any, live_server: Any) -> None:
    w = committed_world
    cello = _statement(w, COLD)
    # The key's first call stamps its last use, a write, so that call reads the primary
    # (read-your-writes); the calls below, within the minute, write nothing first.
    assert _listed(live_server, w.agent_key, peer_key="alice") == {cello}
    replica.catch_up()
    replica.pause()
    bees = _statement(w, LAGGING)  # on the primary only, while replay is paused

    assert _listed(live_server, w.agent_key, peer_key="alice") == {cello}
    detail = httpx.get(f"{live_server.url}/api/v1/knowledge/{bees}", timeout=60,
                       params={"peer_key": "alice"},
                       headers={"Authorization": f"Bearer {w.agent_key}"})
    assert detail.status_code == 404  # not on the standby yet
    # Not found by the strategies either (each runs on its own connection): the one
    # word only the lagging statement has matches nothing on the standby.
    lagging = _search(live_server, w.agent_key, "Who keeps bees?", peer_key="alice")
    assert lagging["candidates"] == [] and "lexical" in lagging["strategies"]["empty"]
    assert cello in _found(live_server, w.agent_key, "Who plays the cello?",
                           peer_key="alice")
    profile = _post(live_server, w.agent_key, "stable-profile", {"peer_key": "alice"}).json()
    assert "bees" not in str(profile)
    # Each of those requests wrote its usage row, and those writes went to the primary.
    with account_context(w.account.id):
        assert UsageEntry.objects.filter(kind="search").count() == 2

    replica.resume()
    replica.catch_up()
    assert _listed(live_server, w.agent_key, peer_key="alice") == {cello, bees}
    caught_up = _search(live_server, w.agent_key, "Who keeps bees?", peer_key="alice")
    assert bees in {c["id"] for c in caught_up["candidates"]}
    assert "lexical" in caught_up["strategies"]["contributed"]


def test_row_level_security_binds_the_standby(
        replica: Standby, committed_world: Any, live_server: Any) -> None:
    w = committed_world
    cello = _statement(w, COLD)
    _listed(live_server, w.outsider_key)  # the outsider key's stamp, on the primary
    replica.catch_up()
    replica.pause()  # from here only the standby can answer as the replica reads

    # Account B over HTTP: nothing of Account A's, served by the standby.
    assert _listed(live_server, w.outsider_key) == set()
    assert _found(live_server, w.outsider_key, "Who plays the cello?", scope="/") == set()
    theirs = httpx.post(f"{live_server.url}/api/v1/search", timeout=60,
                        json={"query": "Who plays the cello?", "scope": SCOPE},
                        headers={"Authorization": f"Bearer {w.outsider_key}"})
    assert theirs.status_code == 404  # Account A's scope is not there for Account B

    # The replica connection itself: the application role, neither superuser nor
    # BYPASSRLS, on a server in recovery.
    with transaction.atomic(using=REPLICA), connections[REPLICA].cursor() as cur:
        cur.execute("SELECT current_user, rolsuper, rolbypassrls, pg_is_in_recovery() "
                    "FROM pg_roles WHERE rolname = current_user")
        assert cur.fetchone() == (embedded_db.APP_ROLE, False, False, True)
        # No Account in the transaction: no row at all.
        assert not Knowledge.objects.using(REPLICA).exists()
    with transaction.atomic(using=REPLICA):
        set_account(w.other_account.id, using=REPLICA)
        assert not Knowledge.objects.using(REPLICA).filter(account_id=w.account.id).exists()
        assert not Knowledge.objects.using(REPLICA).filter(pk=cello).exists()
    with transaction.atomic(using=REPLICA):
        set_account(w.account.id, using=REPLICA)
        assert Knowledge.objects.using(REPLICA).filter(pk=cello).exists()

    ready = httpx.get(f"{live_server.url}/readyz", timeout=60).json()
    assert ready["checks"]["replica"] == "ok"


def test_a_write_is_refused_by_the_standby_and_never_routed_there(
        replica: Standby, committed_world: Any) -> None:
    w = committed_world
    cello = _statement(w, COLD)
    replica.catch_up()
    with transaction.atomic(using=REPLICA):
        set_account(w.account.id, using=REPLICA)
        with pytest.raises(DatabaseError, match="read-only transaction"):
            Knowledge.objects.using(REPLICA).filter(pk=cello).update(confidence=0.1)

    with account_context(w.account.id), replica_reads(w.account.id) as alias:
        assert alias == REPLICA and router.db_for_read(Knowledge) == REPLICA
        # A write in the block goes to the primary (the standby would refuse it), and
        # the block's later reads are the primary's, so it reads what it wrote.
        UsageEntry.objects.create(account_id=w.account.id, kind="search", units=1)
        assert read_alias() == DEFAULT_DB_ALIAS
        assert UsageEntry.objects.filter(kind="search").count() == 1
        assert router.db_for_write(Knowledge) == DEFAULT_DB_ALIAS
    # A row read on the replica is saved on the primary.
    with account_context(w.account.id), replica_reads(w.account.id):
        row = Knowledge.objects.get(pk=cello)
        assert row._state.db == REPLICA
        row.confidence = 0.42
        row.save(update_fields=["confidence"])
    with account_context(w.account.id):
        assert Knowledge.objects.get(pk=cello).confidence == pytest.approx(0.42)


def test_lag_does_not_break_a_request_that_wrote(
        replica: Standby, committed_world: Any, live_server: Any) -> None:
    w = committed_world
    cello = _statement(w, COLD)
    _listed(live_server, w.agent_key, peer_key="alice")  # the key's stamp
    replica.catch_up()
    replica.pause()
    reader = internal_reader(w.account.id)

    # As inside one request's transaction: once it has written, its replica-safe reads
    # are the primary's, and see the write the standby has not (and, uncommitted, never
    # could).
    with account_context(w.account.id):
        with replica_reads(w.account.id) as alias:
            assert alias == REPLICA
            assert {str(k.pk) for k in selectors.knowledge_listing(reader=reader).items} == {
                cello}
        bees = str(active_about(w, LAGGING).pk)
        with replica_reads(w.account.id) as alias:
            assert alias == DEFAULT_DB_ALIAS
            assert {str(k.pk) for k in selectors.knowledge_listing(reader=reader).items} == {
                cello, bees}

    # Over HTTP: a context read whose projections do not exist yet creates their rows on
    # the primary and reads them back to queue their rebuild. With the standby lagging,
    # the read-back is the primary's, so the rebuild is queued and runs (eagerly here).
    with account_context(w.account.id):
        assert not Projection.objects.exists()
    body = _post(live_server, w.agent_key, "context",
                 {"scope": SCOPE, "peer_key": "alice", "query": "cello"}).json()
    assert "cello" in body["context"]
    with account_context(w.account.id):
        built = list(Projection.objects.values_list("kind", "dirty"))
    assert built and all(not dirty for _, dirty in built), built

    # A new key's first request writes (the stamp of its last use) before it reads: the
    # primary answers it, the lagging standby the next one.
    with account_context(w.account.id):
        _, fresh = services.credential_create(account_id=w.account.id, peer=w.agent,
                                              act_for_all=True)
    assert _listed(live_server, fresh, peer_key="alice") == {cello, bees}
    assert _listed(live_server, fresh, peer_key="alice") == {cello}


def test_an_unreachable_replica_leaves_the_reads_to_the_primary(
        replica: Standby, committed_world: Any, live_server: Any, tmp_path: Any) -> None:
    w = committed_world
    cello = _statement(w, COLD)
    wrapper = connections[REPLICA]
    wrapper.close()
    host = wrapper.settings_dict["HOST"]
    wrapper.settings_dict["HOST"] = str(tmp_path)  # no server listens there
    try:
        with account_context(w.account.id), replica_reads(w.account.id) as alias:
            assert alias == DEFAULT_DB_ALIAS
            assert Knowledge.objects.filter(pk=cello).exists()
        # Left alone for a while: the next block does not try it again.
        wrapper.settings_dict["HOST"] = host
        with account_context(w.account.id), replica_reads(w.account.id) as alias:
            assert alias == DEFAULT_DB_ALIAS
    finally:
        wrapper.settings_dict["HOST"] = host
        db_router._down_until = 0.0
    with account_context(w.account.id), replica_reads(w.account.id) as alias:
        assert alias == REPLICA


def test_a_writer_reads_its_write_in_its_next_request_whatever_the_lag(
        replica: Standby, committed_world: Any, live_server: Any) -> None:
    w = committed_world
    with account_context(w.account.id):
        _, other = services.credential_create(account_id=w.account.id, peer=w.agent,
                                              act_for_all=True)
    for key in (w.agent_key, other):
        _listed(live_server, key, peer_key="alice")  # each key's stamp
    replica.catch_up()
    replica.pause()

    sent = _post(live_server, w.agent_key, "messages", {"scope": SCOPE, "wait": 8, "messages": [
        {"text": "I adopted a greyhound called Biscuit.", "peer_key": "alice"}]},
        status=202).json()
    assert sent["timed_out"] is False, sent
    [stmt] = sent["messages"][0]["outcome"]["statements"]
    # The writer's next request: the standby has not replayed its write, so the primary.
    assert stmt["id"] in _listed(live_server, w.agent_key, peer_key="alice")
    assert stmt["id"] in _found(live_server, w.agent_key, "Which dog did Alice adopt?",
                                peer_key="alice")
    # Another key of the same agent did not write: the lagging standby answers it.
    assert stmt["id"] not in _listed(live_server, other, peer_key="alice")

    # Once replay has passed the write, the writer is back on the standby.
    replica.resume()
    replica.catch_up()
    replica.pause()
    bees = _statement(w, LAGGING)
    assert _listed(live_server, w.agent_key, peer_key="alice") == {stmt["id"]}
    replica.resume()
    replica.catch_up()
    assert _listed(live_server, w.agent_key, peer_key="alice") == {stmt["id"], bees}
