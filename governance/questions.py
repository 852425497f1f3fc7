"""One way to ask a subject about a statement: an open Validation of a kind and, when the
statement has a subject, that subject's PeerQuestion of the same kind, both due after the
same window. Gate B confirmation, revalidation and promotion consent all open theirs here,
so the pairing (and idempotency under redelivery) cannot drift between them.

Their status is small state machines with one writer each: a Validation is opened here
and leaves `open` only through :func:`close_validations` (to `resolved` or `expired`); a
PeerQuestion is opened here and leaves `open` only through :func:`close_questions` (to
`answered` or `expired`). Closed is final for both."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from governance.models import PeerQuestion, Validation
from knowledge.models import Knowledge, Peer
from memhouse.core.errors import ApplicationError

V, Q_ = Validation.Status, PeerQuestion.Status
VALIDATION_EDGES: dict[str, frozenset[str]] = {
    V.OPEN: frozenset({V.RESOLVED, V.EXPIRED}), V.RESOLVED: frozenset(),
    V.EXPIRED: frozenset()}
QUESTION_EDGES: dict[str, frozenset[str]] = {
    Q_.OPEN: frozenset({Q_.ANSWERED, Q_.EXPIRED}), Q_.ANSWERED: frozenset(),
    Q_.EXPIRED: frozenset()}


def _check(edges: dict[str, frozenset[str]], to: str, what: str) -> None:
    # Both tables leave only `open`; a closed row is never written again.
    if to not in edges["open"]:
        raise ApplicationError("invalid_status", f"a {what} closes as "
                               f"{' or '.join(sorted(edges['open']))}, not {to!r}",
                               status_code=409)


def close_validations(validations: QuerySet[Validation] | Iterable[Validation], *, to: str,
                      resolution: str, by: Peer | None = None, note: str = "",
                      at: datetime | None = None) -> int:
    """Close the open ones among `validations` (open -> resolved | expired); closed ones
    are left as they are. Instances passed in are updated too. Returns how many closed."""
    _check(VALIDATION_EDGES, to, "validation")
    at = at or timezone.now()
    instances = [] if isinstance(validations, QuerySet) else list(validations)
    qs = (validations if isinstance(validations, QuerySet)
          else Validation.objects.filter(pk__in=[v.pk for v in instances]))
    updates: dict[str, Any] = {"status": to, "resolution": resolution, "resolved_at": at,
                               "resolved_by": by}
    if note:
        updates["note"] = note
    closed = qs.filter(status=V.OPEN).update(**updates)
    for v in instances:
        if v.status == V.OPEN:
            for field, value in updates.items():
                setattr(v, field, value)
    return closed


def close_questions(questions: QuerySet[PeerQuestion], *, to: str, answer: str = "",
                    at: datetime | None = None) -> int:
    """Close the open ones among `questions` (open -> answered | expired)."""
    _check(QUESTION_EDGES, to, "question")
    updates: dict[str, Any] = {"status": to}
    if to == Q_.ANSWERED:
        updates.update(answer=answer, answered_at=at or timezone.now())
    return questions.filter(status=Q_.OPEN).update(**updates)


def validation_with_question(item: Knowledge, *, kind: str, reason: str, window: timedelta,
                             text: str, now: datetime, **validation_fields: Any
                             ) -> Validation:
    """Open (or reuse the open) validation of `kind` on `item` and its subject question.
    Call inside the transaction that moved `item`; a repeat call creates nothing."""
    due = now + window
    validation, _ = Validation.objects.get_or_create(
        account_id=item.account_id, knowledge=item, kind=kind, status=Validation.Status.OPEN,
        defaults={"reason": reason, "due_at": due, **validation_fields})
    if item.subject_peer_id is not None:
        PeerQuestion.objects.get_or_create(
            account_id=item.account_id, validation=validation, knowledge=item,
            peer_id=item.subject_peer_id, kind=kind,
            defaults={"text": f"{text} \u201c{item.statement}\u201d", "deadline": due})
    return validation


def validations_with_questions_for_new(items: list[Knowledge], *, kind: str, reason: str,
                                       window: timedelta, text: str, now: datetime,
                                       **validation_fields: Any) -> list[Validation]:
    """validation_with_question for rows created in this transaction (none can have an
    open validation yet), with two inserts however many rows."""
    due = now + window
    validations = [Validation(account_id=item.account_id, knowledge=item, kind=kind,
                              status=Validation.Status.OPEN, reason=reason, due_at=due,
                              **validation_fields) for item in items]
    Validation.objects.bulk_create(validations)
    PeerQuestion.objects.bulk_create([
        PeerQuestion(account_id=item.account_id, validation=validation, knowledge=item,
                     peer_id=item.subject_peer_id, kind=kind,
                     text=f"{text} \u201c{item.statement}\u201d", deadline=due)
        for item, validation in zip(items, validations, strict=True)
        if item.subject_peer_id is not None])
    return validations
