"""Celery entry point for context projection rebuilds (see retrieval.projections)."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from retrieval import projections


@shared_task(name="retrieval.rebuild_projections", autoretry_for=(OperationalError,),
             retry_backoff=True, max_retries=5, acks_late=True)
def rebuild_projections(account_id: str, projection_ids: list[str]) -> int:
    """Rebuild dirty projections. Idempotent: a rebuild reads governed knowledge afresh,
    so redelivery or a duplicate enqueue only costs time."""
    return projections.rebuild_many(account_id, projection_ids)


projections.register_rebuild_task(rebuild_projections)
