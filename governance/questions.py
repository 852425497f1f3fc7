"""One way to ask a subject about a statement: an open Validation of a kind and, when the
statement has a subject, that subject's PeerQuestion of the same kind, both due after the
same window. Gate B confirmation, revalidation and promotion consent all open theirs here,
so the pairing (and idempotency under redelivery) cannot drift between them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from governance.models import PeerQuestion, Validation
from knowledge.models import Knowledge


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
