"""Metering: the durable usage ledger and per-credential rate limits.

The ledger row is written in the request's transaction, so it records calls that
succeeded. Rate counters are deliberately *not* transactional: a refused or failing
request still counts, and concurrent requests never wait on a counter row. They live in
Redis (atomic INCR with a window expiry) and fall back to a per-process counter when
Redis does not answer (the single-process embedded default).

Generation-model calls are metered where they are made, in the one provider interface
(:mod:`memhouse.llm` calls :func:`record_model_call` for every call, whatever its
outcome). The Account (and, for API requests, the credential) a call is billed to is
found in this order: an explicit :func:`metering` block (deduction, Celery tasks that take
an ``account_id``), the principal of the API request being served, the Account bound to
the current transaction. A call with none of these is counted in
``memhouse_model_calls_unattributed_total`` and logged, never silently dropped.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from rest_framework.exceptions import Throttled
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


def _ledger_subject(principal: Principal) -> dict[str, Any]:
    """The ledger rows of this caller: its credential, or a signed-in human's peer."""
    if principal.credential_id is not None:
        return {"credential_id": principal.credential_id}
    return {"credential_id__isnull": True,
            "peer_key": principal.peer.key if principal.peer else ""}


def check_ingest_budget(principal: Principal, chars: int) -> None:
    """Refuse text the server should not spend CPU on: more than MEMHOUSE_MAX_REQUEST_CHARS
    in one request (413), or beyond MEMHOUSE_INGEST_CHARS_PER_WINDOW for this caller in
    the last MEMHOUSE_INGEST_WINDOW_SECONDS (429 with Retry-After). The window is read
    from the durable usage ledger (`ingest_chars` rows), so it holds across web processes
    and restarts without Redis; concurrent requests may overshoot it by one request."""
    from datetime import timedelta

    from django.db.models import Min, Sum
    from django.utils import timezone

    from knowledge.models import UsageEntry
    from memhouse.errors import ApplicationError

    per_request = int(settings.MEMHOUSE_MAX_REQUEST_CHARS)
    if chars > per_request:
        raise ApplicationError(
            "request_too_large", f"the messages of one request may hold at most "
            f"{per_request} characters of text in total; this one holds {chars}. "
            "Split the batch.", status_code=413)
    budget = int(settings.MEMHOUSE_INGEST_CHARS_PER_WINDOW)
    if budget <= 0:
        return
    window = int(settings.MEMHOUSE_INGEST_WINDOW_SECONDS)
    now = timezone.now()
    spent = UsageEntry.objects.filter(
        account_id=principal.account_id, kind=UsageEntry.Kind.INGEST_CHARS,
        created_at__gt=now - timedelta(seconds=window), **_ledger_subject(principal),
    ).aggregate(units=Sum("units"), first=Min("created_at"))
    used = int(spent["units"] or 0)
    if used + chars <= budget:
        return
    # The oldest counted request leaves the window first; retrying earlier cannot help.
    first = spent["first"] or now
    retry = max(1, int((first + timedelta(seconds=window) - now).total_seconds()) + 1)
    # DRF's Throttled: 429 `rate_limited` with Retry-After, like the request rate limit.
    raise Throttled(wait=retry, detail=(
        f"ingest text budget exhausted: {used} characters in the last {window} seconds "
        f"and {chars} more requested; the budget is {budget}."))


@dataclass(frozen=True)
class Meter:
    """Who a model call is billed to."""

    account_id: uuid.UUID
    credential_id: uuid.UUID | None = None
    peer_key: str = ""


_meter: ContextVar[Meter | None] = ContextVar("memhouse_meter", default=None)
_request_principal: ContextVar[Principal | None] = ContextVar("memhouse_request_principal",
                                                              default=None)


@contextmanager
def metering(account_id: uuid.UUID | str, *, credential_id: uuid.UUID | None = None,
             peer_key: str = "", prefer_request: bool = False) -> Iterator[Meter]:
    """Bill the model calls made inside this block to `account_id` (workers, commands).

    With ``prefer_request``, an API request's own principal in the same Account keeps
    the billing (so its credential is recorded too)."""
    meter = Meter(uuid.UUID(str(account_id)), credential_id, peer_key)
    principal = _request_principal.get()
    if prefer_request and principal is not None and principal.account_id == meter.account_id:
        meter = Meter(principal.account_id, principal.credential_id,
                      principal.peer.key if principal.peer else "")
    token = _meter.set(meter)
    try:
        yield meter
    finally:
        _meter.reset(token)


def enter_meter(account_id: uuid.UUID | str) -> Any:
    """Non-block form of :func:`metering` for signal pairs; returns the token to reset."""
    return _meter.set(Meter(uuid.UUID(str(account_id))))


def leave_meter(token: Any) -> None:
    _meter.reset(token)


class RequestScopeMiddleware:
    """Binds the request's principal (set by the throttle) for billing its model calls,
    for exactly the request's lifetime."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        with request_scope():
            return self.get_response(request)


@contextmanager
def request_scope() -> Iterator[None]:
    """One HTTP request: the principal bound by the throttle lives exactly this long."""
    token = _request_principal.set(None)
    try:
        yield
    finally:
        _request_principal.reset(token)


def current_meter() -> Meter | None:
    meter = _meter.get()
    if meter is not None:
        return meter
    principal = _request_principal.get()
    if principal is not None:
        return Meter(principal.account_id, principal.credential_id,
                     principal.peer.key if principal.peer else "")
    from django.db import connection

    if connection.in_atomic_block:
        from memhouse.tenancy import current_account_id

        account_id = current_account_id()
        if account_id is not None:
            return Meter(account_id)
    return None


def record_model_call(*, purpose: str, outcome: str, attempts: int = 1,
                      prompt_tokens: int = 0, completion_tokens: int = 0,
                      tokens_reported: bool = False, seconds: float = 0.0) -> None:
    """Meter one generation-model call: Prometheus always, the Account's ledger when the
    call can be attributed (``model_call`` = 1, ``model_tokens`` = tokens reported).
    Never raises: metering must not change the outcome of the call it meters."""
    from memhouse import observability as obs

    total = prompt_tokens + completion_tokens
    obs.MODEL_CALLS.labels(purpose, outcome).inc()
    obs.MODEL_CALL_SECONDS.labels(purpose).observe(seconds)
    if tokens_reported:
        obs.MODEL_TOKENS.labels(purpose, "prompt").inc(prompt_tokens)
        obs.MODEL_TOKENS.labels(purpose, "completion").inc(completion_tokens)
    try:
        meter = current_meter()
        written = meter is not None and _write_model_call(meter, total if tokens_reported
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


def _write_model_call(meter: Meter, tokens: int) -> bool:
    from django.db import connection, transaction

    from knowledge.models import UsageEntry
    from memhouse.tenancy import (
        ACCOUNT_SETTING,
        account_context,
        current_account_id,
        narrow_lookup,
    )

    def create() -> None:
        rows = [UsageEntry(account_id=meter.account_id, kind="model_call", units=1,
                           credential_id=meter.credential_id, peer_key=meter.peer_key)]
        if tokens > 0:
            rows.append(UsageEntry(account_id=meter.account_id, kind="model_tokens",
                                   units=tokens, credential_id=meter.credential_id,
                                   peer_key=meter.peer_key))
        UsageEntry.objects.bulk_create(rows)

    if not connection.in_atomic_block:
        with account_context(meter.account_id):
            create()
        return True
    current = current_account_id()
    if current == meter.account_id:
        with transaction.atomic():  # a savepoint: a failed write never breaks the caller's
            create()
        return True
    if current is None:  # bind for this write only, then leave the transaction unbound
        with transaction.atomic(), narrow_lookup(ACCOUNT_SETTING, str(meter.account_id)):
            create()
        return True
    return False  # the transaction belongs to another Account: never cross it


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
        if isinstance(principal, Principal):
            # Every API view runs this throttle after authentication: the request's model
            # calls are billed to this principal (reset by RequestScopeMiddleware at the end).
            _request_principal.set(principal)
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
