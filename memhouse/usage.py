"""Metering: the durable usage ledger and per-credential rate limits.

The ledger row is written in the request's transaction, so it records calls that
succeeded. Rate counters are deliberately *not* transactional: a refused or failing
request still counts, and concurrent requests never wait on a counter row. They live in
Redis (atomic INCR with a window expiry) and fall back to a per-process counter when
Redis does not answer (the single-process embedded default).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.conf import settings
from rest_framework.throttling import BaseThrottle

from memhouse.principal import Principal

log = logging.getLogger(__name__)
WINDOW_SECONDS = 60


def record(principal: Principal, kind: str, units: int = 1) -> None:
    """Append one ledger row for a successful call (inside the request transaction)."""
    from knowledge.models import UsageEntry

    if units <= 0:
        return
    UsageEntry.objects.create(account_id=principal.account_id, kind=kind, units=units,
                              credential_id=principal.credential_id,
                              peer_key=principal.peer.key if principal.peer else "")


class _Counter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local: dict[str, tuple[int, int]] = {}  # key -> (window, count)
        self._redis: Any = None
        self._redis_down_until = 0.0

    def _client(self) -> Any:
        if time.monotonic() < self._redis_down_until:
            return None
        if self._redis is None:
            import redis

            url = getattr(settings, "MEMHOUSE_RATE_LIMIT_REDIS_URL", "") or settings.REDIS_URL
            self._redis = redis.Redis.from_url(url, socket_timeout=0.2,
                                               socket_connect_timeout=0.2)
        return self._redis

    def hit(self, key: str, window: int) -> int:
        """Count one request in `window` and return the count so far."""
        client = self._client()
        if client is not None:
            try:
                name = f"memhouse:rate:{key}:{window}"
                pipe = client.pipeline()
                pipe.incr(name)
                pipe.expire(name, WINDOW_SECONDS * 2)
                return int(pipe.execute()[0])
            except Exception:
                log.warning("rate limiter: Redis unavailable, counting in this process")
                self._redis_down_until = time.monotonic() + 30
        with self._lock:
            seen_window, count = self._local.get(key, (window, 0))
            count = count + 1 if seen_window == window else 1
            self._local[key] = (window, count)
            if len(self._local) > 100_000:  # bounded: drop old windows
                self._local = {k: v for k, v in self._local.items() if v[0] == window}
            return count


_counter = _Counter()


class CredentialRateThrottle(BaseThrottle):
    """At most MEMHOUSE_RATE_LIMIT_PER_MINUTE requests per credential (or per signed-in
    human) in each fixed one-minute window; beyond that 429 with Retry-After."""

    def __init__(self) -> None:
        self.retry_after = 0

    def allow_request(self, request: Any, view: Any) -> bool:
        limit = int(getattr(settings, "MEMHOUSE_RATE_LIMIT_PER_MINUTE", 0))
        principal = request.user
        if limit <= 0 or not isinstance(principal, Principal):
            return True
        subject = principal.credential_id or (principal.peer.pk if principal.peer else None)
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        if _counter.hit(f"{principal.account_id}:{subject}", window) <= limit:
            return True
        self.retry_after = max(1, int((window + 1) * WINDOW_SECONDS - now))
        return False

    def wait(self) -> float | None:
        return float(self.retry_after)
