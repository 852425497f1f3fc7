"""Celery entry point for the entity mention index (see retrieval.entities)."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError


@shared_task(name="retrieval.index_entities", autoretry_for=(OperationalError,),
             retry_backoff=True, max_retries=5, acks_late=True)
def index_entities(account_id: str, knowledge_ids: list[str]) -> dict[str, int]:
    """Index freshly embedded statements. Idempotent, so redelivery is harmless."""
    from retrieval.entities import index_knowledge

    return index_knowledge(account_id, knowledge_ids)
