"""Dead-lettered messages: extraction raised, so the message is set aside.

The batch task (governance.tasks.process_messages) marks a failing message and goes on
with the rest; the sweeper skips marked messages, so one poison message can neither
block its batch nor be retried for ever. Administrators list them
(GET /api/v1/admin/dead-letters) and may retry one once the cause is fixed; /metrics
reports how many there are (memhouse_messages_dead_lettered).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from knowledge import audit
from knowledge.models import Message
from memhouse.core.errors import NotFound
from memhouse.core.tenancy import account_context

log = logging.getLogger(__name__)

ERROR_CHARS = 500


def describe(error: BaseException | str) -> str:
    """The exception's class and message, bounded; never a traceback (which could
    carry the message's text into an admin listing or a log)."""
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error
    return str(text)[:ERROR_CHARS]


def mark_extraction_failed(account_id: uuid.UUID | str, message_id: uuid.UUID | str,
                           error: BaseException | str) -> bool:
    """Record that extraction of one message failed, in a transaction of its own (the
    failed attempt's transaction is gone, and the rest of the batch must not depend on
    this write). Returns False when the message is gone or was extracted meanwhile."""
    why = describe(error)
    with account_context(account_id):
        updated = Message.objects.filter(pk=message_id, extracted_at__isnull=True).update(
            extraction_failed_at=timezone.now(), extraction_error=why,
            extraction_attempts=F("extraction_attempts") + 1)
    log.warning("message extraction failed; dead-lettered",
                extra={"account_id": str(account_id), "message_id": str(message_id),
                       "error_type": type(error).__name__ if isinstance(error, BaseException)
                       else "error"})
    return bool(updated)


def dead_letters(account_id: uuid.UUID | str) -> QuerySet[Message]:
    """Messages set aside in this Account (call inside its Account context)."""
    return Message.objects.filter(account_id=account_id, extraction_failed_at__isnull=False,
                                  extracted_at__isnull=True)


def retry(*, account_id: uuid.UUID | str, message_id: uuid.UUID | str, actor: str) -> Message:
    """Clear the mark and enqueue the message again (after commit). The attempt count
    stays, so a message that fails again shows how often it has."""
    from knowledge.ingest.services import intake_task

    msg = dead_letters(account_id).select_for_update().filter(pk=message_id).first()
    if msg is None:
        raise NotFound("dead-lettered message")
    msg.extraction_failed_at = None
    msg.save(update_fields=["extraction_failed_at"])
    audit.append(account_id=account_id, event_type="message.extraction_retried", actor=actor,
                 target_type="message", target_id=str(msg.pk),
                 payload={"attempts": msg.extraction_attempts})
    ids = [str(msg.pk)]
    task = intake_task("messages")
    transaction.on_commit(lambda: task.delay(str(account_id), ids), robust=True)
    return msg


def dead_letter_out(msg: Message) -> dict[str, Any]:
    """What an administrator sees: ids, times and the error, never the message text."""
    return {"id": str(msg.pk), "client_message_id": msg.client_message_id,
            "peer_key": msg.peer.key, "scope": msg.scope.path,
            "occurred_at": msg.occurred_at.isoformat(),
            "inserted_at": msg.inserted_at.isoformat(),
            "failed_at": msg.extraction_failed_at.isoformat()
            if msg.extraction_failed_at else None,
            "error": msg.extraction_error, "attempts": msg.extraction_attempts}
