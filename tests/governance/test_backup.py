"""Whole-deployment backup and restore: two Accounts with knowledge, documents (blobs) and
audit entries are backed up with `manage.py backup`, restored with `manage.py restore`
into a fresh empty database, and come back row for row; every audit chain verifies,
derived data is rebuilt, and search answers on the restored database."""

from __future__ import annotations

import io
import json
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test import Client
from psycopg import sql

from governance import backup
from knowledge import audit
from knowledge import services as ks
from knowledge.ingest.services import document_create, document_version_add
from knowledge.lifecycle import transition
from memhouse.core.principal import Principal
from memhouse.core.tenancy import account_context
from retrieval import engine
from retrieval.vectors import embed_knowledge
from tests.governance.helpers import active_about, provisional_about

pytestmark = pytest.mark.django_db(transaction=True)


def _populate(w: Any) -> dict[str, str]:
    ids: dict[str, str] = {}
    with account_context(w.account.id):
        hiking = active_about(w, "Alice loves hiking in the mountains with her dog.")
        ids["hiking"] = str(hiking.pk)
        provisional_about(w, "Alice prefers green tea.", confidence=0.8)
        contested = active_about(w, "Alice dislikes cats.")
        from governance import services

        services.knowledge_contest(item=contested, actor=w.subject, reason="I love cats")
        p = Principal(account_id=w.account.id, peer=w.agent, via="api_key", act_for_all=True)
        v1 = document_create(principal=p, scope_path="/marketing", title="Plan",
                             content=b"Dana leads the copy team.\n\nLaunch in March.")
        document_version_add(principal=p, document=v1.document,
                             content="Launch in May \u2713 (caf\u00e9).".encode())
        ids["document"] = str(v1.document_id)
    embed_knowledge(w.account.id, [ids["hiking"]])
    other = w.other_account
    with account_context(other.id):
        from knowledge.models import Scope

        item = ks.knowledge_propose(
            account_id=other.id, statement="Mallory runs the night shift.",
            scope=Scope.objects.get(path="/marketing"), subject_peer=w.outsider,
            actor="system:test", level="peer")
        transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
        ids["other"] = str(item.pk)
        p = Principal(account_id=other.id, peer=w.outsider, via="api_key")
        document_create(principal=p, scope_path="/marketing", title="Rota",
                        content="Night shift rota \u2713: Mallory, then Eve.".encode())
    embed_knowledge(other.id, [ids["other"]])
    return ids


def _digests(dbname: str) -> dict[str, tuple[int, str]]:
    """Row count and an order-independent content digest of every table (as the
    superuser: row-level security would hide rows from the application role)."""
    tgt = backup.target()
    with backup.Target(**{**tgt.__dict__, "dbname": dbname}).connect() as conn, \
            conn.cursor() as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        out = {}
        for (table,) in cur.fetchall():
            cur.execute(sql.SQL(
                "SELECT count(*), md5(coalesce(string_agg(md5(t::text), '' "
                "ORDER BY md5(t::text)), '')) FROM {} t").format(sql.Identifier(table)))
            count, digest = cur.fetchone()
            out[table] = (int(count), str(digest))
    return out


def _embeddable(dbname: str) -> int:
    from retrieval.vectors import EMBEDDABLE_STATES

    tgt = backup.target()
    with backup.Target(**{**tgt.__dict__, "dbname": dbname}).connect() as conn:
        row = conn.execute("SELECT count(*) FROM memhouse_knowledge WHERE state = ANY(%s)",
                           [list(EMBEDDABLE_STATES)]).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def fresh_database() -> Iterator[str]:
    """An empty database on the same server, created as the embedded superuser makes
    the deployment's (owned by the application role, `vector` from template1)."""
    tgt = backup.target()
    name = f"{connection.settings_dict['NAME']}_restored_{uuid.uuid4().hex[:6]}"
    admin = backup.Target(**{**tgt.__dict__, "dbname": "postgres"})
    with admin.connect() as conn:
        conn.autocommit = True
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(name), sql.Identifier(tgt.app_role)))
    try:
        yield name
    finally:
        with admin.connect() as conn:
            conn.autocommit = True
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


def _use_database(name: str) -> None:
    """Point every new connection (this thread's, the strategy pool's) at `name`."""
    engine.close_strategy_connections()
    connections.close_all()
    connection.settings_dict["NAME"] = name


def test_backup_and_restore_round_trip_into_a_fresh_database(committed_world, tmp_path,
                                                             fresh_database):
    w = committed_world
    ids = _populate(w)
    source_db = connection.settings_dict["NAME"]
    before = _digests(source_db)
    excluded = set(backup.derived_tables())
    assert before["memhouse_knowledge_vector"][0] >= 2  # derived data exists to exclude
    assert before["memhouse_document_version"][0] == 3

    out = io.StringIO()
    call_command("backup", "--out", str(tmp_path / "bk"), stdout=out)
    log = out.getvalue()
    assert "snapshot" in log and "pg_dump wrote database.dump" in log
    manifest = json.loads((tmp_path / "bk" / "manifest.json").read_text())
    assert set(manifest["audit_heads"]) == {str(w.account.id), str(w.other_account.id)}
    for account in (w.account, w.other_account):
        with account_context(account.id):
            head = audit.verify(account.id)
        assert head.ok and head.entries > 0
        assert manifest["audit_heads"][str(account.id)] == [head.head_seq, head.head_hash]
    assert manifest["tables"]["memhouse_knowledge"] == before["memhouse_knowledge"][0]
    assert set(manifest["excluded_derived_tables"]) == excluded
    assert "knowledge.0001_initial" in manifest["migrations"]
    assert manifest["versions"]["pg_dump"].startswith("pg_dump (PostgreSQL)")

    try:
        _use_database(fresh_database)
        out = io.StringIO()
        call_command("restore", "--from", str(tmp_path / "bk"), stdout=out)
        log = out.getvalue()
        assert "counts match the manifest" in log
        assert "audit chains verified for 2 account(s)" in log
        embeddable = _embeddable(fresh_database)
        assert embeddable >= 4
        assert f"reembed: embedded {embeddable} statements" in log
        after = _digests(fresh_database)
        # Every durable table, Django's included, is back row for row, byte for byte.
        durable = {t for t in before if t not in excluded}
        assert {t: after[t] for t in durable} == {t: before[t] for t in durable}
        # Derived data was rebuilt rather than restored.
        assert after["memhouse_document_chunk"][0] == before["memhouse_document_chunk"][0]
        assert after["memhouse_knowledge_vector"][0] == embeddable
        for account in (w.account, w.other_account):
            with account_context(account.id):
                assert audit.verify(account.id, expected_head=tuple(
                    manifest["audit_heads"][str(account.id)])).ok
        # The restored credential hash still authenticates, and search answers.
        r = Client().post("/api/v1/search", data={
            "query": "Who goes hiking in the mountains?", "scope": "/marketing/social",
            "peer_key": "alice", "deadline_ms": 5000}, content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {w.agent_key}")
        assert r.status_code == 200, r.content
        body = r.json()
        assert body["candidates"][0]["id"] == ids["hiking"]
        assert "semantic" in body["strategies"]["contributed"]
        # A database that now holds data is refused without --force.
        with pytest.raises(CommandError, match="not empty"):
            call_command("restore", "--from", str(tmp_path / "bk"), stdout=io.StringIO())
    finally:
        _use_database(source_db)


def test_restore_refuses_an_altered_backup(committed_world, tmp_path):
    call_command("backup", "--out", str(tmp_path / "bk"), stdout=io.StringIO())
    with pytest.raises(CommandError, match="not empty"):
        call_command("backup", "--out", str(tmp_path / "bk"), stdout=io.StringIO())
    # A flipped byte in the dump: the digest check stops it before anything runs.
    bad = tmp_path / "bad"
    shutil.copytree(tmp_path / "bk", bad)
    dump = bad / "database.dump"
    data = bytearray(dump.read_bytes())
    data[len(data) // 2] ^= 0xFF
    dump.write_bytes(bytes(data))
    with pytest.raises(CommandError, match="SHA-256"):
        call_command("restore", "--from", str(bad), "--force", stdout=io.StringIO())
    # An edited manifest (counts and digest recomputed or not) fails the signature.
    forged = tmp_path / "forged"
    shutil.copytree(tmp_path / "bk", forged)
    manifest = json.loads((forged / "manifest.json").read_text())
    manifest["tables"]["memhouse_knowledge"] += 1
    (forged / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CommandError, match="signature does not verify"):
        call_command("restore", "--from", str(forged), "--force", stdout=io.StringIO())
    (forged / "manifest.sig").unlink()
    with pytest.raises(CommandError, match="not signed"):
        call_command("restore", "--from", str(forged), "--force", stdout=io.StringIO())
    # Nothing was touched: the source still holds its Accounts.
    assert backup.target_data(backup.target())
