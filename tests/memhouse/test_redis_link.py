"""State kept in Redis falls back to the process when Redis does not answer, and leaves
Redis alone for a while after a failure (memhouse.core.redis_link): a real unreachable
port, no mock."""

from __future__ import annotations

import time

import pytest
import redis

from memhouse.core import db_router, redis_link
from memhouse.usage import _Counter

DEAD = "redis://127.0.0.1:1/0"  # nothing listens on port 1


def test_a_failed_redis_is_left_alone_then_tried_again(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    link = redis_link.RedisLink(DEAD)
    client = link.client()
    assert client is not None
    with pytest.raises(redis.exceptions.ConnectionError):
        client.ping()
    monkeypatch.setattr(redis_link, "RETRY_AFTER_SECONDS", 0.2)
    link.down("test: redis down")
    assert link.client() is None  # no timeout paid while it is down
    time.sleep(0.25)
    assert link.client() is client  # tried again afterwards


def test_rate_counts_and_positions_go_on_in_the_process_without_redis(settings) -> None:
    settings.MEMHOUSE_RATE_LIMIT_REDIS_URL = DEAD
    counter = _Counter()
    assert [counter.hit("k", 7) for _ in range(3)] == [1, 2, 3]
    assert counter._client() is None  # left alone after the first failure

    settings.REDIS_URL = DEAD
    positions = db_router._Positions()
    positions.put("acct:peer:1", "0/16B3748")
    assert positions.get("acct:peer:1") == "0/16B3748"
