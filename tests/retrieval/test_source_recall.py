"""Ask's source recall lane (retrieval.source_recall): message vectors per embedding
space written by intake and rebuilt by reembed, full-text over the message text, every
visible message searched (not the newest few), the reader's message visibility in SQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import connection

from knowledge.models import Message, Peer, Scope
from memhouse.core.principal import Reader
from memhouse.core.tenancy import account_context
from retrieval import source_recall
from retrieval.models import MessageVector
from retrieval.vectors import embed_messages
from tests.retrieval.test_search import _add

pytestmark = pytest.mark.django_db(transaction=True)


def _reader(w, key: str) -> Reader:
    return Reader(account_id=w.account.id, posture="peer",
                  peer_id=Peer.objects.get(key=key).id, scope_roots=None)


def _chain() -> list:
    return list(Scope.objects.filter(path__in=["/marketing/social", "/marketing", "/"])
                .values_list("id", flat=True))


@pytest.fixture
def talk(committed_world):
    """An old message with a derived statement, one of Alice's personal ones, and 80
    newer filler messages (more than the 64 the old semantic tool read)."""
    w = committed_world
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    ids = {}
    with account_context(w.account.id):
        old = Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                     text="I restore antique sailing boats in Porto.",
                                     occurred_at=t0)
        ids["boats_msg"] = str(old.id)
        _add(w, "Alice restores antique sailing boats in Porto.",
             sources=[{"message": old, "excerpt": "restore antique sailing boats"}])
        private = Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                         text="My migraine came back during the regatta.",
                                         occurred_at=t0 + timedelta(minutes=1))
        ids["migraine_msg"] = str(private.id)
        _add(w, "Alice had a migraine during the regatta.", sensitivity="personal",
             sources=[{"message": private, "excerpt": "migraine"}])
        filler = [Message.objects.create(
            account=w.account, peer=w.subject, scope=w.scope,
            text=f"Weekly status note number {n}: the newsletter went out on time.",
            occurred_at=t0 + timedelta(days=1, minutes=n)) for n in range(80)]
    embed_messages(w.account.id, [ids["boats_msg"], ids["migraine_msg"],
                                  *[str(m.id) for m in filler]])
    return w, ids


def test_semantic_reaches_every_visible_message_not_the_newest_few(talk):
    w, ids = talk
    with account_context(w.account.id):
        found = source_recall.semantic(_reader(w, "bob"), _chain(),
                                       "Who repairs old sailboats?", 6)
    assert found and str(found[0].id) == ids["boats_msg"]  # older than 80 others


def test_both_tools_keep_the_readers_message_visibility(talk):
    w, ids = talk
    with account_context(w.account.id):
        chain = _chain()
        alice, bob = _reader(w, "alice"), _reader(w, "bob")
        q = "migraine at the regatta"
        assert ids["migraine_msg"] in {str(m.id) for m in
                                       source_recall.semantic(alice, chain, q, 6)}
        assert ids["migraine_msg"] in {str(m.id) for m in
                                       source_recall.exact(alice, chain, q, 6)}
        # Bob may not read the personal statement derived from it, so not the message.
        assert ids["migraine_msg"] not in {str(m.id) for m in
                                           source_recall.semantic(bob, chain, q, 40)}
        assert ids["migraine_msg"] not in {str(m.id) for m in
                                           source_recall.exact(bob, chain, q, 40)}


def test_message_vectors_are_rebuildable_tenant_scoped_and_erased_with_the_message(talk):
    w, ids = talk
    with account_context(w.account.id):
        MessageVector.objects.all().delete()
    call_command("reembed", no_progress=True)  # rebuilds the lane
    with account_context(w.account.id):
        assert MessageVector.objects.count() == Message.objects.count() == 82
    with account_context(w.other_account.id):
        assert MessageVector.objects.count() == 0
    with connection.cursor() as cur:
        cur.execute("SELECT relrowsecurity, relforcerowsecurity FROM pg_class "
                    "WHERE relname = 'memhouse_message_vector'")
        assert cur.fetchall() == [(True, True)]
        cur.execute("SELECT 1 FROM pg_indexes WHERE indexname = 'message_text_fts'")
        assert cur.fetchall() == [(1,)]
    with account_context(w.account.id):
        Message.objects.filter(pk=ids["boats_msg"]).delete()
        assert not MessageVector.objects.filter(message_id=ids["boats_msg"]).exists()


def test_intake_embeds_each_message(committed_world):
    from django.test import TestCase

    from knowledge.ingest.services import IncomingMessage, messages_ingest
    from memhouse.core.principal import Principal

    w = committed_world
    principal = Principal(account_id=w.account.id, peer=w.agent, via="api_key",
                          act_for_all=True)
    with account_context(w.account.id), TestCase.captureOnCommitCallbacks(execute=True):
        messages_ingest(principal=principal, scope_path="/marketing/social", messages=[
            IncomingMessage(text="I keep bees on the roof of our office.",
                            occurred_at=datetime.now(UTC), peer_key=w.subject.key)])
    with account_context(w.account.id):
        msg = Message.objects.get(text__contains="bees")
        assert MessageVector.objects.filter(message=msg).count() == 1
