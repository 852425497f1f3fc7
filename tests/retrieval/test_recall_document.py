"""RecallDocument: the minimal profile's recall projection (retrieval.recall).

Copied from governed knowledge after embedding, with its lane and a source watermark;
every lookup joins canonical knowledge with every reader filter and serves a copy only
while its watermark equals the statement's `updated_at`; a state change replaces or drops
the copy in its own transaction, erasure deletes it with the statement, archives leave it
out, and `manage.py reembed` rebuilds it.
"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from governance import archive, backup
from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge
from memhouse.core.principal import Reader
from memhouse.core.tenancy import account_context
from retrieval import engine, recall
from retrieval.models import KnowledgeVector, RecallDocument
from retrieval.profiles import BASE_PROFILES
from retrieval.vectors import embed_knowledge

pytestmark = pytest.mark.django_db(transaction=True)


def _add(w: Any, statement: str, *, to: str = "active", extractor: str = "") -> Knowledge:
    item = services.knowledge_propose(
        account_id=w.account.id, statement=statement, scope=w.scope, subject_peer=w.subject,
        actor="system:test", extractor=extractor)
    reason = {"active": "f4_gate_a_b_accepted", "held": "f4_scope_hold"}[to]
    transition(item, to, actor="system:test", reason=reason)
    return item


@pytest.fixture
def corpus(committed_world: Any) -> tuple[Any, dict[str, Knowledge]]:
    w = committed_world
    with account_context(w.account.id):
        rows = {"hiking": _add(w, "Alice loves hiking in the mountains with her dog."),
                "derived": _add(w, "Alice probably enjoys mountain trails.",
                                extractor="deduction"),
                "held": _add(w, "Alice hikes every weekend in the Alps.", to="held")}
    embed_knowledge(w.account.id, [str(k.id) for k in rows.values()])
    return w, rows


def _docs(w: Any) -> dict[str, tuple[str, Any]]:
    with account_context(w.account.id):
        return {str(d.knowledge_id): (d.lane, d.source_updated_at)
                for d in RecallDocument.objects.all()}


def _minimal(w: Any, query: str = "hiking in the mountains") -> dict[str, dict[str, Any]]:
    """The minimal profile's semantic lane candidates (lexical runs beside them)."""
    reader = Reader(account_id=w.account.id, posture="peer",
                    peer_id=w.subject.id)
    with account_context(w.account.id):
        result = engine.search(reader=reader, scope=w.scope, query=query,
                               profile=BASE_PROFILES["minimal"], limit=10)
    return {c["id"]: c["lane"] for c in result.candidates if "lane" in c}


def test_embedding_copies_retrievable_statements_with_their_lane_and_watermark(corpus):
    w, rows = corpus
    with account_context(w.account.id):
        stamps = {str(k.id): k.updated_at for k in Knowledge.objects.all()}
    assert _docs(w) == {str(rows["hiking"].id): ("direct", stamps[str(rows["hiking"].id)]),
                        str(rows["derived"].id): ("derived",
                                                  stamps[str(rows["derived"].id)])}


def test_minimal_lanes_read_the_projection_and_record_lane_operation_rank_distance(corpus):
    w, rows = corpus
    found = _minimal(w)
    hiking, derived = str(rows["hiking"].id), str(rows["derived"].id)
    assert set(found) == {hiking, derived}
    assert found[hiking]["lane"] == "direct" and found[hiking]["operation"] == "direct"
    assert found[derived]["lane"] == "derived" and found[derived]["operation"] == "derived"
    assert found[hiking]["lane_rank"] == 1 and found[derived]["lane_rank"] == 1
    assert 0 <= found[hiking]["cosine_distance"] < 1
    # The lanes read RecallDocument, not the vectors: without copies they find nothing.
    with account_context(w.account.id):
        RecallDocument.objects.all().delete()
        assert KnowledgeVector.objects.count() == 3
    assert _minimal(w) == {}
    call_command("reembed", no_progress=True, stdout=io.StringIO())  # rebuilds the copies
    assert set(_minimal(w)) == {hiking, derived}


def test_a_copy_that_missed_a_change_is_never_served(corpus):
    w, rows = corpus
    hiking = str(rows["hiking"].id)
    with account_context(w.account.id):
        # A write that bypassed the refresh hook: the watermark no longer matches.
        Knowledge.objects.filter(pk=hiking).update(
            updated_at=timezone.now() + timedelta(seconds=1))
    assert hiking not in _minimal(w)
    recall.refresh(w.account.id, [hiking])
    assert hiking in _minimal(w)


def test_a_state_change_drops_or_recopies_in_its_own_transaction(corpus):
    w, rows = corpus
    hiking = rows["hiking"]
    with account_context(w.account.id), transaction.atomic():
        transition(hiking, "needs_revalidation", actor="system:test",
                   reason="f4_revalidation_due")
        assert not RecallDocument.objects.filter(knowledge_id=hiking.id).exists()
    assert str(hiking.id) not in _minimal(w)
    with account_context(w.account.id):
        transition(hiking, "active", actor="system:test", reason="f4_revalidation_confirmed")
        stamp = Knowledge.objects.get(pk=hiking.id).updated_at
    assert _docs(w)[str(hiking.id)] == ("direct", stamp)
    assert str(hiking.id) in _minimal(w)


def test_erasure_cascades_in_the_same_transaction(corpus):
    w, rows = corpus
    with account_context(w.account.id), transaction.atomic():
        Knowledge.objects.filter(pk=rows["derived"].id).delete()
        assert not RecallDocument.objects.filter(knowledge_id=rows["derived"].id).exists()
        # Dropping a statement's vectors (a dropped space) drops its copy too.
        KnowledgeVector.objects.filter(knowledge_id=rows["hiking"].id).delete()
        assert not RecallDocument.objects.exists()


def test_archives_leave_it_out_and_backups_call_it_derived(corpus):
    assert "memhouse_recall_document" in backup.derived_tables()
    assert RecallDocument not in {model for _, model in archive.tables()}
