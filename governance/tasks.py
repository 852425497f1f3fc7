"""Celery entry points for governance workers: ids in, workers called, idempotent.

A sweep task without an account_id runs every Account (the beat schedule's form); with
one it runs just that Account.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import OperationalError

_RETRY = {"autoretry_for": (OperationalError,), "retry_backoff": True, "max_retries": 5,
          "acks_late": True}


def _run(work: Any, account_id: str | None) -> Any:
    from governance.workers import per_account

    return work(account_id) if account_id else per_account(work)


@shared_task(name="governance.expire_due", **_RETRY)
def expire_due(account_id: str | None = None) -> Any:
    from governance.workers import expire_due as work

    return _run(work, account_id)


@shared_task(name="governance.revalidate_due", **_RETRY)
def revalidate_due(account_id: str | None = None) -> Any:
    from governance.workers import revalidate_due as work

    return _run(work, account_id)


@shared_task(name="governance.age_overdue_reviews", **_RETRY)
def age_overdue_reviews(account_id: str | None = None) -> Any:
    from governance.workers import age_overdue_reviews as work

    return _run(work, account_id)


@shared_task(name="governance.decay_unanswered_questions", **_RETRY)
def decay_unanswered_questions(account_id: str | None = None) -> Any:
    from governance.workers import decay_unanswered_questions as work

    return _run(work, account_id)


@shared_task(name="governance.resolve_entities", **_RETRY)
def resolve_entities(account_id: str | None = None) -> Any:
    from governance.workers import resolve_entities as work

    return _run(work, account_id)


@shared_task(name="governance.consolidate_duplicates", **_RETRY)
def consolidate_duplicates(account_id: str | None = None) -> Any:
    from governance.workers import consolidate_duplicates as work

    return _run(work, account_id)


@shared_task(name="governance.deduce", **_RETRY)
def deduce(account_id: str | None = None) -> Any:
    from governance.workers import deduce as work

    return _run(work, account_id)


@shared_task(name="governance.contributor_changed", **_RETRY)
def contributor_changed(account_id: str, knowledge_id: str) -> int:
    from governance.workers import contributor_changed as work

    return work(account_id, knowledge_id)
