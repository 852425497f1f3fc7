"""Celery entry points for the ingest pipeline: ids in, services called, idempotent."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

_RETRY = {"autoretry_for": (OperationalError,), "retry_backoff": True, "max_retries": 5,
          "acks_late": True}


@shared_task(name="knowledge.process_messages", **_RETRY)
def process_messages(account_id: str, message_ids: list[str]) -> int:
    from django.db import transaction

    from knowledge.ingest.dead_letter import mark_extraction_failed
    from knowledge.ingest.pipeline import enqueue_embedding, process_message

    proposed, kept = 0, []
    for mid in message_ids:
        try:
            outcome = process_message(account_id, mid, embed=False)
        except OperationalError:
            raise  # the database, not the message: the task retries the batch
        except Exception as exc:  # a poison message is set aside; the batch goes on
            mark_extraction_failed(account_id, mid, exc)
            continue
        proposed += outcome.proposed
        kept += outcome.kept or []
    with transaction.atomic():  # one embedding job for the whole batch
        enqueue_embedding(account_id, kept)
    return proposed


@shared_task(name="knowledge.process_document_version", **_RETRY)
def process_document_version(account_id: str, version_id: str) -> int:
    from knowledge.ingest.pipeline import process_document_version as run

    return run(account_id, version_id).proposed


@shared_task(name="knowledge.sweep_unprocessed", acks_late=True)
def sweep_unprocessed(older_than_seconds: int = 300, limit: int = 500) -> int:
    """Re-enqueue messages whose pipeline dispatch was lost (broker down at commit)."""
    from knowledge.models import Message
    from memhouse.tenancy import account_context, list_account_ids

    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    queued = 0
    for account_id in list_account_ids():
        with account_context(account_id):
            ids = [str(i) for i in Message.objects.filter(
                extracted_at__isnull=True, extraction_failed_at__isnull=True,
                inserted_at__lte=cutoff)
                .order_by("inserted_at").values_list("id", flat=True)[:limit]]
        for start in range(0, len(ids), 50):
            process_messages.delay(str(account_id), ids[start:start + 50])
        queued += len(ids)
    return queued
