"""Who a generation-model call is billed to, and the hook that meters it.

The ground only knows *who* (a :class:`Meter`) and offers the hook; the layers that own
the ledger and the metrics (knowledge.usage, memhouse.usage) register the recorder at
start-up (memhouse.apps), so memhouse.core.llm meters every call without importing upward.

The Account (and, for API requests, the credential) a call is billed to is found in
this order: an explicit :func:`metering` block (deduction, Celery tasks that take an
``account_id``), the principal of the API request being served, the Account bound to
the current transaction.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from memhouse.core.principal import Principal

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Meter:
    """Who a model call is billed to."""

    account_id: uuid.UUID
    credential_id: uuid.UUID | None = None
    peer_key: str = ""


_meter: ContextVar[Meter | None] = ContextVar("memhouse_meter", default=None)
_request_principal: ContextVar[Principal | None] = ContextVar("memhouse_request_principal",
                                                              default=None)


def _meter_of(principal: Principal) -> Meter:
    return Meter(principal.account_id, principal.credential_id,
                 principal.peer.key if principal.peer else "")


@contextmanager
def metering(account_id: uuid.UUID | str, *, credential_id: uuid.UUID | None = None,
             peer_key: str = "", prefer_request: bool = False) -> Iterator[Meter]:
    """Bill the model calls made inside this block to `account_id` (workers, commands).

    With ``prefer_request``, an API request's own principal in the same Account keeps
    the billing (so its credential is recorded too)."""
    meter = Meter(uuid.UUID(str(account_id)), credential_id, peer_key)
    principal = _request_principal.get()
    if prefer_request and principal is not None and principal.account_id == meter.account_id:
        meter = _meter_of(principal)
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


@contextmanager
def request_scope() -> Iterator[None]:
    """One HTTP request: the principal bound by the throttle lives exactly this long."""
    token = _request_principal.set(None)
    try:
        yield
    finally:
        _request_principal.reset(token)


def bind_request_principal(principal: Principal) -> None:
    """The API request being served bills its model calls to this principal (until its
    :func:`request_scope` ends)."""
    _request_principal.set(principal)


def current_meter() -> Meter | None:
    meter = _meter.get()
    if meter is not None:
        return meter
    principal = _request_principal.get()
    if principal is not None:
        return _meter_of(principal)
    from django.db import connection

    if connection.in_atomic_block:
        from memhouse.core.tenancy import current_account_id

        account_id = current_account_id()
        if account_id is not None:
            return Meter(account_id)
    return None


ModelCallRecorder = Callable[..., None]
_recorder: ModelCallRecorder | None = None


def register_model_call_recorder(recorder: ModelCallRecorder) -> None:
    """Set the one function that meters model calls (memhouse.apps registers it)."""
    global _recorder
    _recorder = recorder


def record_model_call(*, purpose: str, outcome: str, attempts: int = 1,
                      prompt_tokens: int = 0, completion_tokens: int = 0,
                      tokens_reported: bool = False, seconds: float = 0.0) -> None:
    """Meter one generation-model call through the registered recorder. Without one
    (Django not set up) the call is logged, never silently dropped."""
    if _recorder is None:
        log.warning("model call not metered: no recorder registered", extra={
            "purpose": purpose, "outcome": outcome})
        return
    _recorder(purpose=purpose, outcome=outcome, attempts=attempts,
              prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
              tokens_reported=tokens_reported, seconds=seconds)
