"""Security suite fixtures: one committed corpus per module (strategy threads and other
connections must see it), API calls through DRF's APIClient inside the test transaction,
and the rate limit switched off (the matrices send hundreds of requests per key)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.security.corpus import Corpus, build_corpus


@pytest.fixture(autouse=True)
def _no_rate_limit(settings: Any) -> None:
    settings.MEMHOUSE_RATE_LIMIT_PER_MINUTE = 0
    settings.MEMHOUSE_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE = 0


_live: list[bool] = [False]


def _flush() -> None:
    from django.core.management import call_command

    from retrieval.engine import close_strategy_connections

    close_strategy_connections()
    call_command("flush", interactive=False, verbosity=0)
    _live[0] = False


@pytest.fixture(scope="package")
def corpus(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Corpus]:
    """Two Accounts with a full reader-matrix corpus, committed once for this package and
    flushed afterwards (tests using it run in rolled-back transactions on top).

    pytest-django runs every `db` test before any transactional one, so the corpus is
    built once for both matrices and dropped before the first transactional test here
    (see `_no_corpus_under_transactional_tests`) or when the package ends."""
    with django_db_blocker.unblock():
        built = build_corpus()
        _live[0] = True
        try:
            yield built
        finally:
            if _live[0]:
                _flush()


@pytest.fixture(autouse=True)
def _no_corpus_under_transactional_tests(request: Any, django_db_blocker: Any) -> None:
    names = request.fixturenames
    marker = request.node.get_closest_marker("django_db")
    transactional = ("transactional_db" in names or "live_server" in names
                     or (marker is not None and marker.kwargs.get("transaction")))
    if transactional and _live[0]:
        with django_db_blocker.unblock():
            _flush()
