"""The lifecycle contract: every edge of the table allowed, every other refused."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.db.utils import DatabaseError
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from knowledge import audit, lifecycle
from knowledge.lifecycle import EDGES, STATES, TransitionError, transition
from knowledge.models import AuditEntry, Knowledge, LifecycleEvent
from knowledge.services import knowledge_propose
from tests.factories import KnowledgeFactory

pytestmark = pytest.mark.django_db
ACTOR = "system:test"


def _path_to(target: str) -> list[str]:
    """Shortest edge path from proposed to `target` (BFS over EDGES)."""
    queue: deque[list[str]] = deque([[lifecycle.PROPOSED]])
    seen = {lifecycle.PROPOSED}
    while queue:
        path = queue.popleft()
        if path[-1] == target:
            return path[1:]
        for nxt in sorted(EDGES[path[-1]]):
            if nxt not in seen:
                seen.add(nxt)
                queue.append([*path, nxt])
    raise AssertionError(f"{target} unreachable")


def _drive(item: Knowledge, path: list[str]) -> None:
    for state in path:
        transition(item, state, actor=ACTOR, reason=STATES[state].reasons[0])


def test_every_state_is_reachable_from_proposed():
    for name in STATES:
        if name != lifecycle.PROPOSED:
            assert _path_to(name)


def test_contract_matches_the_seed_table_for_key_rows():
    assert EDGES[None] == {"proposed"}
    assert EDGES["retracted"] == {"retracted"}
    assert EDGES["redacted"] == {"retracted"}
    assert {"active", "provisional", "held", "rejected"} <= EDGES["proposed"]
    assert "active" in EDGES["active"] and "stale" not in EDGES["active"]
    assert STATES["provisional"].visibility.curator is False
    assert {"active"} == lifecycle.SEARCHABLE


CASES = [(f, t) for f in STATES for t in STATES]


@pytest.mark.parametrize(("from_state", "to_state"), CASES,
                         ids=[f"{f}->{t}" for f, t in CASES])
def test_edge(world, from_state, to_state):
    item = KnowledgeFactory(world=world)
    _drive(item, _path_to(from_state) if from_state != "proposed" else [])
    events = LifecycleEvent.objects.filter(knowledge=item).count()
    audits = AuditEntry.objects.filter(account=world.account).count()
    reason = STATES[to_state].reasons[0]
    if to_state in EDGES[from_state]:
        transition(item, to_state, actor=world.curator, reason=reason)
        item.refresh_from_db()
        assert item.state == to_state
        ev = LifecycleEvent.objects.filter(knowledge=item).order_by("-created_at").first()
        assert (ev.from_state, ev.to_state, ev.reason, ev.actor) == (
            from_state, to_state, reason, "peer:carol")
        assert LifecycleEvent.objects.filter(knowledge=item).count() == events + 1
        assert AuditEntry.objects.filter(account=world.account).count() == audits + 1
    else:
        with pytest.raises(TransitionError):
            transition(item, to_state, actor=world.curator, reason=reason)
        item.refresh_from_db()
        assert item.state == from_state
        assert LifecycleEvent.objects.filter(knowledge=item).count() == events


def test_creation_writes_the_nil_to_proposed_event(world):
    item = KnowledgeFactory(world=world)
    ev = LifecycleEvent.objects.get(knowledge=item)
    assert (ev.from_state, ev.to_state, ev.reason) == (None, "proposed", "f4_pipeline_proposed")
    assert item.verification == "pending"


def test_create_rejects_any_other_starting_state(world):
    with pytest.raises(TransitionError):
        KnowledgeFactory(world=world, state="active")
    # The database refuses it too, whatever the caller.
    with pytest.raises(DatabaseError, match="start as proposed"), transaction.atomic():
        Knowledge.objects.create(account=world.account, statement="x", scope=world.scope,
                                 state="active")


def test_direct_state_update_is_refused_by_the_database(world):
    item = KnowledgeFactory(world=world)
    with pytest.raises(DatabaseError, match=r"lifecycle\.transition"), transaction.atomic():
        Knowledge.objects.filter(pk=item.pk).update(state="active")
    with pytest.raises(DatabaseError, match=r"lifecycle\.transition"), transaction.atomic(), \
            connection.cursor() as cur:
        cur.execute("UPDATE memhouse_knowledge SET state = 'active' WHERE id = %s", [item.pk])
    item.refresh_from_db()
    assert item.state == "proposed"


def test_statement_text_is_immutable(world):
    item = KnowledgeFactory(world=world)
    transition(item, "active", actor=ACTOR, reason="f4_gate_a_b_accepted")
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        Knowledge.objects.filter(pk=item.pk).update(statement="Alice hates trails")


def test_unknown_reason_or_extra_field_is_refused(world):
    item = KnowledgeFactory(world=world)
    with pytest.raises(TransitionError, match="reason"):
        transition(item, "active", actor=ACTOR, reason="f4_subject_redacted")
    with pytest.raises(TransitionError, match="cannot change"):
        transition(item, "active", actor=ACTOR, reason="f4_gate_a_b_accepted",
                   statement="sneaky")
    with pytest.raises(TransitionError, match="actor"):
        transition(item, "active", actor="root", reason="f4_gate_a_b_accepted")


def test_operator_doc_is_generated_from_the_module():
    doc = Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md"
    assert doc.read_text() == lifecycle.operator_table_markdown(), (
        "docs/lifecycle.md is stale: run `python manage.py lifecycle_doc`")


_ALL_STATES = sorted(STATES)


class LifecycleMachine(RuleBasedStateMachine):
    """Random action sequences keep the row inside the contract and the chain intact."""

    def __init__(self) -> None:
        super().__init__()
        self.changes = 0

    @initialize()
    def setup(self) -> None:
        from tests.conftest import build_world

        self.sid = transaction.savepoint()
        self.world = build_world()
        self.item = KnowledgeFactory(world=self.world)
        self.state = "proposed"

    @rule(to=st.sampled_from(_ALL_STATES))
    def attempt(self, to: str) -> None:
        reason = STATES[to].reasons[0]
        if to in EDGES[self.state]:
            transition(self.item, to, actor=ACTOR, reason=reason)
            self.state = to
            self.changes += 1
        else:
            with pytest.raises(TransitionError):
                transition(self.item, to, actor=ACTOR, reason=reason)

    @invariant()
    def consistent(self) -> None:
        if not hasattr(self, "item"):
            return
        self.item.refresh_from_db()
        assert self.item.state == self.state
        assert LifecycleEvent.objects.filter(knowledge=self.item).count() == self.changes + 1
        assert audit.verify(self.world.account.id).ok

    def teardown(self) -> None:
        if hasattr(self, "sid"):
            transaction.savepoint_rollback(self.sid)


def test_lifecycle_state_machine(db):
    from memhouse.core.tenancy import rebind_account_for_tests

    LifecycleMachine.TestCase.settings = settings(
        max_examples=20, stateful_step_count=12, deadline=None,
        suppress_health_check=list(HealthCheck))
    rebind_account_for_tests(None)
    LifecycleMachine.TestCase().runTest()


def test_knowledge_propose_needs_text(world):
    from memhouse.core.errors import ApplicationError

    with pytest.raises(ApplicationError):
        knowledge_propose(account_id=world.account.id, statement="  ", scope=world.scope,
                          subject_peer=None, actor=ACTOR)


@pytest.mark.parametrize(("first", "second", "second_applies"), [
    ("needs_revalidation", "expired", True),   # B re-reads A's result and moves on from it
    ("expired", "needs_revalidation", False),  # expired -> needs_revalidation is no edge
])
def test_concurrent_transitions_on_one_row_serialise(committed_world, first, second,
                                                      second_applies):
    """A holds the row lock mid-transaction while B asks for a move from the state both
    saw; B waits, then judges its edge from A's committed state, never from 'active'."""
    import threading
    import time

    from memhouse.core.tenancy import account_context

    reasons = {"needs_revalidation": "f4_revalidation_due", "expired": "f4_expiry_due"}
    w = committed_world
    with account_context(w.account.id):
        item = knowledge_propose(account_id=w.account.id, statement="Alice keeps bees.",
                                 scope=w.scope, subject_peer=w.subject, actor="system:test")
        transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    a_locked, outcome = threading.Event(), {}

    def run_a() -> None:
        try:
            with account_context(w.account.id):
                row = Knowledge.objects.get(pk=item.pk)
                transition(row, first, actor="system:a", reason=reasons[first])
                a_locked.set()
                time.sleep(0.5)  # B is now waiting on the row lock
        finally:
            connection.close()

    def run_b() -> None:
        try:
            a_locked.wait(5)
            with account_context(w.account.id):
                row = Knowledge.objects.get(pk=item.pk)  # still reads 'active'
                assert row.state == "active"
                transition(row, second, actor="system:b", reason=reasons[second])
            outcome["b"] = "applied"
        except TransitionError:
            outcome["b"] = "refused"
        finally:
            connection.close()

    threads = [threading.Thread(target=run_a), threading.Thread(target=run_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert outcome["b"] == ("applied" if second_applies else "refused")
    with account_context(w.account.id):
        hops = list(LifecycleEvent.objects.filter(knowledge_id=item.pk)
                    .order_by("created_at").values_list("from_state", "to_state"))
        final = Knowledge.objects.get(pk=item.pk).state
        assert audit.verify(w.account.id).ok
    expected = [(None, "proposed"), ("proposed", "active"), ("active", first)]
    if second_applies:
        expected.append((first, second))
    assert hops == expected
    assert final == expected[-1][1]


def test_embeddable_states_have_one_home():
    from knowledge import lifecycle as lc
    from retrieval import vectors

    # Rows a search may return now, or once active again; never a row still in the gate
    # and never a terminal one.
    expected = {lc.ACTIVE, lc.PROVISIONAL, lc.HELD, lc.NEEDS_REVALIDATION, lc.CONTESTED,
                lc.STALE}
    assert expected == lc.EMBEDDABLE
    assert not lc.EMBEDDABLE & lc.TERMINAL and lc.PROPOSED not in lc.EMBEDDABLE
    assert set(vectors.EMBEDDABLE_STATES) == lc.EMBEDDABLE
