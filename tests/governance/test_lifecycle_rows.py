"""One test per row of the lifecycle contract, named by the fixture the seed table gives
each row (docs/lifecycle.md): trigger, actor, exits, evidence and reason code."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from governance import erasure, services, workers
from governance.models import PeerQuestion, Validation
from governance.selectors import curator_queue, knowledge_about_me, knowledge_for_curator
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, KnowledgeSource, LifecycleEvent, Relation
from knowledge.selectors import knowledge_for_read, reader_for
from memhouse.core.errors import NotFound
from memhouse.core.principal import Principal
from retrieval.models import EmbeddingSpace, KnowledgeVector
from tests.governance.helpers import (
    active_about,
    held_scope_claim,
    message,
    propose,
    provisional_about,
)

pytestmark = pytest.mark.django_db


def _principal(world, peer, scopes=("/",)) -> Principal:
    return Principal(account_id=world.account.id, peer=peer, via="api_key", scope_paths=scopes)


def _last_event(item) -> LifecycleEvent:
    return LifecycleEvent.objects.filter(knowledge=item).order_by("-created_at", "-id").first()


def _admin(world):
    from knowledge import services as ks

    return ks.peer_create(account_id=world.account.id, key="dave", kind="human",
                          display_name="Dave", is_admin=True)


def _vector(world, item, embedding, space=None) -> EmbeddingSpace:
    space = space or EmbeddingSpace.objects.get_or_create(provider="test", model="m", version="1",
                                                          dims=3)[0]
    KnowledgeVector.objects.create(account=world.account, knowledge=item, space=space,
                                   embedding=embedding)
    return space


def test_pipeline_proposal_fixture(world):
    """nil -> proposed: verification pending, reason f4_pipeline_proposed; the subject
    and curators can inspect it, members cannot, nothing retrieves it."""
    item = propose(world, "Alice prefers oat milk in her coffee.", subject=world.subject)
    ev = _last_event(item)
    assert (item.state, item.verification, ev.from_state, ev.reason) == (
        "proposed", "pending", None, "f4_pipeline_proposed")
    mine = knowledge_about_me(principal=_principal(world, world.subject)).items
    assert [k.pk for k in mine] == [item.pk]
    assert knowledge_for_curator(principal=_principal(world, world.curator),
                                 knowledge_id=item.pk) == item
    bob = reader_for(principal=_principal(world, world.member))
    assert not knowledge_for_read(reader=bob, scope=world.scope).filter(pk=item.pk).exists()


def test_automatic_gate_a_b_fixture(world):
    """proposed -> active for an accepted direct self-observation."""
    item = active_about(world, "Alice runs marathons.")
    assert (item.state, item.state_reason, item.verification) == (
        "active", "f4_gate_a_b_accepted", "gate_keep")
    bob = reader_for(principal=_principal(world, world.member))
    assert knowledge_for_read(reader=bob, scope=world.scope).filter(pk=item.pk).exists()


def test_default_gate_fixture(world):
    """A deferred peer preference: provisional, with a pending confirmation validation and
    a question to its subject; hidden from members and from curators."""
    item = provisional_about(world, "Alice prefers window seats.")
    assert (item.state, item.state_reason) == ("provisional", "f4_gate_a_b_deferred")
    v = Validation.objects.get(knowledge=item)
    q = PeerQuestion.objects.get(knowledge=item)
    assert (v.kind, v.status, q.peer_id, q.kind) == ("confirmation", "open", world.subject.id,
                                                     "confirmation")
    carol = _principal(world, world.curator)
    assert item.pk not in {k.pk for k in curator_queue(principal=carol).items}
    with pytest.raises(NotFound):
        knowledge_for_curator(principal=carol, knowledge_id=item.pk)
    alice = reader_for(principal=_principal(world, world.subject))
    assert knowledge_for_read(reader=alice, scope=world.scope).filter(pk=item.pk).exists()
    bob = reader_for(principal=_principal(world, world.member))
    assert not knowledge_for_read(reader=bob, scope=world.scope).filter(pk=item.pk).exists()


def test_scope_hold_fixture(world):
    """A scope proposal awaiting its first curator decision: held at its scope with a
    review validation; the curator's approval makes it active (f4_curator_approved)."""
    item = held_scope_claim(world, "The social team posts every Tuesday.")
    assert (item.state, item.state_reason, item.held_scope_id) == (
        "held", "f4_scope_hold", world.scope.id)
    review = Validation.objects.get(knowledge=item, kind="review")
    carol = _principal(world, world.curator)
    assert [k.pk for k in curator_queue(principal=carol).items] == [item.pk]
    item = services.knowledge_approve(item=item, actor=world.curator, note="checked")
    assert (item.state, item.state_reason, item.verification, item.held_scope_id) == (
        "active", "f4_curator_approved", "curator_approved", None)
    review.refresh_from_db()
    assert (review.status, review.resolution, review.resolved_by_id, review.note) == (
        "resolved", "approved", world.curator.id, "checked")
    assert _last_event(item).actor == "peer:carol"
    assert curator_queue(principal=carol).items == []


def test_revalidation_worker_fixture(world):
    """An old preference needing confirmation: revalidate_after passed -> needs_revalidation
    (f4_revalidation_due) with a validation row and a question; a yes reconfirms it."""
    now = timezone.now()
    item = active_about(world, "Alice likes jazz.", revalidate_after=now - timedelta(days=1))
    assert workers.revalidate_due(world.account.id) == 1
    item.refresh_from_db()
    assert (item.state, item.state_reason, item.verification) == (
        "needs_revalidation", "f4_revalidation_due", "worker")
    v = Validation.objects.get(knowledge=item, kind="revalidation", status="open")
    q = PeerQuestion.objects.get(validation=v)
    assert (q.kind, q.peer_id, q.status) == ("revalidation", world.subject.id, "open")
    assert _last_event(item).evidence["revalidate_after"]
    assert workers.revalidate_due(world.account.id) == 0  # redelivery: nothing left
    services.question_answer(question=q, actor=world.subject, answer="yes")
    item.refresh_from_db()
    assert (item.state, item.state_reason, item.verification) == (
        "active", "f4_revalidation_confirmed", "subject_confirmed")
    assert item.revalidate_after > now  # moved forward, so the worker leaves it alone
    assert workers.revalidate_due(world.account.id) == 0


def test_expiry_worker_fixture(world):
    """A time-limited event after its end: expires_at passed -> expired (f4_expiry_due);
    a provisional row's open validation and question expire with it."""
    past = timezone.now() - timedelta(minutes=1)
    event = active_about(world, "Alice is at the Lisbon offsite.", expires_at=past)
    deferred = provisional_about(world, "Alice is travelling this week.", expires_at=past)
    future = active_about(world, "Alice is learning Portuguese.",
                          expires_at=timezone.now() + timedelta(days=1))
    assert workers.expire_due(world.account.id) == 2
    for item in (event, deferred):
        item.refresh_from_db()
        assert (item.state, item.state_reason, item.verification) == (
            "expired", "f4_expiry_due", "worker")
    future.refresh_from_db()
    assert future.state == "active"
    assert Validation.objects.get(knowledge=deferred).status == "expired"
    assert PeerQuestion.objects.get(knowledge=deferred).status == "expired"
    events = LifecycleEvent.objects.count()
    assert workers.expire_due(world.account.id) == 0
    assert LifecycleEvent.objects.count() == events


def test_rejection_fixture(world):
    """A claim declined by a curator, and one whose review went overdue."""
    declined = held_scope_claim(world, "The social team owns the brand book.")
    declined = services.knowledge_reject(item=declined, actor=world.curator, note="wrong team")
    assert (declined.state, declined.state_reason, declined.verification) == (
        "rejected", "f4_curator_rejected", "curator_rejected")
    review = Validation.objects.get(knowledge=declined)
    assert (review.status, review.resolution, review.resolved_by_id) == (
        "resolved", "rejected", world.curator.id)
    overdue = held_scope_claim(world, "The social team meets on Fridays.")
    Validation.objects.filter(knowledge=overdue).update(
        due_at=timezone.now() - timedelta(seconds=1))
    assert workers.age_overdue_reviews(world.account.id) == 1
    overdue.refresh_from_db()
    assert (overdue.state, overdue.state_reason) == ("rejected", "f4_review_overdue")
    v = Validation.objects.get(knowledge=overdue)
    assert (v.status, v.resolution) == ("expired", "overdue")
    assert workers.age_overdue_reviews(world.account.id) == 0


def test_self_governance_contest_fixture(world):
    """An incorrect preference disputed by its subject: contested with a dispute validation
    for curators; resolving it for or against closes that validation."""
    item = active_about(world, "Alice dislikes cats.")
    other = active_about(world, "Alice dislikes dogs.")
    item = services.knowledge_contest(item=item, actor=world.subject, reason="I love cats")
    assert (item.state, item.state_reason, item.verification) == (
        "contested", "f4_subject_contested", "subject_disputed")
    assert _last_event(item).evidence == {"reason": "I love cats"}
    dispute = Validation.objects.get(knowledge=item, kind="dispute")
    assert (dispute.status, dispute.note) == ("open", "I love cats")
    carol = _principal(world, world.curator)
    assert [k.pk for k in curator_queue(principal=carol).items] == [item.pk]
    item = services.contest_resolve(item=item, actor=world.curator, outcome="against")
    assert (item.state, item.state_reason, item.verification) == (
        "rejected", "f4_contest_resolved_against", "curator_rejected")
    dispute.refresh_from_db()
    assert (dispute.status, dispute.resolution) == ("resolved", "resolved_against")
    other = services.knowledge_contest(item=other, actor=world.subject, reason="not true")
    other = services.contest_resolve(item=other, actor=world.curator, outcome="for")
    assert (other.state, other.state_reason, other.verification) == (
        "active", "f4_contest_resolved_for", "curator_approved")


def test_self_governance_redact_fixture(world):
    """A subject withdraws personal content: redacted, the reason in the evidence, the
    vectors dropped, pending questions closed."""
    item = provisional_about(world, "Alice is seeing a therapist.")
    _vector(world, item, [1, 0, 0])
    item = services.knowledge_redact(item=item, actor=world.subject, reason="private")
    assert (item.state, item.state_reason, item.verification) == (
        "redacted", "f4_subject_redacted", "subject_redacted")
    assert _last_event(item).evidence == {"reason": "private"}
    assert not KnowledgeVector.objects.filter(knowledge=item).exists()
    assert PeerQuestion.objects.get(knowledge=item).status == "expired"
    assert Validation.objects.get(knowledge=item).resolution == "redacted"


def test_peer_question_decay_fixture(world):
    """An unconfirmed old preference: the unanswered question passes its deadline, the
    statement goes stale (f4_revalidation_confidence_decay) with lower confidence. An
    unanswered consent question is excluded and just leaves its row held."""
    item = provisional_about(world, "Alice prefers tea.", confidence=0.8)
    promoted = active_about(world, "Alice leads the social team.")
    promoted = services.knowledge_promote(item=promoted, actor=world.curator, level="scope")
    PeerQuestion.objects.update(deadline=timezone.now() - timedelta(seconds=1))
    assert workers.decay_unanswered_questions(world.account.id) == 1
    item.refresh_from_db()
    assert (item.state, item.state_reason, item.verification) == (
        "stale", "f4_revalidation_confidence_decay", "worker")
    assert item.confidence == pytest.approx(0.56)
    assert _last_event(item).evidence["confidence_before"] == 0.8
    assert PeerQuestion.objects.get(knowledge=item).status == "expired"
    assert Validation.objects.get(knowledge=item).status == "expired"
    promoted.refresh_from_db()
    assert promoted.state == "held"
    assert PeerQuestion.objects.get(knowledge=promoted).status == "open"
    assert workers.decay_unanswered_questions(world.account.id) == 0
    item.refresh_from_db()
    assert item.confidence == pytest.approx(0.56)  # not decayed twice
    # A stale row can still be confirmed by its subject.
    item = services.knowledge_confirm(item=item, actor=world.subject)
    assert (item.state, item.state_reason) == ("active", "f4_subject_confirmed")


def test_source_retraction_fixture(world):
    """A claim whose last source is erased: retracted (f4_source_erased), vectors gone; a
    row that is already retracted takes the self-edge when more provenance goes."""
    admin = _admin(world)
    msg = message(world, "Alice said she loves sailing.")
    kept_msg = message(world, "Alice loves the sea.")
    only = propose(world, "Alice loves sailing.", subject=world.subject, source=msg)
    transition(only, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    _vector(world, only, [1, 0, 0])
    both = propose(world, "Alice enjoys sailing trips.", subject=world.subject, source=msg)
    KnowledgeSource.objects.create(account=world.account, knowledge=both, message=kept_msg)
    transition(both, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    denied = propose(world, "Alice sails every week.", subject=world.subject, source=msg)
    KnowledgeSource.objects.create(account=world.account, knowledge=denied, message=kept_msg)
    transition(denied, "retracted", actor="system:test", reason="f4_subject_denied")

    outcome = erasure.message_erase(actor=admin, message_id=msg.pk)
    assert outcome.retracted == 2
    only.refresh_from_db()
    assert (only.state, only.state_reason, only.verification) == (
        "retracted", "f4_source_erased", "source_removed")
    assert not KnowledgeVector.objects.filter(knowledge=only).exists()
    both.refresh_from_db()
    assert both.state == "active" and both.sources.count() == 1  # one source survives
    ev = _last_event(denied)
    assert (ev.from_state, ev.to_state, ev.reason, ev.evidence["repeated"]) == (
        "retracted", "retracted", "f4_source_erased", True)
    # Erasing an unrelated message does not touch the retracted row again.
    events = LifecycleEvent.objects.filter(knowledge=denied).count()
    erasure.message_erase(actor=admin, message_id=message(world, "unrelated words here").pk)
    assert LifecycleEvent.objects.filter(knowledge=denied).count() == events


def test_replacement_fixture(world):
    """Consolidation retires a near-duplicate: the keeper (more independent sources; ties
    go to the older) takes the other's provenance, the other is superseded
    (f4_consolidated) and a `consolidates` relation links them."""
    older = active_about(world, "Alice loves hiking in the Alps.")
    newer = active_about(world, "Alice really loves hiking in the Alps.")
    # A second independent speaker supports the newer one, so it is kept.
    KnowledgeSource.objects.create(account=world.account, knowledge=newer,
                                   message=message(world, "Alice hikes", speaker=world.member))
    Knowledge.objects.filter(pk=newer.pk).update(source_count=2)
    unrelated = active_about(world, "Alice plays chess.")
    other_subject = active_about(world, "Bob loves hiking in the Alps.", subject=world.member)
    space = _vector(world, older, [1, 0, 0])
    _vector(world, newer, [0.99, 0.05, 0], space)
    _vector(world, unrelated, [0, 1, 0], space)
    _vector(world, other_subject, [1, 0, 0], space)  # same text vector, other subject
    assert workers.consolidate_duplicates(world.account.id) == 1
    older.refresh_from_db()
    newer.refresh_from_db()
    assert (older.state, older.state_reason, older.verification) == (
        "superseded", "f4_consolidated", "worker")
    assert newer.state == "active"
    assert set(newer.sources.values_list("message_id", flat=True)) >= set(
        older.sources.values_list("message_id", flat=True))
    assert Relation.objects.filter(source=newer, target=older, type="consolidates").exists()
    assert _last_event(older).evidence["consolidated_into"] == str(newer.pk)
    for k in (unrelated, other_subject):
        k.refresh_from_db()
        assert k.state == "active"
    assert workers.consolidate_duplicates(world.account.id) == 0  # redelivery


def test_consolidation_tie_keeps_the_older_statement(world):
    older = active_about(world, "Alice drinks green tea.")
    newer = active_about(world, "Alice drinks green tea daily.")
    space = _vector(world, older, [0, 0, 1])
    _vector(world, newer, [0, 0.01, 1], space)
    assert workers.consolidate_duplicates(world.account.id) == 1
    older.refresh_from_db()
    newer.refresh_from_db()
    assert (older.state, newer.state) == ("active", "superseded")


# --- the same rows reached from real ingest (the pipeline and the belief-time policy) ----

def _ingest(world, *texts: str, at=None, speaker=None) -> None:
    from django.test import TestCase

    from knowledge.ingest.services import IncomingMessage, messages_ingest

    at = at or timezone.now()
    principal = Principal(account_id=world.account.id, peer=world.agent, via="api_key",
                          act_for_all=True)
    # The pipeline is enqueued on commit: run those callbacks as a commit would.
    with TestCase.captureOnCommitCallbacks(execute=True):
        messages_ingest(principal=principal, scope_path="/marketing/social", messages=[
            IncomingMessage(text=t, occurred_at=at + timedelta(seconds=i),
                            peer_key=(speaker or world.subject).key)
            for i, t in enumerate(texts)])


def test_update_supersedes_from_real_ingest(world):
    """An update from the subject: the older row superseded (f4_updated_by_source) in the
    transaction that placed the newer one, `supersedes` set, a supersedes relation."""
    now = timezone.now()
    _ingest(world, "I live in Denver.", at=now - timedelta(days=9))
    _ingest(world, "I moved to Austin.", at=now - timedelta(days=1))
    old = Knowledge.objects.get(statement__contains="Denver")
    new = Knowledge.objects.get(statement__contains="Austin")
    assert (old.state, old.state_reason, new.supersedes_id) == (
        "superseded", "f4_updated_by_source", old.pk)
    assert Relation.objects.filter(source=new, target=old, type="supersedes").exists()


def test_revalidation_then_stale_from_real_ingest(world):
    """The policy stamps revalidate_after at proposal; the worker asks the subject; the
    unanswered question decays the row to stale."""
    _ingest(world, "I prefer aisle seats.")
    item = Knowledge.objects.get(statement__contains="aisle")
    assert item.revalidate_after is not None
    workers.revalidate_due(world.account.id, now=item.revalidate_after + timedelta(minutes=1))
    item.refresh_from_db()
    assert (item.state, item.state_reason) == ("needs_revalidation", "f4_revalidation_due")
    question = PeerQuestion.objects.get(knowledge=item, status="open")
    workers.decay_unanswered_questions(world.account.id,
                                       now=question.deadline + timedelta(minutes=1))
    item.refresh_from_db()
    assert (item.state, item.state_reason) == ("stale", "f4_revalidation_confidence_decay")


def test_expiry_from_real_ingest(world):
    """A scheduled claim whose window was open when said expires at its end + grace."""
    _ingest(world, "I have a flight to Berlin tomorrow.")
    item = Knowledge.objects.get(statement__contains="Berlin")
    assert item.expires_at is not None
    assert workers.expire_due(world.account.id, now=item.expires_at + timedelta(minutes=1)) == 1
    item.refresh_from_db()
    assert (item.state, item.state_reason) == ("expired", "f4_expiry_due")
