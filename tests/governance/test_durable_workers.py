"""A worker's batch is the outermost transaction (atomic(durable=True)): nested in a
caller's transaction it would silently become a savepoint that commits only with the
caller, so Django refuses it."""

from __future__ import annotations

import pytest
from django.db import transaction

from governance import workers


@pytest.mark.parametrize("work", [workers.expire_due, workers.revalidate_due,
                                  workers.age_overdue_reviews,
                                  workers.decay_unanswered_questions,
                                  workers.consolidate_duplicates])
def test_worker_batches_refuse_to_nest(committed_world, work):
    account_id = committed_world.account.id
    assert work(account_id) == 0  # outermost: runs
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        work(account_id)
