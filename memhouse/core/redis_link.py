"""A Redis connection for state that may fall back to one process (rate limits,
read-your-writes positions): short timeouts, and after a failure left alone for a while
so a Redis outage costs each request nothing rather than a timeout."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

# How long a failed Redis is left alone before the next try.
RETRY_AFTER_SECONDS = 30.0


class RedisLink:
    def __init__(self, url: Any) -> None:
        self._url = url  # a string, or a callable giving one (read when first used)
        self._redis: Any = None
        self._down_until = 0.0
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The client, or None while Redis is considered down."""
        if time.monotonic() < self._down_until:
            return None
        with self._lock:
            if self._redis is None:
                import redis

                url = self._url() if callable(self._url) else self._url
                self._redis = redis.Redis.from_url(url, socket_timeout=0.2,
                                                   socket_connect_timeout=0.2)
        return self._redis

    def down(self, message: str) -> None:
        """Redis failed: say so and use the fallback for RETRY_AFTER_SECONDS."""
        log.warning(message)
        self._down_until = time.monotonic() + RETRY_AFTER_SECONDS
