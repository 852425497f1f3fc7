"""Ingest writes: messages and documents. Each call is one transaction; pipeline work is
enqueued only after it commits, so a worker never sees a half-written batch."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from knowledge import audit
from knowledge.models import Document, DocumentChunk, DocumentVersion, Message, Peer, Scope, Session
from memhouse.core.errors import ApplicationError
from memhouse.core.principal import Actor, Principal


@dataclass(frozen=True)
class IncomingMessage:
    text: str
    occurred_at: datetime
    client_message_id: str | None = None
    peer_key: str | None = None
    metadata: dict[str, Any] | None = None
    # False when the client sent no occurred_at (it defaulted to the time of the request):
    # a resend of that message is then recognised by its id, text and peer alone.
    occurred_at_given: bool = True


# The intake tasks live a floor up (governance.tasks); governance.apps registers them here
# so that storing an observation never imports governance.
_INTAKE_TASKS: dict[str, Any] = {}


def register_intake_tasks(*, messages: Any, document_version: Any) -> None:
    _INTAKE_TASKS.update(messages=messages, document_version=document_version)


def intake_task(kind: str) -> Any:
    try:
        return _INTAKE_TASKS[kind]
    except KeyError:  # a configuration error, not bad input
        raise RuntimeError("no intake task registered (is 'governance' installed?)") from None


def _enqueue_on_commit(task: Any, *args: Any) -> None:
    # robust: a broker outage must not fail a request whose data is already committed;
    # the sweeper re-enqueues work whose dispatch was lost.
    transaction.on_commit(lambda: task.delay(*args), robust=True)


def resolve_scope(*, principal: Principal, path: str) -> Scope:
    """The existing scope at `path` that the credential may write to."""
    from knowledge.services import normalise_scope_path

    path = normalise_scope_path(path)
    scope = Scope.objects.filter(account_id=principal.account_id, path=path).first()
    if scope is None or not principal.may_access_scope(path):
        # Unauthorised and missing scopes get the same answer.
        raise ApplicationError("unknown_scope", f"no scope {path!r}; create it first",
                               status_code=400)
    return scope


def _speaker(principal: Principal, peer_key: str | None, peers: dict[str, Peer]) -> Peer:
    """Who a message is from: the credential's own peer, or a peer it may relay for
    (knowledge.selectors.peer_acted_for: humans speak only as themselves)."""
    from knowledge.selectors import peer_acted_for

    if peer_key is None:
        if principal.peer is None:
            raise ApplicationError("peer_required",
                                   "a peerless credential must name each message's peer_key")
        return principal.peer
    if peer_key not in peers:
        peers[peer_key] = peer_acted_for(principal=principal, peer_key=peer_key)
    elif not principal.may_act_for(peer_key):
        peer_acted_for(principal=principal, peer_key=peer_key)  # raises act_for_denied
    return peers[peer_key]


@transaction.atomic
def messages_ingest(*, principal: Principal, scope_path: str, messages: list[IncomingMessage],
                    session_id: str | None = None) -> list[dict[str, Any]]:
    """Store a batch of observations, idempotent by client message id.

    The whole batch is checked before anything is written: an unknown peer, a reused
    client id with different content or an oversize text refuses the batch.
    """
    if not messages:
        raise ApplicationError("empty_batch", "send at least one message")
    if len(messages) > settings.MEMHOUSE_MAX_BATCH:
        raise ApplicationError("batch_too_large",
                               f"at most {settings.MEMHOUSE_MAX_BATCH} messages per request",
                               status_code=413)
    scope = resolve_scope(principal=principal, path=scope_path)
    keys = {m.peer_key for m in messages if m.peer_key is not None}
    peers = {p.key: p for p in Peer.objects.filter(account_id=principal.account_id, key__in=keys)}
    session = None
    if session_id:
        # Sessions are bound to their scope: the same id under another scope is another
        # conversation, never a way into that scope's session.
        session, _ = Session.objects.get_or_create(
            account_id=principal.account_id, scope=scope, external_id=session_id,
            defaults={"started_at": min(m.occurred_at for m in messages)})
    client_ids = [m.client_message_id for m in messages if m.client_message_id]
    if len(client_ids) != len(set(client_ids)):
        raise ApplicationError("duplicate_client_id", "a client message id repeats in the batch")
    existing = {m.client_message_id: m for m in Message.objects.filter(
        account_id=principal.account_id, scope=scope, client_message_id__in=client_ids)}
    # Check every message, then insert the new ones in one statement.
    results: list[dict[str, Any] | None] = []
    fresh: list[tuple[int, Message]] = []
    for index, incoming in enumerate(messages):
        speaker = _speaker(principal, incoming.peer_key, peers)
        text = incoming.text.strip()
        if not text:
            raise ApplicationError("empty_text", f"message {index} has no text")
        if len(text) > settings.MEMHOUSE_MAX_MESSAGE_CHARS:
            raise ApplicationError(
                "message_too_long",
                f"message {index} exceeds {settings.MEMHOUSE_MAX_MESSAGE_CHARS} characters",
                status_code=413)
        prior = existing.get(incoming.client_message_id) if incoming.client_message_id else None
        if prior is not None:
            same = (prior.text == text and prior.peer_id == speaker.id
                    and (prior.occurred_at == incoming.occurred_at
                         or not incoming.occurred_at_given))
            if not same:
                raise ApplicationError(
                    "client_id_conflict",
                    f"client message id {incoming.client_message_id!r} was already used "
                    "for a different message", status_code=409)
            results.append({"id": str(prior.id), "client_message_id": prior.client_message_id,
                            "status": "duplicate"})
            continue
        results.append(None)
        fresh.append((index, Message(
            account_id=principal.account_id, peer=speaker, scope=scope, session=session,
            client_message_id=incoming.client_message_id, text=text,
            occurred_at=incoming.occurred_at, metadata=incoming.metadata or {})))
    new_ids: list[str] = []
    if fresh:
        # A concurrent twin may win an insert (ON CONFLICT DO NOTHING): whatever did not
        # land is compared with the twin that did.
        Message.objects.bulk_create([msg for _, msg in fresh], ignore_conflicts=True)
        landed = set(Message.objects.filter(pk__in=[msg.pk for _, msg in fresh])
                     .values_list("pk", flat=True))
        lost = [msg.client_message_id for _, msg in fresh if msg.pk not in landed]
        twins = {m.client_message_id: m for m in Message.objects.filter(
            account_id=principal.account_id, scope=scope, client_message_id__in=lost)} \
            if lost else {}
        for index, msg in fresh:
            if msg.pk in landed:
                new_ids.append(str(msg.pk))
                results[index] = {"id": str(msg.pk), "client_message_id": msg.client_message_id,
                                  "status": "created"}
                continue
            twin = twins.get(msg.client_message_id)
            if twin is None:
                raise IntegrityError(f"message {index} was not stored")
            if twin.text != msg.text or twin.peer_id != msg.peer_id:
                raise ApplicationError(
                    "client_id_conflict",
                    f"client message id {msg.client_message_id!r} was already used "
                    "for a different message", status_code=409)
            results[index] = {"id": str(twin.id), "client_message_id": twin.client_message_id,
                              "status": "duplicate"}
    if new_ids:
        audit.append(account_id=principal.account_id, event_type="messages.ingested",
                     actor=_actor(principal), target_type="scope", target_id=str(scope.id),
                     payload={"count": len(new_ids)})
        _enqueue_on_commit(intake_task("messages"), str(principal.account_id), new_ids)
    return [r for r in results if r is not None]


def _actor(principal: Principal) -> str:
    return Actor.of_principal(principal).label


# --- Documents -------------------------------------------------------------------------

def chunk_text(text: str, *, max_chars: int = 1200) -> list[tuple[int, int]]:
    """Paragraph-sized (start, end) spans; long paragraphs split at sentence ends."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for para in text.split("\n\n"):
        start = text.find(para, pos)
        end = start + len(para)
        pos = end
        if not para.strip():
            continue
        while end - start > max_chars:
            cut = text.rfind(". ", start, start + max_chars)
            cut = cut + 1 if cut > start else start + max_chars
            spans.append((start, cut))
            start = cut
            while start < end and text[start].isspace():
                start += 1
        if end > start:
            spans.append((start, end))
    return spans


def _write_chunks(version: DocumentVersion) -> None:
    DocumentChunk.objects.filter(version=version).delete()
    DocumentChunk.objects.bulk_create([
        DocumentChunk(account_id=version.account_id, version=version, ordinal=i,
                      text=version.text[s:e], start=s, end=e)
        for i, (s, e) in enumerate(chunk_text(version.text))
    ])


def _decode(content: bytes, media_type: str) -> str:
    if not media_type.startswith("text/") and media_type not in {"application/json",
                                                                 "application/markdown"}:
        raise ApplicationError("unsupported_media_type",
                               f"cannot extract text from {media_type!r}", status_code=415)
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApplicationError("invalid_encoding", "document text must be UTF-8") from exc
    if "\x00" in text:  # PostgreSQL text cannot hold it; refused, never stripped
        raise ApplicationError("invalid_encoding", "document text must not contain NUL bytes")
    return text


def _add_version(document: Document, content: bytes, media_type: str) -> DocumentVersion:
    text = _decode(content, media_type)
    if not text.strip():
        raise ApplicationError("empty_document", "the document has no text")
    if len(content) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        raise ApplicationError("document_too_large", "the document is too large",
                               status_code=413)
    last = document.versions.order_by("-number").first()
    digest = hashlib.sha256(content).hexdigest()
    if last is not None and last.sha256 == digest:
        return last  # same bytes again: idempotent
    version = DocumentVersion.objects.create(
        account_id=document.account_id, document=document,
        number=(last.number + 1) if last else 1, media_type=media_type, blob=content,
        sha256=digest, text=text)
    _write_chunks(version)
    _enqueue_on_commit(intake_task("document_version"), str(document.account_id),
                       str(version.id))
    return version


@transaction.atomic
def document_create(*, principal: Principal, scope_path: str, title: str, content: bytes,
                    media_type: str = "text/plain", external_id: str | None = None
                    ) -> DocumentVersion:
    scope = resolve_scope(principal=principal, path=scope_path)
    if external_id and Document.objects.filter(account_id=principal.account_id, scope=scope,
                                               external_id=external_id,
                                               deleted_at__isnull=True).exists():
        raise ApplicationError("document_exists",
                               f"a document with external id {external_id!r} exists; "
                               "add a version instead", status_code=409)
    document = Document.objects.create(account_id=principal.account_id, scope=scope,
                                       peer=principal.peer, title=title, external_id=external_id)
    version = _add_version(document, content, media_type)
    audit.append(account_id=principal.account_id, event_type="document.created",
                 actor=_actor(principal), target_type="document", target_id=str(document.id),
                 payload={"version": version.number, "sha256": version.sha256})
    return version


def document_for_write(*, principal: Principal, document_id: uuid.UUID | str) -> Document:
    from memhouse.core.errors import NotFound

    try:
        document = Document.objects.select_related("scope").filter(
            account_id=principal.account_id, id=document_id, deleted_at__isnull=True).first()
    except Exception as exc:  # malformed uuid
        raise NotFound("document") from exc
    if document is None or not principal.may_access_scope(document.scope.path):
        raise NotFound("document")
    return document


def _require_document_writer(principal: Principal, document: Document) -> None:
    """Revising or deleting a document retracts what its subjects may have confirmed, so
    only its uploader (the credential's peer; for a peerless upload, a peerless key),
    curators and account administrators may do it."""
    uploader = principal.peer is not None and document.peer_id == principal.peer.id
    peerless = principal.peer is None and document.peer_id is None
    if not (uploader or peerless or principal.is_curator or principal.is_admin):
        raise ApplicationError("document_owner_only",
                               "only the uploader, a curator or an administrator may revise "
                               "or delete this document", status_code=403)


@transaction.atomic
def document_version_add(*, principal: Principal, document: Document, content: bytes,
                         media_type: str = "text/plain") -> DocumentVersion:
    _require_document_writer(principal, document)
    version = _add_version(document, content, media_type)
    audit.append(account_id=principal.account_id, event_type="document.version_added",
                 actor=_actor(principal), target_type="document", target_id=str(document.id),
                 payload={"version": version.number, "sha256": version.sha256})
    return version


@transaction.atomic
def document_delete(*, principal: Principal, document: Document) -> int:
    """Tombstone the document and its versions; retract knowledge left with no source."""
    _require_document_writer(principal, document)
    from knowledge.services import retract_unsupported

    now = timezone.now()
    Document.objects.filter(pk=document.pk).update(deleted_at=now)
    version_ids = list(DocumentVersion.objects.filter(document=document, tombstoned_at__isnull=True)
                       .values_list("id", flat=True))
    DocumentVersion.objects.filter(id__in=version_ids).update(tombstoned_at=now)
    audit.append(account_id=principal.account_id, event_type="document.deleted",
                 actor=_actor(principal), target_type="document", target_id=str(document.id),
                 payload={"versions": len(version_ids)})
    return retract_unsupported(account_id=principal.account_id, version_ids=version_ids,
                               reason="f4_source_tombstoned", actor="system:document-sync")
