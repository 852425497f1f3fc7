"""Dead letters: messages and document versions set aside instead of retried for ever.

A source is set aside when its processing raised (the batch task marks a failing message
and goes on with the rest; a version's task marks the version), when a version would
yield too many statements, or when its processing keeps being cut off: every task
counts its start here, durably and before the work (`start_messages`, `start_version`),
so a source a worker died on MEMHOUSE_MAX_INGEST_ATTEMPTS times is set aside
(`crashed_repeatedly`) by the sweeper, or by the next start, instead of being swept
again for ever. The sweeper skips set-aside sources, so one poison input can neither
block its batch nor stall the queue. Administrators list them
(GET /api/v1/admin/dead-letters) and may retry one once the cause is fixed; /metrics
reports how many there are (memhouse_messages_dead_lettered,
memhouse_document_versions_dead_lettered).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from knowledge import audit
from knowledge.models import DocumentVersion, Message
from knowledge.selectors import (
    CRASHED_REPEATEDLY,
    EXTRACTION_FAILED,
    PROCESSING_FAILED,
    failure_reason,
)
from memhouse.core.errors import ApplicationError, NotFound
from memhouse.core.principal import Principal
from memhouse.core.tenancy import account_context

log = logging.getLogger(__name__)

ERROR_CHARS = 500
MESSAGE, DOCUMENT_VERSION = "message", "document_version"


def describe(error: BaseException | str) -> str:
    """The exception's class and message, bounded; never a traceback (which could
    carry the message's text into an admin listing or a log)."""
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error
    return str(text)[:ERROR_CHARS]


def max_attempts() -> int:
    return int(settings.MEMHOUSE_MAX_INGEST_ATTEMPTS)


def crashed_reason(attempts: int) -> str:
    return (f"{CRASHED_REPEATEDLY}: its processing started {attempts} times and never "
            "finished (a worker killed or restarted mid-task), the most "
            "MEMHOUSE_MAX_INGEST_ATTEMPTS allows; find the cause (often memory or time "
            "on this input), then retry it")[:ERROR_CHARS]


def mark_extraction_failed(account_id: uuid.UUID | str, message_id: uuid.UUID | str,
                           error: BaseException | str) -> bool:
    """Record that extraction of one message failed, in a transaction of its own (the
    failed attempt's transaction is gone, and the rest of the batch must not depend on
    this write). The attempt was counted when the task started. Returns False when the
    message is gone or was extracted meanwhile."""
    why = describe(error)
    with account_context(account_id):
        updated = Message.objects.filter(pk=message_id, extracted_at__isnull=True).update(
            extraction_failed_at=timezone.now(), extraction_error=why)
    log.warning("message extraction failed; dead-lettered",
                extra={"account_id": str(account_id), "message_id": str(message_id),
                       "error_type": type(error).__name__ if isinstance(error, BaseException)
                       else "error"})
    return bool(updated)


# --- the crash counter ---------------------------------------------------------------

def _count_starts(model: type[Message] | type[DocumentVersion], ids: list[str],
                  live: str) -> list[tuple[uuid.UUID, int]]:
    """One UPDATE ... RETURNING: +1 attempt and the start time on each row still to
    process (`live`: the SQL condition). Row locks make concurrent starts of the same
    row count one after the other; a row a running task is writing waits for it and is
    then not counted (it is done)."""
    attempts, started = (("extraction_attempts", "extraction_started_at") if model is Message
                         else ("processing_attempts", "processing_started_at"))
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE {model._meta.db_table} SET {attempts} = {attempts} + 1, "
            f"{started} = now() WHERE id = ANY(%s::uuid[]) AND {live} "
            f"RETURNING id, {attempts}", [ids])
        return [(row[0], row[1]) for row in cur.fetchall()]


_MESSAGE_LIVE = "extracted_at IS NULL AND extraction_failed_at IS NULL"
_VERSION_LIVE = ("processed_at IS NULL AND processing_failed_at IS NULL "
                 "AND tombstoned_at IS NULL")


def start_messages(account_id: uuid.UUID | str, message_ids: Iterable[Any]) -> list[str]:
    """Count this start for each message still to extract, in a transaction of its own
    that commits before the work (so a worker killed mid-task leaves the count behind),
    and return the ids the work may go on with: one started more than
    MEMHOUSE_MAX_INGEST_ATTEMPTS times is set aside (`crashed_repeatedly`) instead."""
    ids = [str(i) for i in message_ids]
    if not ids:
        return []
    cap = max_attempts()
    with account_context(account_id):
        counted = _count_starts(Message, ids, _MESSAGE_LIVE)
        over = {pk: n - 1 for pk, n in counted if n > cap}  # this start does not run
        for pk, n in over.items():
            Message.objects.filter(pk=pk).update(
                extraction_failed_at=timezone.now(), extraction_error=crashed_reason(n),
                extraction_attempts=n)
    for pk in over:
        log.warning("message processing cut off too often; dead-lettered",
                    extra={"account_id": str(account_id), "message_id": str(pk)})
    go = {str(pk) for pk, _ in counted if pk not in over}
    return [i for i in ids if i in go]


def start_version(account_id: uuid.UUID | str, version_id: uuid.UUID | str) -> bool:
    """start_messages for one document version: True when its processing may go on."""
    cap = max_attempts()
    with account_context(account_id):
        counted = _count_starts(DocumentVersion, [str(version_id)], _VERSION_LIVE)
        if not counted:
            return False  # processed, set aside or tombstoned meanwhile
        attempts = counted[0][1]
        if attempts <= cap:
            return True
        DocumentVersion.objects.filter(pk=version_id).update(  # this start does not run
            processing_failed_at=timezone.now(), processing_error=crashed_reason(attempts - 1),
            processing_attempts=attempts - 1)
    log.warning("document version processing cut off too often; set aside",
                extra={"account_id": str(account_id), "version_id": str(version_id)})
    return False


@dataclass
class Sweep:
    """What one Account's sweep found: messages never started (re-enqueued in batches),
    messages started before and cut off (each re-enqueued alone, so a poison one is
    counted alone and the rest of its batch is not), versions to re-enqueue, and how
    many sources reached the cap and were set aside instead."""

    messages: list[str] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)
    versions: list[str] = field(default_factory=list)
    set_aside: int = 0


def sweep_account(account_id: uuid.UUID | str, *, cutoff: datetime, limit: int) -> Sweep:
    """The sources of one Account whose work was lost: neither processed nor set aside,
    last started (or, never started, stored) before `cutoff`. Those already started
    MEMHOUSE_MAX_INGEST_ATTEMPTS times are set aside as `crashed_repeatedly` here, in
    the same transaction, instead of being returned for re-enqueueing."""
    cap, out = max_attempts(), Sweep()
    with account_context(account_id):
        messages = list(Message.objects.filter(
            extracted_at__isnull=True, extraction_failed_at__isnull=True)
            .alias(since=Coalesce("extraction_started_at", "inserted_at"))
            .filter(since__lte=cutoff).order_by("inserted_at")
            .values_list("id", "extraction_attempts")[:limit])
        versions = list(DocumentVersion.objects.filter(
            processed_at__isnull=True, processing_failed_at__isnull=True,
            tombstoned_at__isnull=True)
            .alias(since=Coalesce("processing_started_at", "created_at"))
            .filter(since__lte=cutoff).order_by("created_at")
            .values_list("id", "processing_attempts")[:limit])
        now = timezone.now()
        for pk, attempts in messages:
            if attempts >= cap:
                out.set_aside += Message.objects.filter(
                    pk=pk, extracted_at__isnull=True, extraction_failed_at__isnull=True
                ).update(extraction_failed_at=now, extraction_error=crashed_reason(attempts))
            else:
                (out.suspects if attempts else out.messages).append(str(pk))
        for pk, attempts in versions:
            if attempts >= cap:
                out.set_aside += DocumentVersion.objects.filter(
                    pk=pk, processed_at__isnull=True, processing_failed_at__isnull=True
                ).update(processing_failed_at=now, processing_error=crashed_reason(attempts))
            else:
                out.versions.append(str(pk))
    if out.set_aside:
        log.warning("sweeper set aside sources whose processing was cut off too often",
                    extra={"account_id": str(account_id), "count": out.set_aside})
    return out


# --- administrators: list and retry ----------------------------------------------------

def _within(principal: Principal, scope_field: str) -> Q:
    """Rows in scopes the administrator's credential may access (a scope-limited
    administrator sees and retries only theirs)."""
    if any(root == "/" for root in principal.scope_paths):
        return Q()
    q = Q(pk__in=[])
    for root in principal.scope_paths:
        q |= Q(**{scope_field: root}) | Q(**{f"{scope_field}__startswith":
                                             root.rstrip("/") + "/"})
    return q


def dead_letters(account_id: uuid.UUID | str) -> QuerySet[Message]:
    """Messages set aside in this Account (call inside its Account context)."""
    return Message.objects.filter(account_id=account_id, extraction_failed_at__isnull=False,
                                  extracted_at__isnull=True)


def dead_versions(account_id: uuid.UUID | str) -> QuerySet[DocumentVersion]:
    """Live document versions set aside in this Account (a deleted document's versions
    wait for nobody)."""
    return DocumentVersion.objects.filter(account_id=account_id,
                                          processing_failed_at__isnull=False,
                                          processed_at__isnull=True,
                                          tombstoned_at__isnull=True)


def dead_letters_for(principal: Principal) -> QuerySet[Message]:
    return dead_letters(principal.account_id).filter(_within(principal, "scope__path"))


def dead_versions_for(principal: Principal) -> QuerySet[DocumentVersion]:
    return dead_versions(principal.account_id).filter(
        _within(principal, "document__scope__path"))


def _audit_actor(principal: Principal) -> str:
    return f"peer:{principal.peer.key}" if principal.peer else "api"


def _not_set_aside(what: str) -> ApplicationError:
    return ApplicationError(
        "not_dead_lettered", f"this {what} is not set aside: it is queued, being "
        "processed or processed already, so there is nothing to retry", status_code=409)


def retry(*, principal: Principal, message_id: uuid.UUID | str) -> Message:
    """Clear the mark, start the attempt count again and enqueue the message (after
    commit); the audit entry, in the acting administrator's name, keeps the count it
    had. Unknown, other Accounts' and out-of-scope messages are 404; one that is not
    set aside is 409 `not_dead_lettered`."""
    from knowledge.ingest.services import intake_task

    account_id = principal.account_id
    msg = (Message.objects.select_for_update(no_key=True)
           .filter(_within(principal, "scope__path"), account_id=account_id, pk=message_id)
           .first())
    if msg is None:
        raise NotFound("message")
    if msg.extraction_failed_at is None or msg.extracted_at is not None:
        raise _not_set_aside("message")
    attempts = msg.extraction_attempts
    code, _ = failure_reason(msg.extraction_error, default=EXTRACTION_FAILED)
    Message.objects.filter(pk=msg.pk).update(extraction_failed_at=None, extraction_attempts=0,
                                             extraction_started_at=None)
    audit.append(account_id=account_id, event_type="message.extraction_retried",
                 actor=_audit_actor(principal), target_type="message", target_id=str(msg.pk),
                 payload={"attempts": attempts, "error": code})
    ids = [str(msg.pk)]
    task = intake_task("messages")
    transaction.on_commit(lambda: task.delay(str(account_id), ids), robust=True)
    return msg


def retry_version(*, principal: Principal, version_id: uuid.UUID | str) -> DocumentVersion:
    """retry for a document version. A version a newer processed version has replaced
    meanwhile is then marked processed without writing anything (the pipeline never lets
    an older version undo a newer one)."""
    from knowledge.ingest.services import intake_task

    account_id = principal.account_id
    version = (DocumentVersion.objects.select_for_update(no_key=True, of=("self",))
               .select_related("document")
               .filter(_within(principal, "document__scope__path"), account_id=account_id,
                       pk=version_id, tombstoned_at__isnull=True).first())
    if version is None:
        raise NotFound("document version")
    if version.processing_failed_at is None or version.processed_at is not None:
        raise _not_set_aside("document version")
    attempts = version.processing_attempts
    code, _ = failure_reason(version.processing_error, default=PROCESSING_FAILED)
    DocumentVersion.objects.filter(pk=version.pk).update(
        processing_failed_at=None, processing_attempts=0, processing_started_at=None)
    audit.append(account_id=account_id, event_type="document_version.processing_retried",
                 actor=_audit_actor(principal), target_type="document_version",
                 target_id=str(version.pk),
                 payload={"document_id": str(version.document_id), "version": version.number,
                          "attempts": attempts, "error": code})
    args = (str(account_id), str(version.pk))
    task = intake_task("document_version")
    transaction.on_commit(lambda: task.delay(*args), robust=True)
    return version


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def dead_letter_out(msg: Message) -> dict[str, Any]:
    """What an administrator sees of a message: ids, times, the error's code and
    message, never the text. Both kinds have the same keys (null where one does not
    apply), so a client reads them alike."""
    code, human = failure_reason(msg.extraction_error, default=EXTRACTION_FAILED)
    return {"kind": MESSAGE, "id": str(msg.pk), "scope": msg.scope.path,
            "peer_key": msg.peer.key, "client_message_id": msg.client_message_id,
            "document_id": None, "version": None,
            "occurred_at": _iso(msg.occurred_at), "inserted_at": _iso(msg.inserted_at),
            "failed_at": _iso(msg.extraction_failed_at),
            "error": code, "error_message": human, "attempts": msg.extraction_attempts}


def dead_version_out(version: DocumentVersion) -> dict[str, Any]:
    """What an administrator sees of a document version: its document's id, its
    number, the uploader, times and the error; never the title or the text."""
    code, human = failure_reason(version.processing_error, default=PROCESSING_FAILED)
    document = version.document
    return {"kind": DOCUMENT_VERSION, "id": str(version.pk), "scope": document.scope.path,
            "peer_key": document.peer.key if document.peer else None,
            "client_message_id": None, "document_id": str(document.pk),
            "version": version.number, "occurred_at": None,
            "inserted_at": _iso(version.created_at),
            "failed_at": _iso(version.processing_failed_at),
            "error": code, "error_message": human, "attempts": version.processing_attempts}
