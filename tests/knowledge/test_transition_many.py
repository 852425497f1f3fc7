"""transition_many: the set-based form of transition keeps its contract row for row."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.db.utils import DatabaseError

from knowledge import audit, lifecycle
from knowledge.lifecycle import Change, TransitionError, transition_many
from knowledge.models import AuditEntry, Knowledge, LifecycleEvent
from tests.factories import KnowledgeFactory

pytestmark = pytest.mark.django_db
ACTOR = "system:test"


def test_one_event_and_one_audit_entry_per_row(world):
    items = [KnowledgeFactory(world=world) for _ in range(3)]
    events = LifecycleEvent.objects.count()
    entries = AuditEntry.objects.filter(account_id=world.account.id).count()
    transition_many([
        Change(items[0], "active", "f4_gate_a_b_accepted", "gate_keep"),
        Change(items[1], "held", "f4_scope_hold", "gate_defer",
               changes={"held_scope": world.scope}),
        Change(items[2], "rejected", "f4_gate_a_noise", "gate_reject",
               evidence={"why": "noise"}),
    ], actor=ACTOR)
    rows = {k.pk: k for k in Knowledge.objects.filter(pk__in=[i.pk for i in items])}
    assert [(rows[i.pk].state, rows[i.pk].state_reason, rows[i.pk].verification)
            for i in items] == [("active", "f4_gate_a_b_accepted", "gate_keep"),
                                ("held", "f4_scope_hold", "gate_defer"),
                                ("rejected", "f4_gate_a_noise", "gate_reject")]
    assert rows[items[1].pk].held_scope_id == world.scope.id
    assert [i.state for i in items] == ["active", "held", "rejected"]  # objects follow
    assert LifecycleEvent.objects.count() == events + 3
    ev = LifecycleEvent.objects.get(knowledge=items[2], to_state="rejected")
    assert (ev.from_state, ev.reason, ev.actor, ev.evidence) == (
        "proposed", "f4_gate_a_noise", ACTOR, {"why": "noise"})
    new = list(AuditEntry.objects.filter(account_id=world.account.id).order_by("seq")
               [entries:])
    assert [(e.event_type, e.target_id, e.payload["to"]) for e in new] == [
        ("knowledge.transition", str(i.pk), s) for i, s in zip(
            items, ["active", "held", "rejected"], strict=True)]
    assert audit.verify(world.account.id).ok


def test_a_refused_edge_refuses_the_whole_call(world):
    ok, done = KnowledgeFactory(world=world), KnowledgeFactory(world=world)
    lifecycle.transition(done, "rejected", actor=ACTOR, reason="f4_gate_a_noise")
    events = LifecycleEvent.objects.count()
    with pytest.raises(TransitionError, match="rejected -> active"):
        transition_many([Change(ok, "active", "f4_gate_a_b_accepted"),
                         Change(done, "active", "f4_gate_a_b_accepted")], actor=ACTOR)
    ok.refresh_from_db()
    assert ok.state == "proposed" and LifecycleEvent.objects.count() == events
    with pytest.raises(TransitionError, match="does not lead"):
        transition_many([Change(ok, "active", "f4_subject_redacted")], actor=ACTOR)
    with pytest.raises(TransitionError, match="once per call"):
        transition_many([Change(ok, "active", "f4_gate_a_b_accepted"),
                         Change(ok, "rejected", "f4_gate_a_noise")], actor=ACTOR)
    with pytest.raises(TransitionError, match="cannot change"):
        transition_many([Change(ok, "active", "f4_gate_a_b_accepted",
                                changes={"statement": "x"})], actor=ACTOR)


def test_the_trigger_guard_is_off_again_after_the_call(world):
    a, b = KnowledgeFactory(world=world), KnowledgeFactory(world=world)
    with transaction.atomic():
        transition_many([Change(a, "active", "f4_gate_a_b_accepted")], actor=ACTOR)
        # Same transaction: a direct state write is still refused by the database.
        with pytest.raises(DatabaseError, match=r"lifecycle\.transition"), \
                transaction.atomic(), connection.cursor() as cur:
            cur.execute("UPDATE memhouse_knowledge SET state = 'active' WHERE id = %s", [b.pk])
    b.refresh_from_db()
    assert b.state == "proposed"


def test_deferred_audit_appends_in_order_at_the_end(world):
    items = [KnowledgeFactory(world=world) for _ in range(2)]
    before = AuditEntry.objects.filter(account_id=world.account.id).count()
    with audit.deferred(world.account.id):
        lifecycle.transition(items[0], "active", actor=ACTOR, reason="f4_gate_a_b_accepted")
        transition_many([Change(items[1], "active", "f4_gate_a_b_accepted")], actor=ACTOR)
        # Held back: nothing is in the chain until the block ends.
        assert AuditEntry.objects.filter(account_id=world.account.id).count() == before
    new = list(AuditEntry.objects.filter(account_id=world.account.id).order_by("seq")[before:])
    assert [e.target_id for e in new] == [str(items[0].pk), str(items[1].pk)]
    assert audit.verify(world.account.id).ok
