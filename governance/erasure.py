"""Erasure: hard-delete a message, a document (every version and blob) or a peer.

Each erasure is one transaction:

1. lock the target and note which statements lose provenance;
2. delete the content (a peer also loses their messages, credentials, sign-in user and
   every statement whose subject they are);
3. retract each touched statement left with no live source (f4_source_erased); a row
   that is already retracted takes the retracted self-edge, recording that retained
   provenance was removed; drop the vectors of every retracted statement;
4. append an ErasureRecord to the durable ledger (SHA-256 of the erased content, never
   the content) and an audit entry.

The ledger outlives the Account row, so an archive import skips erased content.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q

from governance.models import ErasureRecord, Validation
from governance.services import close_open_work
from knowledge import audit, lifecycle
from knowledge.lifecycle import ActorLike, as_actor, drop_derived_rows, transition
from knowledge.models import (
    Document,
    DocumentVersion,
    Knowledge,
    KnowledgeSource,
    LifecycleEvent,
    Message,
    Peer,
)
from memhouse.core.errors import ApplicationError, NotFound

REASON = "f4_source_erased"


@dataclass(frozen=True)
class ErasureOutcome:
    record: ErasureRecord
    retracted: int
    deleted_knowledge: int
    deleted_messages: int
    deleted_versions: int


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _require_admin(actor: ActorLike) -> Peer:
    if not (isinstance(actor, Peer) and actor.kind == Peer.Kind.HUMAN and actor.is_admin):
        raise ApplicationError("permission_denied", "only account administrators may erase",
                               status_code=403)
    return actor


def _live_source() -> Q:
    # The same notion of a live source as document sync: a message, or a version that has
    # not been tombstoned.
    return Q(message__isnull=False) | Q(document_version__isnull=False,
                                        document_version__tombstoned_at__isnull=True)


def retract_orphaned(*, knowledge_ids: Iterable[Any], actor: ActorLike,
                     evidence: dict[str, Any]) -> int:
    """Retract statements that just lost provenance and have no live source left.

    Call after their source rows are gone, inside the erasing transaction. Only
    statements that actually lost provenance may be passed: a retracted one among them
    takes the self-edge (repeated erasure removed retained provenance)."""
    from knowledge.services import independent_source_count

    retracted = 0
    for item in (Knowledge.objects.select_for_update().filter(pk__in=list(knowledge_ids))
                 .order_by("pk")):
        count = independent_source_count(item)
        if count != item.source_count:
            Knowledge.objects.filter(pk=item.pk).update(source_count=count)
        already = item.state == lifecycle.RETRACTED
        if not already and KnowledgeSource.objects.filter(knowledge=item).filter(
                _live_source()).exists():
            continue
        transition(item, lifecycle.RETRACTED, actor=actor, reason=REASON,
                   verification=Knowledge.Verification.SOURCE_REMOVED,
                   evidence={**evidence, "repeated": already})
        close_open_work(item, status=Validation.Status.EXPIRED, resolution="source_erased")
        drop_derived_rows([item.pk])
        retracted += 1
    return retracted


def _record(*, record_id: uuid.UUID, account_id: uuid.UUID, kind: str, target_id: uuid.UUID,
            digest: str, actor: Peer, details: dict[str, Any],
            content_hashes: list[str] | None = None) -> ErasureRecord:
    record = ErasureRecord.objects.create(
        id=record_id, account_id=account_id, kind=kind, target_id=target_id, sha256=digest,
        content_hashes=content_hashes or [], actor=as_actor(actor).label, details=details)
    audit.append(account_id=account_id, event_type=f"erasure.{kind}", actor=as_actor(actor).label,
                 target_type=kind, target_id=str(target_id),
                 payload={"erasure": str(record.id), **details})
    return record


def _touched(source_filter: Q, *, exclude: Iterable[Any] = ()) -> list[uuid.UUID]:
    return list(KnowledgeSource.objects.filter(source_filter).exclude(
        knowledge_id__in=list(exclude)).values_list("knowledge_id", flat=True).distinct())


@transaction.atomic
def message_erase(*, actor: Peer, message_id: uuid.UUID | str) -> ErasureOutcome:
    _require_admin(actor)
    msg = Message.objects.select_for_update().filter(pk=message_id).first()
    if msg is None:
        raise NotFound("message")
    record_id, msg_id = uuid.uuid4(), msg.pk
    touched = _touched(Q(message_id=msg_id))
    digest = sha256_text(msg.text)
    KnowledgeSource.objects.filter(message_id=msg_id).delete()
    msg.delete()  # clears msg.pk
    retracted = retract_orphaned(knowledge_ids=touched, actor=actor,
                                 evidence={"erasure": str(record_id), "kind": "message"})
    details = {"messages": 1, "knowledge_retracted": retracted}
    record = _record(record_id=record_id, account_id=actor.account_id,
                     kind=ErasureRecord.Kind.MESSAGE, target_id=msg_id, digest=digest,
                     actor=actor, details=details)
    return ErasureOutcome(record, retracted, 0, 1, 0)


@transaction.atomic
def document_erase(*, actor: Peer, document_id: uuid.UUID | str) -> ErasureOutcome:
    """Every version and blob of the document, tombstoned or not."""
    _require_admin(actor)
    document = Document.objects.select_for_update().filter(pk=document_id).first()
    if document is None:
        raise NotFound("document")
    record_id, document_pk = uuid.uuid4(), document.pk
    versions = list(DocumentVersion.objects.filter(document=document).order_by("number")
                    .values_list("id", "sha256"))
    version_ids = [v for v, _ in versions]
    hashes = [h for _, h in versions]
    touched = _touched(Q(document_version_id__in=version_ids))
    KnowledgeSource.objects.filter(document_version_id__in=version_ids).delete()
    DocumentVersion.objects.filter(id__in=version_ids).delete()  # chunks cascade
    document.delete()
    retracted = retract_orphaned(knowledge_ids=touched, actor=actor,
                                 evidence={"erasure": str(record_id), "kind": "document"})
    details = {"versions": len(version_ids), "knowledge_retracted": retracted}
    record = _record(record_id=record_id, account_id=actor.account_id,
                     kind=ErasureRecord.Kind.DOCUMENT, target_id=document_pk,
                     digest=sha256_text("\n".join(hashes)), actor=actor, details=details,
                     content_hashes=hashes)
    return ErasureOutcome(record, retracted, 0, 0, len(version_ids))


@transaction.atomic
def peer_erase(*, actor: Peer, peer_key: str) -> ErasureOutcome:
    """The peer, their messages, credentials and sign-in user, and every statement whose
    subject they are (with its provenance, relations, history, validations, questions).

    Lifecycle events in which the peer decided about someone else's statement are kept,
    with the actor blanked to 'peer:erased'. The audit chain keeps its entries (it cannot
    change without breaking), but no audit payload carries statement text.
    """
    _require_admin(actor)
    peer = Peer.objects.select_for_update().filter(key=peer_key).first()
    if peer is None:
        raise NotFound("peer")
    if peer.pk == actor.pk:
        raise ApplicationError("cannot_erase_self", "an administrator cannot erase themself",
                               status_code=409)
    record_id = uuid.uuid4()
    message_ids = list(Message.objects.filter(peer=peer).values_list("id", flat=True))
    about = list(Knowledge.objects.filter(subject_peer=peer).values_list("id", flat=True))
    touched = _touched(Q(message_id__in=message_ids), exclude=about)
    # Unlink what survives from what goes, then delete.
    Knowledge.objects.filter(Q(supersedes_id__in=about) | Q(pk__in=about)).update(
        supersedes=None)
    Knowledge.objects.filter(proposed_by=peer).update(proposed_by=None)
    Document.objects.filter(peer=peer).update(peer=None)
    Validation.objects.filter(resolved_by=peer).update(resolved_by=None)
    # Decisions this peer made about others stay as history, without naming them
    # (the knowledge trigger allows exactly this change of a lifecycle event).
    LifecycleEvent.objects.filter(actor_peer=peer).exclude(knowledge_id__in=about).update(
        actor_peer=None, actor="peer:erased")
    drop_derived_rows(about)  # entity rows named only by these statements go too
    Knowledge.objects.filter(pk__in=about).delete()
    KnowledgeSource.objects.filter(message_id__in=message_ids).delete()
    Message.objects.filter(pk__in=message_ids).delete()
    retracted = retract_orphaned(knowledge_ids=touched, actor=actor,
                                 evidence={"erasure": str(record_id), "kind": "peer"})
    user_id = peer.user_id
    peer_id = peer.pk
    digest = sha256_text(f"peer:{peer.key}")
    peer.delete()  # credentials and questions cascade
    if user_id is not None:
        get_user_model().objects.filter(pk=user_id).delete()
    details = {"messages": len(message_ids), "knowledge_deleted": len(about),
               "knowledge_retracted": retracted}
    record = _record(record_id=record_id, account_id=actor.account_id,
                     kind=ErasureRecord.Kind.PEER, target_id=peer_id, digest=digest,
                     actor=actor, details=details)
    return ErasureOutcome(record, retracted, len(about), len(message_ids), 0)


def erasure_execute(*, actor: Peer, message_id: Any = None, document_id: Any = None,
                    peer_key: str | None = None) -> ErasureOutcome:
    """Dispatch to exactly one erasure."""
    given = [v is not None for v in (message_id, document_id, peer_key)]
    if sum(given) != 1:
        raise ApplicationError("invalid_erasure",
                               "name exactly one of message_id, document_id or peer_key")
    if message_id is not None:
        return message_erase(actor=actor, message_id=message_id)
    if document_id is not None:
        return document_erase(actor=actor, document_id=document_id)
    assert peer_key is not None
    return peer_erase(actor=actor, peer_key=peer_key)
