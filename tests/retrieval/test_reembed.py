"""`manage.py reembed` is the explicit path between embedding spaces."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from knowledge.lifecycle import transition
from memhouse.tenancy import account_context
from retrieval.embedding import get_embedder
from retrieval.models import EmbeddingSpace, KnowledgeVector
from tests.factories import KnowledgeFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_reembed_fills_the_current_space_and_can_drop_others(committed_world, capsys):
    w = committed_world
    with account_context(w.account.id):
        items = [KnowledgeFactory(world=w, statement=s) for s in
                 ("Alice plays the oboe.", "Alice lives in Lyon.", "Alice is proposed only.")]
        for item in items[:2]:
            transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
        old = EmbeddingSpace.objects.create(provider="legacy", model="m", version="0", dims=3)
        KnowledgeVector.objects.create(account=w.account, knowledge=items[0], space=old,
                                       embedding=[1, 0, 0])
    call_command("reembed", no_progress=True)
    ident = get_embedder().identity
    with account_context(w.account.id):
        current = EmbeddingSpace.objects.get(provider=ident.provider, version=ident.version)
        embedded = set(KnowledgeVector.objects.filter(space=current)
                       .values_list("knowledge_id", flat=True))
        assert embedded == {items[0].id, items[1].id}  # proposed rows are not embedded
        assert KnowledgeVector.objects.filter(space=old).count() == 1  # never reused or mixed
    call_command("reembed", no_progress=True, drop_other_spaces=True)
    assert "embedded 0 statements" in capsys.readouterr().out  # idempotent
    with account_context(w.account.id):
        assert not KnowledgeVector.objects.filter(space=old).exists()
