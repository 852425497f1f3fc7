"""Governance writes: curator decisions, promotion with consent, subject self-governance
and peer-question answers.

Every service is one transaction, takes keyword arguments and a required `actor`, locks
the statement first (so two decisions on one row serialise) and changes state only
through `knowledge.lifecycle.transition`. Each one closes the validation work it
settles, so the curator queue and the subject's questions never show decided work.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from governance.gates import REVIEW_WINDOW
from governance.models import PeerQuestion, Validation
from governance.questions import validation_with_question
from knowledge import audit, lifecycle
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Peer, Scope
from memhouse.errors import ApplicationError, NotFound
from memhouse.principal import ancestor_paths

CONSENT_WINDOW = timedelta(days=30)
REVALIDATION_WINDOW = timedelta(days=14)
# How far a reconfirmed statement's next revalidation moves when it has no interval of
# its own (revalidate_after - inserted_at).
DEFAULT_REVALIDATION_INTERVAL = timedelta(days=90)
MAX_REASON_CHARS = 2000

# States a subject (or a yes/no question) can confirm back to active.
CONFIRMABLE = frozenset({lifecycle.PROVISIONAL, lifecycle.NEEDS_REVALIDATION, lifecycle.STALE})
PROMOTION_REASON = "f4_promotion_requested"

V = Validation
Q_ = PeerQuestion
VERIFY = Knowledge.Verification


# --- helpers ----------------------------------------------------------------------------

def actor_label(actor: Any) -> str:
    return f"peer:{actor.key}" if isinstance(actor, Peer) else str(actor)


def _lock(item: Knowledge) -> Knowledge:
    """Re-read the row under FOR NO KEY UPDATE (only the knowledge row, not joined ones),
    the lock transition() takes: never one that waits for a foreign-key check."""
    return Knowledge.objects.select_for_update(of=("self",), no_key=True).select_related(
        "subject_peer", "scope").get(pk=item.pk)


def _require_curator(actor: Any) -> Peer:
    # The API checks IsHumanCurator first; this is the same rule for any other caller.
    if not (isinstance(actor, Peer) and actor.kind == Peer.Kind.HUMAN and actor.is_curator):
        raise ApplicationError("permission_denied",
                               "only human curators may make curator decisions",
                               status_code=403)
    return actor


def _require_subject(item: Knowledge, actor: Any) -> Peer:
    # Anyone but the human subject gets the answer a missing row gets.
    if not (isinstance(actor, Peer) and actor.kind == Peer.Kind.HUMAN
            and item.subject_peer_id == actor.pk):
        raise NotFound("knowledge")
    return actor


def _conflict(code: str, message: str) -> ApplicationError:
    return ApplicationError(code, message, status_code=409)


def _reason_text(reason: str | None, *, required: bool) -> str:
    text = (reason or "").strip()
    if required and not text:
        raise ApplicationError("reason_required", "say why (a non-empty reason)")
    if len(text) > MAX_REASON_CHARS:
        raise ApplicationError("reason_too_long",
                               f"the reason is limited to {MAX_REASON_CHARS} characters")
    return text


def open_validation(item: Knowledge, kind: str) -> Validation | None:
    return (V.objects.select_for_update().filter(knowledge_id=item.pk, kind=kind,
                                                 status=V.Status.OPEN).first())


def close_open_work(item: Knowledge, *, status: str, resolution: str, by: Peer | None = None,
                    kinds: Iterable[str] | None = None, note: str = "",
                    answered: PeerQuestion | None = None) -> int:
    """Close the statement's open validations (optionally of some kinds) and expire their
    open questions; `answered` is a question being answered now and is left to the caller."""
    now = timezone.now()
    qs = V.objects.filter(knowledge_id=item.pk, status=V.Status.OPEN)
    if kinds is not None:
        qs = qs.filter(kind__in=list(kinds))
    ids = list(qs.values_list("id", flat=True))
    if not ids:
        return 0
    updates: dict[str, Any] = {"status": status, "resolution": resolution, "resolved_at": now,
                               "resolved_by": by}
    if note:
        updates["note"] = note
    V.objects.filter(id__in=ids).update(**updates)
    questions = Q_.objects.filter(validation_id__in=ids, status=Q_.Status.OPEN)
    if answered is not None:
        questions = questions.exclude(pk=answered.pk)
    questions.update(status=Q_.Status.EXPIRED)
    return len(ids)


def _resolve(validation: Validation | None, *, resolution: str, by: Peer | None,
             note: str = "") -> None:
    if validation is None:
        return
    validation.status = V.Status.RESOLVED
    validation.resolution = resolution
    validation.resolved_by = by
    validation.resolved_at = timezone.now()
    fields = ["status", "resolution", "resolved_by", "resolved_at"]
    if note:
        validation.note = note
        fields.append("note")
    validation.save(update_fields=fields)


def next_revalidation(item: Knowledge, now: datetime) -> dict[str, Any]:
    """Extra transition fields that move an elapsed revalidate_after forward."""
    if item.revalidate_after is None or item.revalidate_after > now:
        return {}
    interval = item.revalidate_after - item.inserted_at
    if interval <= timedelta(0):
        interval = DEFAULT_REVALIDATION_INTERVAL
    return {"revalidate_after": now + interval}


def needs_consent(item: Knowledge) -> bool:
    """A statement about a person is placed above peer level only with their consent."""
    return item.subject_peer is not None and item.subject_peer.kind == Peer.Kind.HUMAN


def _consented(item: Knowledge, level: str, scope_id: uuid.UUID) -> bool:
    latest = (V.objects.filter(knowledge_id=item.pk, kind=V.Kind.CONSENT)
              .order_by("-created_at").first())
    return (latest is not None and latest.status == V.Status.RESOLVED
            and latest.resolution == "consented" and latest.target_level == level
            and latest.target_scope_id == scope_id)


def _is_promotion(review: Validation | None, item: Knowledge) -> bool:
    return (review is not None and review.reason == PROMOTION_REASON) or (
        review is None and item.state_reason == PROMOTION_REASON)


def request_revalidation(item: Knowledge, *, actor: str, reason: str,
                         evidence: dict[str, Any], now: datetime | None = None) -> Knowledge:
    """active -> needs_revalidation with its REVALIDATION validation and, when the
    statement has a subject, a revalidation question to them. Call inside a transaction."""
    now = now or timezone.now()
    item = transition(item, lifecycle.NEEDS_REVALIDATION, actor=actor, reason=reason,
                      verification=VERIFY.WORKER, evidence=evidence)
    validation_with_question(
        item, kind=V.Kind.REVALIDATION, reason=reason, window=REVALIDATION_WINDOW,
        text="Is this still right about you?", now=now)
    return item


def drop_derived_rows(knowledge_ids: Iterable[Any]) -> None:
    """Delete rebuildable rows (vectors, entity mentions) of statements withdrawn from use."""
    from retrieval.models import KnowledgeVector

    ids = list(knowledge_ids)
    if not ids:
        return
    KnowledgeVector.objects.filter(knowledge_id__in=ids).delete()
    try:
        from retrieval.models import EntityMention  # type: ignore[attr-defined]
    except ImportError:  # the entity index is optional
        return
    from django.db.models import Count, OuterRef, Subquery
    from django.db.models.functions import Coalesce

    from retrieval.models import Entity

    entity_ids = list(EntityMention.objects.filter(knowledge_id__in=ids)
                      .values_list("entity_id", flat=True).distinct())
    EntityMention.objects.filter(knowledge_id__in=ids).delete()
    if entity_ids:
        # An entity named only by withdrawn statements must not outlive them (its
        # canonical name is their text); the others get their counts recomputed.
        Entity.objects.filter(pk__in=entity_ids, mentions__isnull=True).delete()
        counts = (EntityMention.objects.filter(entity_id=OuterRef("pk")).values("entity_id")
                  .annotate(n=Count("id")).values("n"))
        Entity.objects.filter(pk__in=entity_ids).update(
            mention_count=Coalesce(Subquery(counts), 0))


# --- curator decisions ------------------------------------------------------------------

@transaction.atomic
def knowledge_approve(*, item: Knowledge, actor: Peer, note: str = "") -> Knowledge:
    """held -> active (f4_curator_approved). A promotion lands at its target level and
    scope, and only after its subject consented (409 consent_pending before)."""
    _require_curator(actor)
    item = _lock(item)
    if item.state != lifecycle.HELD:
        raise _conflict("not_held", f"only held statements can be approved; this one is "
                                    f"{item.state}")
    if open_validation(item, V.Kind.CONSENT) is not None:
        raise _conflict("consent_pending",
                        "the subject has not yet consented to this promotion")
    review = open_validation(item, V.Kind.REVIEW)
    level = (review.target_level if review and review.target_level else item.level)
    scope_id = (review.target_scope_id if review and review.target_scope_id else item.scope_id)
    if level != Knowledge.Level.PEER and needs_consent(item) and not _consented(
            item, level, scope_id):
        raise _conflict("consent_required",
                        "a statement about a person needs their consent before it is placed "
                        "above peer level; request a promotion first")
    changes: dict[str, Any] = {"held_scope": None}
    if level != item.level:
        changes["level"] = level
    if scope_id != item.scope_id:
        changes["scope_id"] = scope_id
    item = transition(item, lifecycle.ACTIVE, actor=actor, reason="f4_curator_approved",
                      verification=VERIFY.CURATOR_APPROVED,
                      evidence={"validation": str(review.pk) if review else None,
                                "level": level, "note": note}, **changes)
    _resolve(review, resolution="approved", by=actor, note=note)
    return item


@transaction.atomic
def knowledge_reject(*, item: Knowledge, actor: Peer, note: str = "") -> Knowledge:
    """held -> rejected (f4_curator_rejected). Rejecting a *promotion* refuses the wider
    placement only: the statement returns to active at its peer level
    (f4_promotion_declined), because the claim itself was already accepted."""
    _require_curator(actor)
    item = _lock(item)
    if item.state != lifecycle.HELD:
        raise _conflict("not_held", f"only held statements can be rejected; this one is "
                                    f"{item.state}")
    review = open_validation(item, V.Kind.REVIEW)
    evidence = {"validation": str(review.pk) if review else None, "note": note}
    if _is_promotion(review, item):
        item = transition(item, lifecycle.ACTIVE, actor=actor, reason="f4_promotion_declined",
                          evidence={**evidence, "declined_by": "curator"}, held_scope=None)
        _resolve(review, resolution="rejected", by=actor, note=note)
        close_open_work(item, status=V.Status.RESOLVED, resolution="withdrawn", by=actor,
                        kinds=[V.Kind.CONSENT])
        return item
    item = transition(item, lifecycle.REJECTED, actor=actor, reason="f4_curator_rejected",
                      verification=VERIFY.CURATOR_REJECTED, evidence=evidence)
    _resolve(review, resolution="rejected", by=actor, note=note)
    close_open_work(item, status=V.Status.RESOLVED, resolution="rejected", by=actor)
    return item


@transaction.atomic
def contest_resolve(*, item: Knowledge, actor: Peer, outcome: str, note: str = "") -> Knowledge:
    """contested -> active (f4_contest_resolved_for) or -> rejected
    (f4_contest_resolved_against); closes the DISPUTE validation."""
    _require_curator(actor)
    if outcome not in {"for", "against"}:
        raise ApplicationError("invalid_outcome", "outcome is 'for' or 'against'")
    item = _lock(item)
    if item.state != lifecycle.CONTESTED:
        raise _conflict("not_contested", f"only contested statements can be resolved; this "
                                         f"one is {item.state}")
    dispute = open_validation(item, V.Kind.DISPUTE)
    evidence = {"validation": str(dispute.pk) if dispute else None, "note": note}
    if outcome == "for":
        item = transition(item, lifecycle.ACTIVE, actor=actor, reason="f4_contest_resolved_for",
                          verification=VERIFY.CURATOR_APPROVED, evidence=evidence)
    else:
        item = transition(item, lifecycle.REJECTED, actor=actor,
                          reason="f4_contest_resolved_against",
                          verification=VERIFY.CURATOR_REJECTED, evidence=evidence)
    _resolve(dispute, resolution=f"resolved_{outcome}", by=actor, note=note)
    return item


@transaction.atomic
def knowledge_promote(*, item: Knowledge, actor: Peer, level: str,
                      scope: Scope | None = None) -> Knowledge:
    """Ask to place an active peer-level statement at scope or account level.

    active -> held (f4_promotion_requested) at its current scope, with a REVIEW validation
    for curators and, for a statement about a person, a CONSENT validation and a consent
    question to that person. The level and scope change only on curator approval.
    """
    _require_curator(actor)
    item = _lock(item)
    if item.state != lifecycle.ACTIVE:
        raise _conflict("not_active", f"only active statements can be promoted; this one is "
                                      f"{item.state}")
    if item.level != Knowledge.Level.PEER:
        raise _conflict("not_peer_level", "only peer-level statements can be promoted")
    if level == Knowledge.Level.ACCOUNT:
        target = Scope.objects.get(account_id=item.account_id, path="/")
    elif level == Knowledge.Level.SCOPE:
        target = scope or item.scope
        if target.path not in ancestor_paths(item.scope.path):
            raise ApplicationError(
                "invalid_promotion_scope",
                "a promotion widens placement: the target is the statement's scope or one of "
                "its ancestors")
    else:
        raise ApplicationError("invalid_level", "promote to 'scope' or 'account'")
    now = timezone.now()
    item = transition(item, lifecycle.HELD, actor=actor, reason=PROMOTION_REASON,
                      held_scope=item.scope,
                      evidence={"target_level": level, "target_scope": target.path})
    V.objects.create(account_id=item.account_id, knowledge=item, kind=V.Kind.REVIEW,
                     reason=PROMOTION_REASON, target_scope=target, target_level=level)
    if item.subject_peer_id is not None and needs_consent(item):
        where = "everyone in the Account" if level == Knowledge.Level.ACCOUNT else (
            f"members of {target.path}")
        validation_with_question(
            item, kind=V.Kind.CONSENT, reason=PROMOTION_REASON, window=CONSENT_WINDOW,
            text=f"May we share this about you with {where}?", now=now,
            target_scope=target, target_level=level)
    return item


# --- subject self-governance ------------------------------------------------------------

def _confirm(item: Knowledge, *, actor: Peer, reason: str, evidence: dict[str, Any]
             ) -> Knowledge:
    now = timezone.now()
    return transition(item, lifecycle.ACTIVE, actor=actor, reason=reason,
                      verification=VERIFY.SUBJECT_CONFIRMED, evidence=evidence,
                      **next_revalidation(item, now))


@transaction.atomic
def knowledge_confirm(*, item: Knowledge, actor: Peer) -> Knowledge:
    """provisional / needs_revalidation / stale -> active (f4_subject_confirmed)."""
    item = _lock(item)
    _require_subject(item, actor)
    if item.state not in CONFIRMABLE:
        raise _conflict("not_confirmable",
                        f"a {item.state} statement cannot be confirmed; confirmable states "
                        f"are {', '.join(sorted(CONFIRMABLE))}")
    item = _confirm(item, actor=actor, reason="f4_subject_confirmed",
                    evidence={"via": "self-governance"})
    close_open_work(item, status=V.Status.RESOLVED, resolution="confirmed", by=actor,
                    kinds=[V.Kind.CONFIRMATION, V.Kind.REVALIDATION])
    return item


@transaction.atomic
def knowledge_contest(*, item: Knowledge, actor: Peer, reason: str) -> Knowledge:
    """A current statement -> contested (f4_subject_contested) with a DISPUTE validation
    for curators. Other open work on it (confirmation, consent...) is moot."""
    item = _lock(item)
    _require_subject(item, actor)
    text = _reason_text(reason, required=True)
    if item.state not in lifecycle.CURRENT:
        raise _conflict("not_contestable", f"a {item.state} statement cannot be contested")
    item = transition(item, lifecycle.CONTESTED, actor=actor, reason="f4_subject_contested",
                      verification=VERIFY.SUBJECT_DISPUTED, evidence={"reason": text})
    close_open_work(item, status=V.Status.RESOLVED, resolution="contested", by=actor)
    V.objects.create(account_id=item.account_id, knowledge=item, kind=V.Kind.DISPUTE,
                     reason="f4_subject_contested", note=text, target_scope_id=item.scope_id,
                     target_level=item.level, due_at=timezone.now() + REVIEW_WINDOW)
    return item


@transaction.atomic
def knowledge_redact(*, item: Knowledge, actor: Peer, reason: str = "") -> Knowledge:
    """Withdraw a statement from use (f4_subject_redacted); the reason goes into the
    lifecycle evidence. Its vectors are dropped at once."""
    item = _lock(item)
    _require_subject(item, actor)
    text = _reason_text(reason, required=False)
    if not lifecycle.is_allowed(item.state, lifecycle.REDACTED):
        raise _conflict("not_redactable", f"a {item.state} statement cannot be redacted")
    item = transition(item, lifecycle.REDACTED, actor=actor, reason="f4_subject_redacted",
                      verification=VERIFY.SUBJECT_REDACTED, evidence={"reason": text})
    close_open_work(item, status=V.Status.RESOLVED, resolution="redacted", by=actor)
    drop_derived_rows([item.pk])
    return item


# --- peer questions ---------------------------------------------------------------------

ANSWERS = {
    Q_.Kind.CONFIRMATION: ("yes", "no"),
    Q_.Kind.REVALIDATION: ("yes", "no"),
    Q_.Kind.CONSENT: ("consent", "decline"),
}


@transaction.atomic
def question_answer(*, question: PeerQuestion, actor: Peer, answer: str) -> PeerQuestion:
    """Answer one open question put to `actor`.

    confirmation / revalidation: yes -> active (f4_subject_confirmed /
    f4_revalidation_confirmed); no -> retracted (f4_subject_denied).
    consent: consent -> the validation is resolved and the row stays held for the
    curator's approval; decline -> back to active at peer level (f4_promotion_declined).
    """
    q = Q_.objects.select_for_update().select_related("validation").filter(
        pk=question.pk).first()
    if q is None or not (isinstance(actor, Peer) and actor.kind == Peer.Kind.HUMAN
                         and q.peer_id == actor.pk):
        raise NotFound("question")
    if q.status != Q_.Status.OPEN:
        raise _conflict("question_closed", f"this question is already {q.status}")
    allowed = ANSWERS[Q_.Kind(q.kind)]
    if answer not in allowed:
        raise ApplicationError("invalid_answer", f"answer {' or '.join(allowed)}")
    item = _lock(q.knowledge)
    evidence = {"question": str(q.pk), "answer": answer}
    if q.kind in (Q_.Kind.CONFIRMATION, Q_.Kind.REVALIDATION):
        if item.state not in CONFIRMABLE:
            raise _conflict("question_moot", f"the statement is now {item.state}")
        if answer == "yes":
            reason = ("f4_subject_confirmed" if q.kind == Q_.Kind.CONFIRMATION
                      else "f4_revalidation_confirmed")
            item = _confirm(item, actor=actor, reason=reason, evidence=evidence)
            resolution = "confirmed"
        else:
            item = transition(item, lifecycle.RETRACTED, actor=actor, reason="f4_subject_denied",
                              verification=VERIFY.SUBJECT_DENIED, evidence=evidence)
            resolution = "denied"
        _resolve(q.validation, resolution=resolution, by=actor)
        close_open_work(item, status=V.Status.RESOLVED, resolution=resolution, by=actor,
                        kinds=[V.Kind.CONFIRMATION, V.Kind.REVALIDATION], answered=q)
    else:
        if item.state != lifecycle.HELD or q.validation.status != V.Status.OPEN:
            raise _conflict("question_moot", "this promotion is no longer waiting for consent")
        if answer == "consent":
            _resolve(q.validation, resolution="consented", by=actor)
            audit.append(account_id=item.account_id, event_type="governance.consent_given",
                         actor=actor_label(actor), target_type="knowledge",
                         target_id=str(item.pk),
                         payload={"validation": str(q.validation_id),
                                  "target_level": q.validation.target_level})
        else:
            item = transition(item, lifecycle.ACTIVE, actor=actor, reason="f4_promotion_declined",
                              evidence={**evidence, "declined_by": "subject"}, held_scope=None)
            _resolve(q.validation, resolution="declined", by=actor)
            close_open_work(item, status=V.Status.RESOLVED, resolution="declined", by=actor,
                            kinds=[V.Kind.REVIEW], answered=q)
    q.status = Q_.Status.ANSWERED
    q.answer = answer
    q.answered_at = timezone.now()
    q.save(update_fields=["status", "answer", "answered_at"])
    return q
