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
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone

from governance.intake.gates import CONFIRMATION_WINDOW, REVIEW_WINDOW
from governance.models import PeerQuestion, Validation
from governance.questions import close_questions, close_validations, validation_with_question
from knowledge import audit, lifecycle
from knowledge.lifecycle import ActorLike, as_actor, drop_derived_rows, transition
from knowledge.models import Knowledge, Peer, Scope
from knowledge.services import scope_setting_write
from memhouse.core.errors import ApplicationError, NotFound
from memhouse.core.principal import ancestor_paths

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

def _lock(item: Knowledge) -> Knowledge:
    """Re-read the row under FOR NO KEY UPDATE (only the knowledge row, not joined ones),
    the lock transition() takes: never one that waits for a foreign-key check."""
    return Knowledge.objects.select_for_update(of=("self",), no_key=True).select_related(
        "subject_peer", "scope").get(pk=item.pk)


def _require_curator(actor: ActorLike) -> Peer:
    # The API checks IsHumanCurator first; this is the same rule for any other caller.
    if not (isinstance(actor, Peer) and actor.kind == Peer.Kind.HUMAN and actor.is_curator):
        raise ApplicationError("permission_denied",
                               "only human curators may make curator decisions",
                               status_code=403)
    return actor


def _require_subject(item: Knowledge, actor: ActorLike) -> Peer:
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


def _open_validation(item: Knowledge, kind: str) -> Validation | None:
    return (V.objects.select_for_update().filter(knowledge_id=item.pk, kind=kind,
                                                 status=V.Status.OPEN).first())


def close_open_work(item: Knowledge, *, status: str, resolution: str, by: Peer | None = None,
                    kinds: Iterable[str] | None = None, note: str = "",
                    answered: PeerQuestion | None = None) -> int:
    """Close the statement's open validations (optionally of some kinds) and expire their
    open questions; `answered` is a question being answered now and is left to the caller."""
    qs = V.objects.filter(knowledge_id=item.pk, status=V.Status.OPEN)
    if kinds is not None:
        qs = qs.filter(kind__in=list(kinds))
    ids = list(qs.values_list("id", flat=True))
    if not ids:
        return 0
    close_validations(V.objects.filter(id__in=ids), to=status, resolution=resolution, by=by,
                      note=note)
    questions = Q_.objects.filter(validation_id__in=ids)
    if answered is not None:
        questions = questions.exclude(pk=answered.pk)
    close_questions(questions, to=Q_.Status.EXPIRED)
    return len(ids)


def _resolve(validation: Validation | None, *, resolution: str, by: Peer | None,
             note: str = "") -> None:
    if validation is None:
        return
    close_validations([validation], to=V.Status.RESOLVED, resolution=resolution, by=by,
                      note=note)


def _next_revalidation(item: Knowledge, now: datetime) -> dict[str, Any]:
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


def has_human_subject(item: Knowledge) -> bool:
    """Whether a person can confirm the statement: its subject is a human peer. Scope
    claims, document claims and statements about an agent have nobody to ask; their
    revalidation goes to the curator queue instead."""
    if item.subject_peer_id is None:
        return False
    return Peer.objects.filter(pk=item.subject_peer_id, kind=Peer.Kind.HUMAN).exists()


def request_revalidation(item: Knowledge, *, actor: ActorLike, reason: str,
                         evidence: dict[str, Any], now: datetime | None = None) -> Knowledge:
    """active -> needs_revalidation with its REVALIDATION validation and, when the
    statement has a human subject, a revalidation question to them; without one the
    validation is the curator's (the queue's "revalidation" list: reconfirm or retire).
    Call inside a transaction."""
    now = now or timezone.now()
    item = transition(item, lifecycle.NEEDS_REVALIDATION, actor=actor, reason=reason,
                      verification=VERIFY.WORKER, evidence=evidence)
    if has_human_subject(item):
        validation_with_question(
            item, kind=V.Kind.REVALIDATION, reason=reason, window=REVALIDATION_WINDOW,
            text="Is this still right about you?", now=now)
    else:
        V.objects.get_or_create(account_id=item.account_id, knowledge=item,
                                kind=V.Kind.REVALIDATION, status=V.Status.OPEN,
                                defaults={"reason": reason, "target_scope": item.scope,
                                          "target_level": item.level})
    return item


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
    if _open_validation(item, V.Kind.CONSENT) is not None:
        raise _conflict("consent_pending",
                        "the subject has not yet consented to this promotion")
    review = _open_validation(item, V.Kind.REVIEW)
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
    review = _open_validation(item, V.Kind.REVIEW)
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
    dispute = _open_validation(item, V.Kind.DISPUTE)
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
    item = transition(item, lifecycle.ACTIVE, actor=actor, reason=reason,
                      verification=VERIFY.SUBJECT_CONFIRMED, evidence=evidence,
                      **_next_revalidation(item, now))
    _retire_contradicted(item, actor=actor)
    return item


def _retire_contradicted(item: Knowledge, *, actor: Peer) -> None:
    """The subject confirmed someone else's update about them: the current rows it
    contradicts (about the same subject) are now outdated by the subject's own word."""
    from knowledge.models import Relation

    # The edge points from the newer claim by when it was said; a confirmed claim retires
    # the rows it contradicts whichever of the two was said first.
    pairs = (Relation.objects.filter(type=Relation.Type.CONTRADICTS, settled_at__isnull=True)
             .filter(Q(source=item) | Q(target=item)).values_list("source_id", "target_id"))
    others = {a if b == item.pk else b for a, b in pairs}
    older = (Knowledge.objects.filter(pk__in=others, subject_peer_id=item.subject_peer_id,
                                      state__in=sorted(CORRECTABLE)).exclude(pk=item.pk))
    for old in older:
        _supersede_contradicted(old, by=item, actor=actor, reason="f4_subject_confirmed_update",
                                verification=VERIFY.SUBJECT_CONFIRMED)


def _settle_contradictions(item: Knowledge) -> int:
    """Both claims of each unsettled contradiction against `item` stand: reads stop
    marking it (the relation stays as history)."""
    from knowledge.models import Relation

    return Relation.objects.filter(type=Relation.Type.CONTRADICTS, settled_at__isnull=True,
                                   target=item).update(settled_at=timezone.now())


def _supersede_contradicted(old: Knowledge, *, by: Knowledge, actor: Peer, reason: str,
                            verification: str, evidence: dict[str, Any] | None = None,
                            answered: PeerQuestion | None = None) -> Knowledge:
    """`old` is outdated by `by`, a claim that said otherwise: superseded, linked for
    lineage, its open work closed and the contradiction settled."""
    from knowledge.models import Relation

    if by.supersedes_id is None:
        Knowledge.objects.filter(pk=by.pk).update(supersedes=old)
        by.supersedes_id = old.pk
    Relation.objects.get_or_create(account_id=by.account_id, source=by, target=old,
                                   type=Relation.Type.SUPERSEDES)
    Relation.objects.filter(type=Relation.Type.CONTRADICTS, settled_at__isnull=True).filter(
        Q(source=by, target=old) | Q(source=old, target=by)).update(settled_at=timezone.now())
    old = transition(old, lifecycle.SUPERSEDED, actor=actor, reason=reason,
                     verification=verification,
                     evidence={**(evidence or {}), "superseded_by": str(by.pk)})
    close_open_work(old, status=V.Status.RESOLVED, resolution="superseded", by=actor,
                    answered=answered)
    drop_derived_rows([old.pk])
    return old


def _newest_contradicting(item: Knowledge) -> Knowledge | None:
    """The newest current claim that says otherwise than `item` (an unsettled
    contradiction with `item` the older side)."""
    return (Knowledge.objects.filter(
        relations_out__target=item, relations_out__type="contradicts",
        relations_out__settled_at__isnull=True, state__in=sorted(lifecycle.CURRENT))
        .order_by("-relations_out__created_at").first())


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
def knowledge_deny(*, item: Knowledge, actor: Peer) -> Knowledge:
    """The subject says a statement waiting for them is not true: provisional /
    needs_revalidation / stale -> retracted (f4_subject_denied), as answering "no" to its
    question does; its open confirmation work closes."""
    item = _lock(item)
    _require_subject(item, actor)
    if item.state not in CONFIRMABLE:
        raise _conflict("not_deniable",
                        f"a {item.state} statement is not waiting for you; contest it "
                        "instead if it is wrong")
    item = transition(item, lifecycle.RETRACTED, actor=actor, reason="f4_subject_denied",
                      verification=VERIFY.SUBJECT_DENIED, evidence={"via": "self-governance"})
    close_open_work(item, status=V.Status.RESOLVED, resolution="denied", by=actor,
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
    Q_.Kind.CONTRADICTION: ("yes", "no"),
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
    elif q.kind == Q_.Kind.CONTRADICTION:
        # "Is this still true?" of the older claim: yes keeps both, no lets the newer
        # one supersede it.
        newer = _newest_contradicting(item)
        if item.state not in CORRECTABLE or q.validation.status != V.Status.OPEN:
            raise _conflict("question_moot", f"the statement is now {item.state}")
        if answer == "yes" or newer is None:
            _settle_contradictions(item)
            _resolve(q.validation, resolution="contradiction_keep", by=actor)
        else:
            item = _supersede_contradicted(
                item, by=newer, actor=actor, reason="f4_subject_confirmed_update",
                verification=VERIFY.SUBJECT_CONFIRMED, evidence=evidence, answered=q)
    else:
        if item.state != lifecycle.HELD or q.validation.status != V.Status.OPEN:
            raise _conflict("question_moot", "this promotion is no longer waiting for consent")
        if answer == "consent":
            _resolve(q.validation, resolution="consented", by=actor)
            audit.append(account_id=item.account_id, event_type="governance.consent_given",
                         actor=as_actor(actor).label, target_type="knowledge",
                         target_id=str(item.pk),
                         payload={"validation": str(q.validation_id),
                                  "target_level": q.validation.target_level})
        else:
            item = transition(item, lifecycle.ACTIVE, actor=actor, reason="f4_promotion_declined",
                              evidence={**evidence, "declined_by": "subject"}, held_scope=None)
            _resolve(q.validation, resolution="declined", by=actor)
            close_open_work(item, status=V.Status.RESOLVED, resolution="declined", by=actor,
                            kinds=[V.Kind.REVIEW], answered=q)
    answered_at = timezone.now()
    close_questions(Q_.objects.filter(pk=q.pk), to=Q_.Status.ANSWERED, answer=answer,
                    at=answered_at)
    q.status, q.answer, q.answered_at = Q_.Status.ANSWERED, answer, answered_at
    return q


# --- corrections: curator edit and merge, a subject's correction --------------------------

# States a correction may retire (those with an edge to superseded).
CORRECTABLE = frozenset(s for s in lifecycle.STATES
                        if s != lifecycle.PROPOSED and lifecycle.SUPERSEDED in lifecycle.EDGES[s])
MAX_STATEMENT_CHARS = 2000
MAX_MERGE = 20


def _statement_text(statement: str | None) -> str:
    text = " ".join((statement or "").split())
    if not text:
        raise ApplicationError("statement_required", "the corrected statement needs text")
    if len(text) > MAX_STATEMENT_CHARS:
        raise ApplicationError("statement_too_long",
                               f"a statement is limited to {MAX_STATEMENT_CHARS} characters")
    return text


def _replace(originals: list[Knowledge], *, statement: str, actor: Peer, accept_reason: str,
             retire_reason: str, verification: str, note: str) -> Knowledge:
    """Mint the replacement of `originals` (provenance union, the first one's subject,
    scope, level, kind and valid time; the strictest sensitivity), make it active, and
    supersede every original, all in the caller's transaction and only through
    lifecycle.transition. The first original is what the new row `supersedes`."""
    from governance import belief_time
    from governance.intake.pipeline import enqueue_embedding
    from knowledge.ingest.extraction import stricter_sensitivity
    from knowledge.models import KnowledgeSource, Relation
    from knowledge.services import knowledge_propose

    first = originals[0]
    for item in originals:
        if item.state not in CORRECTABLE:
            raise _conflict("not_correctable", f"a {item.state} statement cannot be corrected")
        if _is_promotion(_open_validation(item, V.Kind.REVIEW), item) and \
                item.state == lifecycle.HELD:
            raise _conflict("promotion_pending", "decide the pending promotion first")
    sources: dict[tuple[str, Any], str] = {}
    for src in KnowledgeSource.objects.filter(knowledge__in=originals).order_by("created_at"):
        key = ("message_id", src.message_id) if src.message_id else (
            "document_version_id", src.document_version_id)
        sources.setdefault(key, src.excerpt)
    sensitivity = first.sensitivity
    for item in originals[1:]:
        sensitivity = stricter_sensitivity(sensitivity, item.sensitivity)
    stamps = belief_time.policy_for(first.scope).stamps(
        kind=first.kind, sensitivity=sensitivity, inserted_at=timezone.now(),
        relevant_until=first.relevant_until, statement=statement)
    new = knowledge_propose(
        account_id=first.account_id, statement=statement, scope=first.scope,
        subject_peer=first.subject_peer, actor=actor, kind=first.kind, level=first.level,
        confidence=max(item.confidence for item in originals), sensitivity=sensitivity,
        relevant_from=first.relevant_from, relevant_until=first.relevant_until,
        proposed_by=actor, extractor="governance/correction",
        sources=[{key: value, "excerpt": excerpt} for (key, value), excerpt in sources.items()],
        revalidate_after=stamps["revalidate_after"], expires_at=stamps["expires_at"])
    Knowledge.objects.filter(pk=new.pk).update(supersedes=first)
    new.supersedes_id = first.pk
    evidence = {"replaces": [str(item.pk) for item in originals], "note": note}
    new = transition(new, lifecycle.ACTIVE, actor=actor, reason=accept_reason,
                     verification=verification, evidence=evidence)
    for item in originals:
        Relation.objects.get_or_create(account_id=new.account_id, source=new, target=item,
                                       type=Relation.Type.SUPERSEDES)
        transition(item, lifecycle.SUPERSEDED, actor=actor, reason=retire_reason,
                   verification=verification,
                   evidence={"superseded_by": str(new.pk), "note": note})
        close_open_work(item, status=V.Status.RESOLVED, resolution="superseded", by=actor)
    drop_derived_rows([item.pk for item in originals])
    enqueue_embedding(new.account_id, [str(new.pk)])
    return new


@transaction.atomic
def knowledge_edit(*, item: Knowledge, actor: Peer, statement: str, note: str = "") -> Knowledge:
    """A curator corrects a statement: a new active row with the old one's provenance,
    the old row superseded (f4_curator_edit)."""
    _require_curator(actor)
    item = _lock(item)
    text = _statement_text(statement)
    if text == item.statement:
        raise ApplicationError("statement_unchanged", "the statement is unchanged")
    return _replace([item], statement=text, actor=actor, accept_reason="f4_curator_edited",
                    retire_reason="f4_curator_edit", verification=VERIFY.CURATOR_APPROVED,
                    note=_reason_text(note, required=False))


@transaction.atomic
def knowledge_merge(*, items: list[Knowledge], actor: Peer, statement: str | None = None,
                    note: str = "") -> Knowledge:
    """A curator merges several statements about one subject in one scope into one row
    (provenance union); each original is superseded (f4_curator_merge)."""
    _require_curator(actor)
    if not 2 <= len({i.pk for i in items}) <= MAX_MERGE:
        raise ApplicationError("invalid_merge", f"merge 2 to {MAX_MERGE} distinct statements")
    locked = [_lock(i) for i in sorted({i.pk: i for i in items}.values(),
                                       key=lambda i: str(i.pk))]
    order = {i.pk: n for n, i in enumerate(items)}
    locked.sort(key=lambda i: order[i.pk])
    first = locked[0]
    if any(i.subject_peer_id != first.subject_peer_id or i.scope_id != first.scope_id
           for i in locked):
        raise ApplicationError("invalid_merge",
                               "merged statements must share one subject and one scope")
    text = _statement_text(statement or first.statement)
    return _replace(locked, statement=text, actor=actor, accept_reason="f4_curator_edited",
                    retire_reason="f4_curator_merge", verification=VERIFY.CURATOR_APPROVED,
                    note=_reason_text(note, required=False))


@transaction.atomic
def knowledge_correct(*, item: Knowledge, actor: Peer, statement: str,
                      reason: str = "") -> Knowledge:
    """A subject marks their own statement outdated and states what is true now: the
    same path as a curator edit (f4_subject_correction), no curator needed."""
    item = _lock(item)
    _require_subject(item, actor)
    text = _statement_text(statement)
    if text == item.statement:
        raise ApplicationError("statement_unchanged", "the statement is unchanged")
    return _replace([item], statement=text, actor=actor, accept_reason="f4_subject_corrected",
                    retire_reason="f4_subject_correction",
                    verification=VERIFY.SUBJECT_CONFIRMED,
                    note=_reason_text(reason, required=False))


@transaction.atomic
def contradiction_resolve(*, item: Knowledge, actor: Peer, outcome: str,
                          note: str = "") -> Knowledge:
    """A curator settles a contradiction review on a current row: "keep" it (the review
    closes, the contradicts relation stays as settled history and reads stop marking the
    row possibly outdated) or "retire" it (superseded by the newest claim that says
    otherwise, f4_contradiction_resolved)."""
    _require_curator(actor)
    if outcome not in {"keep", "retire"}:
        raise ApplicationError("invalid_outcome", "outcome is 'keep' or 'retire'")
    item = _lock(item)
    review = _open_validation(item, V.Kind.CONTRADICTION)
    if review is None:
        raise _conflict("no_contradiction", "this statement has no open contradiction review")
    evidence = {"validation": str(review.pk), "note": note}
    newer = _newest_contradicting(item)
    if outcome == "retire" and newer is not None:
        _resolve(review, resolution=f"contradiction_{outcome}", by=actor, note=note)
        return _supersede_contradicted(item, by=newer, actor=actor,
                                       reason="f4_contradiction_resolved",
                                       verification=VERIFY.CURATOR_REJECTED,
                                       evidence=evidence)
    if outcome == "retire":
        item = transition(item, lifecycle.SUPERSEDED, actor=actor,
                          reason="f4_contradiction_resolved",
                          verification=VERIFY.CURATOR_REJECTED, evidence=evidence)
        drop_derived_rows([item.pk])
    else:
        _settle_contradictions(item)  # both stand: reads stop marking it
    _resolve(review, resolution=f"contradiction_{outcome}", by=actor, note=note)
    return item


@transaction.atomic
def revalidation_decide(*, item: Knowledge, actor: Peer, outcome: str,
                        note: str = "") -> Knowledge:
    """A curator settles the revalidation of a statement nobody else can confirm (no human
    subject): "reconfirm" it (active again, f4_revalidation_confirmed, its next
    revalidation moved forward) or "retire" it (rejected, f4_curator_retired). A
    statement about a person is theirs to confirm (409 subject_decides)."""
    _require_curator(actor)
    if outcome not in {"reconfirm", "retire"}:
        raise ApplicationError("invalid_outcome", "outcome is 'reconfirm' or 'retire'")
    item = _lock(item)
    validation = _open_validation(item, V.Kind.REVALIDATION)
    if item.state != lifecycle.NEEDS_REVALIDATION or validation is None:
        raise _conflict("not_due", f"this statement is not waiting for revalidation; it is "
                                   f"{item.state}")
    if has_human_subject(item):
        raise _conflict("subject_decides", "this statement is about a person: they confirm "
                                           "it themselves")
    evidence = {"validation": str(validation.pk), "note": note}
    if outcome == "reconfirm":
        item = transition(item, lifecycle.ACTIVE, actor=actor,
                          reason="f4_revalidation_confirmed",
                          verification=VERIFY.CURATOR_APPROVED, evidence=evidence,
                          **_next_revalidation(item, timezone.now()))
    else:
        item = transition(item, lifecycle.REJECTED, actor=actor, reason="f4_curator_retired",
                          verification=VERIFY.CURATOR_REJECTED, evidence=evidence)
        drop_derived_rows([item.pk])
    _resolve(validation, resolution=f"revalidation_{outcome}", by=actor, note=note)
    return item


# --- belief-time policy per scope ---------------------------------------------------------

@transaction.atomic
def scope_belief_time_set(*, scope: Scope, actor: Peer, policy: dict[str, Any] | None
                          ) -> Scope:
    """Set (or with None clear) a scope's belief-time override; nearest scope wins per
    part (governance.belief_time). Admins only; audited."""
    from governance import belief_time

    if not (isinstance(actor, Peer) and actor.kind == Peer.Kind.HUMAN and actor.is_admin):
        raise ApplicationError("permission_denied", "only account administrators may change "
                               "scope settings", status_code=403)
    value = None
    if policy is not None:
        try:
            value = belief_time.validate_override(policy)
        except ValueError as exc:
            raise ApplicationError("invalid_belief_time", str(exc)) from exc
    locked = scope_setting_write(scope=scope, key=belief_time.SETTING_KEY, value=value)
    audit.append(account_id=locked.account_id, event_type="scope.belief_time_set",
                 actor=as_actor(actor).label, target_type="scope", target_id=str(locked.pk),
                 payload={"belief_time": locked.settings.get(belief_time.SETTING_KEY)})
    return locked


def belief_time_backfill(*, account_id: uuid.UUID, only_missing: bool = True,
                         batch_size: int = 500, progress: Any = None) -> int:
    """Stamp revalidate_after / expires_at by the policy on existing current rows (those
    with neither set, unless only_missing=False). Each batch is its own transaction, so a
    long backfill can be stopped and resumed. Returns the number of rows stamped."""
    from governance import belief_time

    policies: dict[uuid.UUID, belief_time.Policy] = {}
    done = 0
    last: Any = None
    while True:
        with transaction.atomic():
            qs = Knowledge.objects.filter(account_id=account_id,
                                          state__in=sorted(lifecycle.CURRENT))
            if only_missing:
                qs = qs.filter(revalidate_after__isnull=True, expires_at__isnull=True)
            if last is not None:
                qs = qs.filter(pk__gt=last)
            batch = list(qs.select_related("scope").order_by("pk")[:batch_size])
            if not batch:
                return done
            for item in batch:
                policy = policies.get(item.scope_id)
                if policy is None:
                    policy = policies[item.scope_id] = belief_time.policy_for(item.scope)
                # Not state or statement: a plain update is allowed by the triggers.
                Knowledge.objects.filter(pk=item.pk).update(**belief_time.stamps_for(
                    item, policy=policy))
            last = batch[-1].pk
            done += len(batch)
        if progress is not None:
            progress(len(batch))


def link_named_person(peer: Peer) -> int:
    """Link the claims held for naming `peer` (by display name, key or alias, in full or
    by a first name) to them. Runs in the transaction that registered or renamed them."""
    from governance.intake.named import HOLD_REASON, REGISTRATION, names_of

    names = names_of(peer)
    if not names:
        return 0
    rows = list(Knowledge.objects.select_for_update(no_key=True)
                .filter(account_id=peer.account_id, state=lifecycle.HELD,
                        state_reason=HOLD_REASON, subject_peer__isnull=True)
                .exclude(named_entity="")
                .annotate(entity=Lower("named_entity")).order_by("inserted_at", "id"))
    now = timezone.now()
    linked = 0
    for item in rows:
        entity = item.entity  # type: ignore[attr-defined]
        if entity not in names and entity.split()[0] not in names:
            continue
        transition(item, lifecycle.PROVISIONAL, actor=REGISTRATION,
                   reason="f4_named_person_linked",
                   verification=Knowledge.Verification.GATE_DEFER,
                   evidence={"named_entity": item.named_entity, "peer": peer.key},
                   subject_peer=peer, level=Knowledge.Level.PEER, held_scope=None)
        close_open_work(item, status=Validation.Status.RESOLVED, resolution="linked",
                        kinds=[Validation.Kind.REVIEW])
        validation_with_question(
            item, kind=Validation.Kind.CONFIRMATION, reason="f4_named_person_linked",
            window=CONFIRMATION_WINDOW, text="Is this right about you?", now=now)
        linked += 1
    return linked
