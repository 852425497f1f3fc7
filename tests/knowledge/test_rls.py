"""Tenancy is enforced by PostgreSQL: the database itself refuses cross-Account access."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection, transaction
from django.db.utils import DatabaseError

from knowledge import models as m
from knowledge.services import knowledge_propose
from memhouse.core.tenancy import (
    TenancyError,
    account_context,
    current_account_id,
    rebind_account_for_tests,
    set_account,
)
from tests.factories import KnowledgeFactory

pytestmark = pytest.mark.django_db


def _account_tables() -> list[str]:
    with connection.cursor() as cur:
        cur.execute(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'account_id'
               WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1"""
        )
        return [r[0] for r in cur.fetchall()]


def _populate(world) -> dict[str, uuid.UUID]:
    """One row in every Account-owned table of Account A; returns table -> a row id."""
    k1 = KnowledgeFactory(world=world)
    k2 = KnowledgeFactory(world=world)
    session = m.Session.objects.create(account=world.account, scope=world.scope, external_id="s1")
    msg = m.Message.objects.create(account=world.account, peer=world.subject, scope=world.scope,
                                   session=session, text="I like tea",
                                   occurred_at="2024-01-01T10:00Z")
    doc = m.Document.objects.create(account=world.account, scope=world.scope, title="Doc")
    ver = m.DocumentVersion.objects.create(account=world.account, document=doc, number=1,
                                           blob=b"x", sha256="0" * 64, text="x")
    src = m.KnowledgeSource.objects.create(account=world.account, knowledge=k1, message=msg)
    rel = m.Relation.objects.create(account=world.account, source=k1, target=k2, type="supports")
    return {
        "memhouse_scope": world.scope.id, "memhouse_peer": world.subject.id,
        "memhouse_credential": m.Credential.objects.filter(account=world.account).first().id,
        "memhouse_session": session.id, "memhouse_message": msg.id,
        "memhouse_document": doc.id, "memhouse_document_version": ver.id,
        "memhouse_knowledge": k1.id, "memhouse_knowledge_source": src.id,
        "memhouse_relation": rel.id,
        "memhouse_lifecycle_event": m.LifecycleEvent.objects.filter(knowledge=k1).first().id,
        "memhouse_audit_entry": m.AuditEntry.objects.filter(account=world.account).first().id,
    }


def test_runtime_role_is_neither_superuser_nor_bypassrls(db):
    with connection.cursor() as cur:
        cur.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert cur.fetchone() == (False, False)


def test_every_account_table_has_forced_rls_and_a_policy(db):
    tables = _account_tables()
    assert "memhouse_knowledge" in tables and len(tables) >= 12
    with connection.cursor() as cur:
        for table in tables:
            cur.execute(
                """SELECT c.relrowsecurity, c.relforcerowsecurity,
                          (SELECT count(*) FROM pg_policies p WHERE p.tablename = c.relname)
                   FROM pg_class c WHERE c.relname = %s""", [table])
            enabled, forced, policies = cur.fetchone()
            assert enabled and forced and policies >= 1, table


def test_without_an_account_select_sees_nothing_and_insert_is_refused(world):
    ids = _populate(world)
    rebind_account_for_tests(None)
    with connection.cursor() as cur:
        for table in [*ids, "memhouse_account"]:
            cur.execute(f"SELECT count(*) FROM {table}")
            assert cur.fetchone()[0] == 0, table
    with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic():
        m.Scope.objects.create(account_id=world.account.id, path="/x", parent=world.root)


def test_another_account_cannot_read_update_delete_or_insert(world):
    ids = _populate(world)
    world.enter(world.other_account)
    with connection.cursor() as cur:
        for table, row_id in ids.items():
            cur.execute(f"SELECT count(*) FROM {table} WHERE id = %s", [row_id])
            assert cur.fetchone()[0] == 0, f"{table} readable across Accounts"
            cur.execute(f"UPDATE {table} SET account_id = account_id WHERE id = %s", [row_id])
            assert cur.rowcount == 0, f"{table} updatable across Accounts"
            cur.execute(f"DELETE FROM {table} WHERE id = %s", [row_id])
            assert cur.rowcount == 0, f"{table} deletable across Accounts"
        cur.execute("SELECT count(*) FROM memhouse_account WHERE id = %s", [world.account.id])
        assert cur.fetchone()[0] == 0
    # Writing a row into Account A while bound to B is refused by WITH CHECK.
    with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic():
        knowledge_propose(account_id=world.account.id, statement="Planted", scope=world.scope,
                          subject_peer=None, actor="system:test")
    world.enter(world.account)
    assert m.Knowledge.objects.filter(id=ids["memhouse_knowledge"]).exists()


def test_rows_cannot_be_moved_into_another_account(world):
    k = KnowledgeFactory(world=world)
    with pytest.raises(DatabaseError), transaction.atomic():
        m.Knowledge.objects.filter(pk=k.pk).update(account_id=world.other_account.id)


@pytest.mark.django_db(transaction=True)
def test_account_setting_ends_with_its_transaction(committed_world):
    with account_context(committed_world.account.id):
        assert current_account_id() == committed_world.account.id
        assert m.Peer.objects.filter(key="alice").exists()
    with transaction.atomic():
        assert current_account_id() is None
        assert not m.Peer.objects.exists()
    # Autocommit statements outside any block see nothing either.
    assert m.Knowledge.objects.count() == 0 and m.Account.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_transaction_bound_to_one_account_refuses_another_and_sets_nothing(committed_world):
    """set_account checks and sets in one statement (the search fan-out's one round trip
    per strategy); a switch is refused and leaves the transaction as it was, the
    settings it carries included."""
    w = committed_world
    with transaction.atomic():
        set_account(w.account.id, local={"statement_timeout": "1234"})
        set_account(w.account.id)  # the same Account again: allowed
        with connection.cursor() as cur:
            cur.execute("SHOW statement_timeout")
            assert cur.fetchone()[0] == "1234ms"
        with pytest.raises(TenancyError):
            set_account(w.other_account.id, local={"statement_timeout": "99"})
        assert current_account_id() == w.account.id
        with connection.cursor() as cur:
            cur.execute("SHOW statement_timeout")
            assert cur.fetchone()[0] == "1234ms"
        assert m.Peer.objects.filter(key="alice").exists()
        assert not m.Peer.objects.filter(key="mallory").exists()
    # Both settings ended with the transaction.
    assert current_account_id() is None
    with connection.cursor() as cur:
        cur.execute("SHOW statement_timeout")
        assert cur.fetchone()[0] != "1234ms"


def test_full_text_search_uses_its_index_under_row_level_security(world):
    """RLS lets the planner use an index only for leakproof operators; the bootstrap marks
    `tsvector @@ tsquery` so, or every lexical search would scan the whole Account."""
    KnowledgeFactory(world=world)
    with connection.cursor() as cur:
        cur.execute("SELECT proleakproof FROM pg_proc WHERE oid = "
                    "'pg_catalog.ts_match_vq(tsvector, tsquery)'::regprocedure")
        assert cur.fetchone()[0] is True
        # Leave the planner no other index to prefer on a tiny table (the test's
        # transaction rolls the DROPs back) and no sequential scan.
        cur.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'memhouse_knowledge' "
                    "AND indexname NOT IN ('knowledge_search_vector_gin', "
                    "'memhouse_knowledge_pkey')")
        for (name,) in cur.fetchall():
            cur.execute(f'DROP INDEX "{name}"')
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("EXPLAIN SELECT id FROM memhouse_knowledge "
                    "WHERE search_vector @@ to_tsquery('english', 'oboe')")
        plan = "\n".join(r[0] for r in cur.fetchall())
    assert "knowledge_search_vector_gin" in plan
