"""The usage ledger (UsageEntry): the one writer of its rows, and the ingest text budget
read from it.

A request's row is written in the request's transaction, so the ledger records calls
that succeeded. A model call's rows are written wherever the call ran (memhouse.usage
registers :func:`write_model_call` behind the ground's metering hook) and never cross
into another Account's transaction.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Min, Sum
from django.utils import timezone
from rest_framework.exceptions import Throttled

from knowledge.models import UsageEntry
from memhouse.core.errors import ApplicationError
from memhouse.core.metering import Meter
from memhouse.core.principal import Principal
from memhouse.core.tenancy import (
    ACCOUNT_SETTING,
    account_context,
    current_account_id,
    narrow_lookup,
)


def record(principal: Principal, kind: str, units: int = 1) -> None:
    """Append one ledger row for a successful call (inside the request transaction)."""
    if units <= 0:
        return
    UsageEntry.objects.create(account_id=principal.account_id, kind=kind, units=units,
                              credential_id=principal.credential_id,
                              peer_key=principal.peer.key if principal.peer else "")


def _ledger_subject(principal: Principal) -> dict[str, Any]:
    """The ledger rows a caller's budget counts: its acting peer's, whichever credential
    wrote them (a fresh sign-in token or a second key shares the peer's budget); a
    peerless key's own rows."""
    if principal.peer is not None:
        return {"peer_key": principal.peer.key}
    return {"credential_id": principal.credential_id, "peer_key": ""}


def _spent(principal: Principal, since: Any, subject: dict[str, Any]) -> tuple[int, Any]:
    spent = UsageEntry.objects.filter(
        account_id=principal.account_id, kind=UsageEntry.Kind.INGEST_CHARS,
        created_at__gt=since, **subject,
    ).aggregate(units=Sum("units"), first=Min("created_at"))
    return int(spent["units"] or 0), spent["first"]


def check_ingest_budget(principal: Principal, chars: int, *,
                        what: str = "the messages of one request") -> None:
    """Refuse text the server should not spend CPU on: more than MEMHOUSE_MAX_REQUEST_CHARS
    in one request (413), or beyond MEMHOUSE_INGEST_CHARS_PER_WINDOW for the acting peer
    (a peerless key: the credential) or MEMHOUSE_INGEST_CHARS_PER_ACCOUNT_WINDOW for the
    whole Account in the last MEMHOUSE_INGEST_WINDOW_SECONDS (429 with Retry-After).
    Messages and document versions spend the same budget. The window is read from the
    durable usage ledger (`ingest_chars` rows), so it holds across web processes and
    restarts without Redis; concurrent requests may overshoot it by one request."""
    per_request = int(settings.MEMHOUSE_MAX_REQUEST_CHARS)
    if chars > per_request:
        raise ApplicationError(
            "request_too_large", f"{what} may hold at most {per_request} characters of "
            f"text in total; this one holds {chars}. Split it.", status_code=413)
    window = int(settings.MEMHOUSE_INGEST_WINDOW_SECONDS)
    now = timezone.now()
    since = now - timedelta(seconds=window)
    for budget, subject, whose in (
            (int(settings.MEMHOUSE_INGEST_CHARS_PER_WINDOW), _ledger_subject(principal),
             "this sender's"),
            (int(settings.MEMHOUSE_INGEST_CHARS_PER_ACCOUNT_WINDOW), {}, "the Account's")):
        if budget <= 0:
            continue
        used, first = _spent(principal, since, subject)
        if used + chars <= budget:
            continue
        # The oldest counted request leaves the window first; retrying earlier cannot help.
        first = first or now
        retry = max(1, int((first + timedelta(seconds=window) - now).total_seconds()) + 1)
        # DRF's Throttled: 429 `rate_limited` with Retry-After, like the request rate limit.
        raise Throttled(wait=retry, detail=(
            f"{whose} ingest text budget is exhausted: {used} characters in the last "
            f"{window} seconds and {chars} more requested; the budget is {budget}."))


def write_model_call(meter: Meter, tokens: int) -> bool:
    """Append a model call's rows (``model_call`` = 1, ``model_tokens`` = tokens reported)
    for `meter`'s Account; False when the current transaction belongs to another one."""
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
