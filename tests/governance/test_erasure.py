"""Erasure of documents and peers, and the durable ledger."""

from __future__ import annotations

import hashlib

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction

from governance import erasure, services
from governance.models import ErasureRecord, PeerQuestion, Validation
from knowledge import audit
from knowledge import services as ks
from knowledge.ingest.services import document_create
from knowledge.lifecycle import transition
from knowledge.models import (
    AuditEntry,
    Credential,
    Document,
    DocumentChunk,
    DocumentVersion,
    Knowledge,
    KnowledgeSource,
    LifecycleEvent,
    Message,
    Peer,
)
from memhouse.core.errors import ApplicationError
from memhouse.core.principal import Principal
from memhouse.core.tenancy import rebind_account_for_tests
from retrieval.models import EmbeddingSpace, KnowledgeVector
from tests.governance.helpers import active_about, message, propose, provisional_about

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(world):
    return ks.peer_create(account_id=world.account.id, key="dave", kind="human",
                          display_name="Dave", is_admin=True)


def test_only_admins_erase(world):
    msg = message(world, "hello there everyone")
    for peer in (world.curator, world.agent, world.subject):
        with pytest.raises(ApplicationError) as exc:
            erasure.message_erase(actor=peer, message_id=msg.pk)
        assert exc.value.status_code == 403
    assert Message.objects.filter(pk=msg.pk).exists()


def test_document_erasure_removes_every_version_blob_and_chunk(world, admin):
    p = Principal(account_id=world.account.id, peer=world.agent, via="api_key")
    v1 = document_create(principal=p, scope_path="/marketing", title="Plan",
                         content=b"Dana leads the copy team.\n\nLaunch is in March.")
    from knowledge.ingest.services import document_version_add

    v2 = document_version_add(principal=p, document=v1.document, content=b"Launch is in May.")
    held = propose(world, "Launch is in March.", subject=None, level="scope",
                   scope=v1.document.scope, source=message(world, "unused"))
    KnowledgeSource.objects.filter(knowledge=held).delete()
    KnowledgeSource.objects.create(account=world.account, knowledge=held, document_version=v1)
    KnowledgeSource.objects.create(account=world.account, knowledge=held, document_version=v2)
    transition(held, "held", actor="system:test", reason="f4_scope_hold")
    Validation.objects.create(account=world.account, knowledge=held, kind="review",
                              reason="f4_scope_hold")
    assert DocumentChunk.objects.filter(version__document=v1.document).exists()
    outcome = erasure.document_erase(actor=admin, document_id=v1.document_id)
    assert (outcome.deleted_versions, outcome.retracted) == (2, 1)
    assert not Document.objects.filter(pk=v1.document_id).exists()
    assert not DocumentVersion.objects.filter(pk__in=[v1.pk, v2.pk]).exists()
    assert not DocumentChunk.objects.exists()
    held.refresh_from_db()
    assert (held.state, held.state_reason, held.source_count) == (
        "retracted", "f4_source_erased", 0)
    assert Validation.objects.get(knowledge=held).status == "expired"
    rec = ErasureRecord.objects.get()
    assert rec.kind == "document" and rec.content_hashes == [v1.sha256, v2.sha256]
    assert rec.sha256 == hashlib.sha256(f"{v1.sha256}\n{v2.sha256}".encode()).hexdigest()
    entry = AuditEntry.objects.order_by("-seq").first()
    assert entry.event_type == "erasure.document" and "Launch" not in str(entry.payload)
    assert audit.verify(world.account.id).ok


def test_peer_erasure_deletes_them_and_everything_about_them(world, admin):
    about = active_about(world, "Alice likes jazz.")
    asked = provisional_about(world, "Alice prefers tea.")
    space = EmbeddingSpace.objects.create(provider="t", model="m", version="1", dims=3)
    KnowledgeVector.objects.create(account=world.account, knowledge=about, space=space,
                                   embedding=[1, 0, 0])
    # Alice's message supports a statement about bob too; it loses its only source.
    said = message(world, "Bob told me he sails.", speaker=world.subject)
    about_bob = propose(world, "Bob sails.", subject=world.member, source=said)
    transition(about_bob, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    # A statement someone else supersedes with a row about alice.
    newer = propose(world, "Alice likes free jazz.", subject=world.subject)
    Knowledge.objects.filter(pk=newer.pk).update(supersedes=about)
    # Alice governs her own rows (allowed: that history goes with them).
    services.knowledge_confirm(item=asked, actor=world.subject)
    user_id = world.subject.user_id
    outcome = erasure.peer_erase(actor=admin, peer_key="alice")
    assert outcome.deleted_knowledge == 3 and outcome.retracted == 1
    assert not Peer.objects.filter(key="alice").exists()
    assert not Knowledge.objects.filter(subject_peer_id=world.subject.pk).exists()
    assert not Message.objects.filter(peer_id=world.subject.pk).exists()
    assert not Credential.objects.filter(peer_id=world.subject.pk).exists()
    assert not PeerQuestion.objects.exists() and not KnowledgeVector.objects.exists()
    assert not get_user_model().objects.filter(pk=user_id).exists()
    about_bob.refresh_from_db()
    assert (about_bob.state, about_bob.state_reason) == ("retracted", "f4_source_erased")
    rec = ErasureRecord.objects.get()
    assert (rec.kind, rec.target_id, rec.sha256) == (
        "peer", world.subject.pk, hashlib.sha256(b"peer:alice").hexdigest())
    assert rec.details == {"messages": 2, "knowledge_deleted": 3, "knowledge_retracted": 1}
    assert audit.verify(world.account.id).ok


def test_a_curator_with_decisions_on_others_is_erased_and_the_history_kept(world, admin):
    held = propose(world, "The team ships on Fridays.", subject=None, level="scope")
    transition(held, "held", actor="system:test", reason="f4_scope_hold")
    services.knowledge_approve(item=held, actor=world.curator)
    erasure.peer_erase(actor=admin, peer_key="carol")
    assert not Peer.objects.filter(key="carol").exists()
    decision = LifecycleEvent.objects.get(knowledge=held, to_state="active")
    assert (decision.actor_peer_id, decision.actor) == (None, "peer:erased")
    assert audit.verify(world.account.id).ok


def test_lifecycle_history_is_otherwise_append_only(world):
    item = propose(world, "Alice likes tea.")
    event = LifecycleEvent.objects.filter(knowledge=item).first()
    for change in ({"reason": "forged"}, {"actor": "peer:erased", "to_state": "active"},
                   {"actor": "system:other"}):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            LifecycleEvent.objects.filter(pk=event.pk).update(**change)


def test_the_ledger_is_append_only_and_isolated(world, admin):
    msg = message(world, "a message to forget")
    erasure.message_erase(actor=admin, message_id=msg.pk)
    rec = ErasureRecord.objects.get()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        ErasureRecord.objects.filter(pk=rec.pk).update(sha256="0" * 64)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        ErasureRecord.objects.filter(pk=rec.pk).delete()
    rebind_account_for_tests(world.other_account.id)
    assert not ErasureRecord.objects.exists()
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM memhouse_erasure_record")
        assert cur.fetchone()[0] == 0
    rebind_account_for_tests(world.account.id)
    assert ErasureRecord.objects.count() == 1
