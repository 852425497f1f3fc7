"""The audit log is append-only and hash-chained; tampering is refused or detected."""

from __future__ import annotations

import threading

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.db.utils import DatabaseError

from knowledge import audit
from knowledge.models import AuditEntry
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db


def _entries(world, n: int = 5) -> None:
    for i in range(n):
        audit.append(account_id=world.account.id, event_type="test.event", actor="system:test",
                     payload={"i": i, "text": "héllo", "f": 0.1})


def _tamper(sql: str, params: list) -> None:
    """Bypass the append-only trigger as the table owner would have to."""
    with connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # flush deferred FK checks first
        cur.execute("ALTER TABLE memhouse_audit_entry DISABLE TRIGGER audit_append_only")
        cur.execute(sql, params)
        cur.execute("ALTER TABLE memhouse_audit_entry ENABLE TRIGGER audit_append_only")


def test_chain_is_gapless_and_verifies(world):
    _entries(world)
    seqs = list(AuditEntry.objects.filter(account=world.account).values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    result = audit.verify(world.account.id)
    assert result.ok and result.entries == len(seqs) and result.head_seq == len(seqs)


def test_each_account_has_its_own_chain(world):
    _entries(world, 2)
    world.enter(world.other_account)
    other = audit.verify(world.other_account.id)
    assert other.ok
    assert set(AuditEntry.objects.values_list("account_id", flat=True)) == {world.other_account.id}


def test_update_and_delete_are_refused(world):
    _entries(world, 1)
    entry = AuditEntry.objects.filter(account=world.account).last()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEntry.objects.filter(pk=entry.pk).update(payload={"i": 99})
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEntry.objects.filter(pk=entry.pk).delete()


def test_edited_entry_is_detected_at_its_seq(world):
    _entries(world)
    _tamper("UPDATE memhouse_audit_entry SET payload = '{\"i\": 42}' "
            "WHERE account_id = %s AND seq = 3", [world.account.id])
    result = audit.verify(world.account.id)
    assert not result.ok and result.broken_seq == 3 and "hash" in result.problem


def test_deleted_entry_is_detected_as_a_gap(world):
    _entries(world)
    _tamper("DELETE FROM memhouse_audit_entry WHERE account_id = %s AND seq = 2",
            [world.account.id])
    result = audit.verify(world.account.id)
    assert not result.ok and result.broken_seq == 2 and "gap" in result.problem


def test_reordered_entries_are_detected(world):
    _entries(world)
    for frm, to in ((2, -2), (3, 2), (-2, 3)):  # swap entries 2 and 3
        _tamper("UPDATE memhouse_audit_entry SET seq = %s WHERE account_id = %s AND seq = %s",
                [to, world.account.id, frm])
    result = audit.verify(world.account.id)
    assert not result.ok and result.broken_seq == 2


def test_truncated_tail_is_detected_against_an_exported_head(world):
    _entries(world)
    head = audit.verify(world.account.id)
    _tamper("DELETE FROM memhouse_audit_entry WHERE account_id = %s AND seq = %s",
            [world.account.id, head.head_seq])
    assert audit.verify(world.account.id).ok  # a clean prefix is still a valid chain...
    result = audit.verify(world.account.id, expected_head=(head.head_seq, head.head_hash))
    assert not result.ok and "shorter" in result.problem  # ...but not the exported one


@pytest.mark.django_db(transaction=True)
def test_verify_audit_command_names_the_broken_link(committed_world, capsys, tmp_path):
    heads = tmp_path / "heads.json"
    call_command("verify_audit", export_heads=str(heads))
    assert "ok" in capsys.readouterr().out
    with account_context(committed_world.account.id):
        _tamper("UPDATE memhouse_audit_entry SET actor = 'system:forged' "
                "WHERE account_id = %s AND seq = 2", [committed_world.account.id])
    with pytest.raises(CommandError):
        call_command("verify_audit", heads_file=str(heads))
    assert "BROKEN at seq 2" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_keep_the_chain_gapless(committed_world):
    account_id = committed_world.account.id
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(10):
                with account_context(account_id):
                    audit.append(account_id=account_id, event_type="test.concurrent",
                                 actor=f"system:w{n}", payload={"i": i})
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with account_context(account_id):
        seqs = list(AuditEntry.objects.filter(account_id=account_id).values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1))
        assert audit.verify(account_id).ok
