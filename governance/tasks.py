"""Celery entry points for intake and governance workers: ids in, services called,
idempotent.

A sweep task without an account_id runs every Account (the beat schedule's form); with
one it runs just that Account.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from celery import shared_task
from django.db import OperationalError, transaction
from django.utils import timezone

from governance import workers
from knowledge import lifecycle

log = logging.getLogger(__name__)
_RETRY = {"autoretry_for": (OperationalError,), "retry_backoff": True, "max_retries": 5,
          "acks_late": True}


def _run(work: Any, account_id: str | None) -> Any:
    return work(account_id) if account_id else workers.per_account(work)


@shared_task(name="governance.expire_due", **_RETRY)
def expire_due(account_id: str | None = None) -> Any:
    return _run(workers.expire_due, account_id)


@shared_task(name="governance.revalidate_due", **_RETRY)
def revalidate_due(account_id: str | None = None) -> Any:
    return _run(workers.revalidate_due, account_id)


@shared_task(name="governance.reconfirm_supported", **_RETRY)
def reconfirm_supported(account_id: str | None = None) -> Any:
    return _run(workers.reconfirm_supported, account_id)


@shared_task(name="governance.age_overdue_reviews", **_RETRY)
def age_overdue_reviews(account_id: str | None = None) -> Any:
    return _run(workers.age_overdue_reviews, account_id)


@shared_task(name="governance.decay_unanswered_questions", **_RETRY)
def decay_unanswered_questions(account_id: str | None = None) -> Any:
    return _run(workers.decay_unanswered_questions, account_id)


@shared_task(name="governance.resolve_entities", **_RETRY)
def resolve_entities(account_id: str | None = None) -> Any:
    return _run(workers.resolve_entities, account_id)


@shared_task(name="governance.resolve_entity_scopes", **_RETRY)
def resolve_entity_scopes(account_id: str, scope_ids: list[str] | None = None) -> Any:
    """Entity resolution of the given scopes (ids in; model calls billed to the Account).
    Idempotent: verdicts are cached per pair and links replaced per scope."""
    return workers.resolve_entity_scopes(account_id, scope_ids)


@shared_task(name="governance.verify_audit_chains", **_RETRY)
def verify_audit_chains(account_id: str | None = None) -> Any:
    return _run(workers.verify_audit_chain, account_id)


@shared_task(name="governance.consolidate_duplicates", **_RETRY)
def consolidate_duplicates(account_id: str | None = None) -> Any:
    return _run(workers.consolidate_duplicates, account_id)


@shared_task(name="governance.deduce", **_RETRY)
def deduce(account_id: str | None = None) -> Any:
    return _run(workers.deduce, account_id)


@shared_task(name="governance.contributor_changed", **_RETRY)
def contributor_changed(account_id: str, knowledge_id: str) -> int:
    return workers.contributor_changed(account_id, knowledge_id)


# --- intake ------------------------------------------------------------------------------

@shared_task(name="governance.process_messages", **_RETRY)
def process_messages(account_id: str, message_ids: list[str]) -> int:
    """A batch through the pipeline with set-based writes (model-free extraction). When
    the batch's write fails (a bug or bad data in one message), the messages go through
    one at a time, so the poison one is set aside (dead-lettered) and the rest are
    extracted. A model-backed extractor always goes one message at a time: each model
    call then sees the statements of the messages before it, and a crash repeats at
    most one (billed) call.

    Each start is counted first, committed before the work (the crash counter): a
    message whose processing keeps being cut off is set aside after
    MEMHOUSE_MAX_INGEST_ATTEMPTS starts instead of being processed again (a batch's
    messages start together; with a model, each just before its turn)."""
    from governance.intake.pipeline import (
        batches_messages,
        enqueue_batch_embedding,
        process_message,
        process_messages_batch,
    )
    from knowledge.ingest.dead_letter import mark_extraction_failed, start_messages

    # The batch path works on every message at once, so they all start now; a model goes
    # one message at a time, so each counts its own start just before its turn (a long
    # batch does not charge the messages it has not reached yet).
    batched = batches_messages()
    if batched:
        message_ids = start_messages(account_id, message_ids)
        if not message_ids:
            return 0  # done, set aside or gone meanwhile
        try:
            outcome, failed = process_messages_batch(account_id, message_ids)
        except OperationalError:
            raise  # the database, not a message: the task retries the batch
        except Exception:
            log.warning("batch write failed; processing its messages one at a time",
                        exc_info=True, extra={"account_id": account_id})
        else:
            for mid, exc in failed.items():
                mark_extraction_failed(account_id, mid, exc)
            return outcome.proposed
    proposed, kept = 0, []
    for mid in message_ids:
        if not batched and not start_messages(account_id, [mid]):
            continue  # done, set aside or gone meanwhile
        try:
            one = process_message(account_id, mid, embed=False)
        except OperationalError:
            raise
        except Exception as exc:  # a poison message is set aside; the batch goes on
            mark_extraction_failed(account_id, mid, exc)
            continue
        proposed += one.proposed
        kept += one.kept or []
    with transaction.atomic():  # one embedding job for the whole batch
        enqueue_batch_embedding(account_id, kept, [str(m) for m in message_ids])
    return proposed


@shared_task(name="governance.process_document_version", **_RETRY)
def process_document_version(account_id: str, version_id: str) -> int:
    """One document version through the pipeline. A version whose processing raises (not
    the database, which retries) is set aside (`processing_failed_at`), as a poison
    message is, so a writer waiting on it hears `failed` instead of waiting out. Its
    start is counted first, as a batch of messages' is."""
    from governance.intake.pipeline import mark_version_failed
    from governance.intake.pipeline import process_document_version as run
    from knowledge.ingest.dead_letter import start_version

    if not start_version(account_id, version_id):
        return 0  # processed, set aside, cut off too often or tombstoned
    try:
        return run(account_id, version_id).proposed
    except OperationalError:
        raise
    except Exception as exc:
        mark_version_failed(account_id, version_id, exc)
        return 0


@shared_task(name="governance.sweep_unprocessed", acks_late=True)
def sweep_unprocessed(older_than_seconds: int = 300, limit: int = 500) -> int:
    """Re-enqueue messages and live document versions whose pipeline work was lost (the
    broker down at commit, or a worker cut off by a restart): neither processed nor set
    aside, and last started (never started: stored) more than `older_than_seconds` ago.
    A message cut off before goes alone, so a poison one is counted alone; a source
    already started MEMHOUSE_MAX_INGEST_ATTEMPTS times is set aside (dead-lettered,
    `crashed_repeatedly`) instead of re-enqueued. Returns how many were re-enqueued."""
    from knowledge.accounts import list_account_ids
    from knowledge.ingest.dead_letter import sweep_account

    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    queued = 0
    for account_id in list_account_ids():
        found = sweep_account(account_id, cutoff=cutoff, limit=limit)
        for start in range(0, len(found.messages), 50):
            process_messages.delay(str(account_id), found.messages[start:start + 50])
        for message_id in found.suspects:
            process_messages.delay(str(account_id), [message_id])
        for version_id in found.versions:
            process_document_version.delay(str(account_id), version_id)
        queued += len(found.messages) + len(found.suspects) + len(found.versions)
    return queued


# --- enqueue on commit (task modules own these; work modules never import tasks) ---------

# Reasons that only ever leave `proposed` (gate outcomes): such a row was never active,
# so it cannot be a deduction contributor and needs no follow-up task.
_GATE_REASONS = frozenset({"f4_gate_a_noise", "f4_gate_a_duplicate", "f4_gate_a_unsupported",
                           "f4_gate_b_restricted_unattended", "f4_gate_a_b_deferred",
                           "f4_scope_hold", "f4_gate_unattended_hold"})


def on_knowledge_transition(item: Any) -> None:
    """Lifecycle refresh hook: when a statement may have left `active`, check after
    commit whether active deductions derive from it. Runs inside transition(); no query."""
    if item.state in (lifecycle.ACTIVE, lifecycle.PROPOSED) or item.state_reason in _GATE_REASONS:
        return
    account_id, knowledge_id = str(item.account_id), str(item.pk)
    transaction.on_commit(lambda: contributor_changed.delay(account_id, knowledge_id),
                          robust=True)
