"""Metering wiring: per-peer and per-Account rate limits, the request's billing scope, and the
recorder behind the ground's model-call hook (memhouse.core.metering).

The durable ledger and its one writer live with the UsageEntry model (knowledge.usage);
views call it there. Rate counters are deliberately *not* transactional: a refused or
failing request still counts, and concurrent requests never wait on a counter row. They live in
Redis (atomic INCR with a window expiry) and fall back to a per-process counter when
Redis does not answer (the single-process embedded default).

Generation-model calls are metered where they are made, in the one provider interface:
:mod:`memhouse.core.llm` calls the ground's hook for every call, whatever its outcome, and
memhouse.apps registers :func:`record_model_call` behind it. Who a call is billed to is
decided by :func:`memhouse.core.metering.current_meter`; a call with nobody to bill is counted
in ``memhouse_model_calls_unattributed_total`` and logged, never silently dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.conf import settings
from rest_framework.throttling import BaseThrottle

from knowledge.usage import write_model_call
from memhouse import observability as obs
from memhouse.core.metering import bind_request_principal, current_meter, request_scope
from memhouse.core.principal import Principal
from memhouse.core.redis_link import RedisLink

log = logging.getLogger(__name__)
WINDOW_SECONDS = 60


class RequestScopeMiddleware:
    """Binds the request's principal (set by the throttle) for billing its model calls,
    for exactly the request's lifetime."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        with request_scope():
            return self.get_response(request)


def record_model_call(*, purpose: str, outcome: str, attempts: int = 1,
                      prompt_tokens: int = 0, completion_tokens: int = 0,
                      tokens_reported: bool = False, seconds: float = 0.0) -> None:
    """Meter one generation-model call: Prometheus always, the Account's ledger when the
    call can be attributed (``model_call`` = 1, ``model_tokens`` = tokens reported).
    Never raises: metering must not change the outcome of the call it meters."""
    total = prompt_tokens + completion_tokens
    obs.MODEL_CALLS.labels(purpose, outcome).inc()
    obs.MODEL_CALL_SECONDS.labels(purpose).observe(seconds)
    if tokens_reported:
        obs.MODEL_TOKENS.labels(purpose, "prompt").inc(prompt_tokens)
        obs.MODEL_TOKENS.labels(purpose, "completion").inc(completion_tokens)
    try:
        meter = current_meter()
        written = meter is not None and write_model_call(meter, total if tokens_reported
                                                         else 0)
    except Exception:
        log.exception("model call: the usage ledger write failed", extra={"purpose": purpose})
        written = False
    if not written:
        obs.MODEL_CALLS_UNATTRIBUTED.labels(purpose).inc()
        log.warning("model call not attributed to an Account", extra={"purpose": purpose})
    log.info("model call", extra={
        "purpose": purpose, "outcome": outcome, "attempts": attempts,
        "prompt_tokens": prompt_tokens if tokens_reported else None,
        "completion_tokens": completion_tokens if tokens_reported else None,
        "account_id": str(meter.account_id) if written and meter else None,
        "seconds": round(seconds, 3)})


class _Counter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local: dict[str, tuple[int, int]] = {}  # key -> (window, count)
        self._link = RedisLink(lambda: getattr(settings, "MEMHOUSE_RATE_LIMIT_REDIS_URL", "")
                               or settings.REDIS_URL)

    def _client(self) -> Any:
        return self._link.client()

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
                self._link.down("rate limiter: Redis unavailable, counting in this process")
        with self._lock:
            seen_window, count = self._local.get(key, (window, 0))
            count = count + 1 if seen_window == window else 1
            self._local[key] = (window, count)
            if len(self._local) > 100_000:  # bounded: drop old windows
                self._local = {k: v for k, v in self._local.items() if v[0] == window}
            return count


_counter = _Counter()


class CredentialRateThrottle(BaseThrottle):
    """At most MEMHOUSE_RATE_LIMIT_PER_MINUTE requests per acting peer (a peerless key:
    per credential) and MEMHOUSE_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE per Account in each
    fixed one-minute window; beyond either, 429 with Retry-After. Keyed by the peer, not
    the credential, so a person who signs in again (a fresh token) or an agent with a
    second key gets no fresh budget."""

    def __init__(self) -> None:
        self.retry_after = 0

    def allow_request(self, request: Any, view: Any) -> bool:
        limit = int(getattr(settings, "MEMHOUSE_RATE_LIMIT_PER_MINUTE", 0))
        ceiling = int(getattr(settings, "MEMHOUSE_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE", 0))
        principal = request.user
        if isinstance(principal, Principal):
            # Every API view runs this throttle after authentication: the request's model
            # calls are billed to this principal (reset by RequestScopeMiddleware at the end).
            bind_request_principal(principal)
        if (limit <= 0 and ceiling <= 0) or not isinstance(principal, Principal):
            return True
        subject = (f"peer:{principal.peer.pk}" if principal.peer is not None
                   else f"credential:{principal.credential_id}")
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        # Both counters count every request, so a refused one still spends the Account's.
        within = limit <= 0 or _counter.hit(f"{principal.account_id}:{subject}",
                                            window) <= limit
        within_account = ceiling <= 0 or _counter.hit(f"{principal.account_id}:account",
                                                      window) <= ceiling
        if within and within_account:
            return True
        self.retry_after = max(1, int((window + 1) * WINDOW_SECONDS - now))
        return False

    def wait(self) -> float | None:
        return float(self.retry_after)
