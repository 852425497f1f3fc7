from __future__ import annotations

from celery import shared_task
from django.db import OperationalError


@shared_task(name="retrieval.embed_knowledge", autoretry_for=(OperationalError,),
             retry_backoff=True, max_retries=5, acks_late=True)
def embed_knowledge(account_id: str, knowledge_ids: list[str]) -> int:
    from retrieval.vectors import embed_knowledge as run

    return run(account_id, knowledge_ids)


@shared_task(name="retrieval.embed_messages", autoretry_for=(OperationalError,),
             retry_backoff=True, max_retries=5, acks_late=True)
def embed_messages(account_id: str, message_ids: list[str]) -> int:
    from retrieval.vectors import embed_messages as run

    return run(account_id, message_ids)


@shared_task(name="retrieval.embed_batch", autoretry_for=(OperationalError,),
             retry_backoff=True, max_retries=5, acks_late=True)
def embed_batch(account_id: str, knowledge_ids: list[str], message_ids: list[str]
                ) -> list[int]:
    """An intake batch's statements and messages with one encoder call."""
    from retrieval.vectors import embed_batch as run

    return list(run(account_id, knowledge_ids, message_ids))
