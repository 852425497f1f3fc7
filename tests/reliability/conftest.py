"""Fixtures for tests/reliability (faults and bad input, issue #9)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def no_rate_limit(settings: Any) -> None:
    """Many requests from one key in a minute are the point of these tests."""
    settings.MEMHOUSE_RATE_LIMIT_PER_MINUTE = 0
    settings.MEMHOUSE_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE = 0
