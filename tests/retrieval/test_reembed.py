"""`manage.py reembed` is the explicit path between embedding spaces."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from knowledge.lifecycle import transition
from memhouse.core.tenancy import account_context
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


def _semantic_search(w, query: str):
    from dataclasses import replace

    from memhouse.core.principal import internal_reader
    from retrieval import engine
    from retrieval.profiles import BASE_PROFILES

    profile = replace(BASE_PROFILES["balanced"], strategies=("semantic",),
                      weights={"semantic": 1.0}, deadline_ms=5000)
    with account_context(w.account.id):
        return engine.search(reader=internal_reader(w.account.id), scope=w.scope, query=query,
                             profile=profile, limit=5)


def test_vectors_of_the_old_embedder_are_never_mixed_in_and_reembed_is_reported(
    committed_world, capsys
):
    """An upgraded deployment: its statements have vectors only in the space of the previous
    default embedder (sentence-transformers, fp32). Those vectors are the current model's
    own vectors of the statements, so a search that compared across spaces would find
    them at once; it must not. Semantic says `needs_reembed`, `reembed --check` fails,
    and after `reembed` semantic search finds the statement in the new space."""
    w = committed_world
    embedder = get_embedder()
    assert embedder.identity.provider == "onnx"  # the default embedder
    statements = ("Alice plays the oboe in a jazz band.", "Alice lives in Lyon.")
    with account_context(w.account.id):
        items = [KnowledgeFactory(world=w, statement=s) for s in statements]
        for item in items:
            transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
        legacy = EmbeddingSpace.objects.create(
            provider="sentence-transformers", model="all-MiniLM-L6-v2",
            version="0.1.0+a7e3cfe241dd", dims=384)
        for item, vector in zip(items, embedder.embed_documents(statements), strict=True):
            KnowledgeVector.objects.create(account=w.account, knowledge=item, space=legacy,
                                           embedding=vector)

    res = _semantic_search(w, "Who plays the oboe?")
    assert res.candidates == []
    assert res.strategies["not_applicable"] == ["semantic"]
    assert res.retrieval_outcomes == [{"strategy": "semantic", "outcome": "not_applicable",
                                       "reason_class": "needs_reembed"}]
    with pytest.raises(CommandError, match=r"2 statements or messages need `manage\.py reembed`"):
        call_command("reembed", check=True)
    assert "2 statements and 0 messages without a vector in onnx/" in capsys.readouterr().out
    with account_context(w.account.id):  # --check wrote nothing, not even the space
        assert not EmbeddingSpace.objects.filter(provider="onnx").exists()

    call_command("reembed", no_progress=True)
    call_command("reembed", check=True)
    assert "every statement has a vector in onnx/" in capsys.readouterr().out
    res = _semantic_search(w, "Who plays the oboe?")
    assert res.candidates[0]["id"] == str(items[0].id)
    assert res.strategies["contributed"] == ["semantic"] and res.retrieval_outcomes == []
    ident = embedder.identity
    with account_context(w.account.id):
        current = EmbeddingSpace.objects.get(provider=ident.provider, version=ident.version)
        assert KnowledgeVector.objects.filter(space=current).count() == 2
        assert KnowledgeVector.objects.filter(space=legacy).count() == 2  # kept, not reused


def test_an_account_with_no_vectors_at_all_is_not_told_to_reembed(committed_world):
    # Nothing embedded anywhere (a new deployment): semantic is empty, not "needs_reembed".
    res = _semantic_search(committed_world, "Who plays the oboe?")
    assert res.strategies["empty"] == ["semantic"] and res.retrieval_outcomes == []


class _CountingEmbedder:
    """The real embedder, recording which texts it was asked to embed."""

    def __init__(self) -> None:
        self.inner = get_embedder()
        self.texts: list[str] = []

    @property
    def identity(self):  # type: ignore[no-untyped-def]
        return self.inner.identity

    def embed_documents(self, texts, batch_size=64):  # type: ignore[no-untyped-def]
        self.texts.extend(texts)
        return self.inner.embed_documents(texts, batch_size)


def test_a_redelivered_embedding_embeds_only_rows_without_a_vector(committed_world):
    from django.utils import timezone

    from knowledge.models import Message
    from retrieval.vectors import embed_knowledge, embed_messages

    w = committed_world
    with account_context(w.account.id):
        items = [KnowledgeFactory(world=w, statement=s) for s in
                 ("Alice plays the oboe.", "Alice lives in Lyon.")]
        for item in items:
            transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
        msgs = [Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                       text=t, occurred_at=timezone.now())
                for t in ("I play the oboe.", "I live in Lyon.")]
    ids = [str(i.id) for i in items]
    embedder = _CountingEmbedder()
    assert embed_knowledge(w.account.id, ids[:1], embedder=embedder) == 1
    assert embed_knowledge(w.account.id, ids, embedder=embedder) == 1  # a redelivery
    assert embed_knowledge(w.account.id, ids, embedder=embedder) == 0
    assert embedder.texts == ["Alice plays the oboe.", "Alice lives in Lyon."]
    assert embed_messages(w.account.id, [str(m.id) for m in msgs], embedder=embedder) == 2
    assert embed_messages(w.account.id, [str(m.id) for m in msgs], embedder=embedder) == 0
    assert embedder.texts[2:] == ["I play the oboe.", "I live in Lyon."]
    with account_context(w.account.id):
        assert KnowledgeVector.objects.filter(knowledge_id__in=ids).count() == 2


class _FixedEmbedder:
    """The real embedder's identity with vectors chosen by the test (float64, unit)."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.identity = get_embedder().identity
        self.vectors = vectors

    def embed_documents(self, texts, batch_size: int = 64):
        return [list(self.vectors[t]) for t in texts]


def test_vectors_are_stored_as_the_text_form_stored_them(committed_world):
    """The binary write (issue 37) stores each component as the float4 PostgreSQL made
    of the decimal text the ORM used to send: bit for bit the same vectors."""
    import random

    from django.db import connection
    from django.utils import timezone
    from pgvector.django import VectorField

    from knowledge.models import Message
    from retrieval.models import MessageVector
    from retrieval.vectors import embed_batch

    w = committed_world
    rng = random.Random(37)
    texts = [f"Alice said thing {i}." for i in range(5)]
    raw = {t: [rng.gauss(0, 1) for _ in range(384)] for t in texts}
    vectors = {t: [x / sum(y * y for y in v) ** 0.5 for x in v] for t, v in raw.items()}
    vectors[texts[0]][:3] = [1e-9, -0.0, 0.333333333333333314829616256247]  # awkward values
    with account_context(w.account.id):
        items = [KnowledgeFactory(world=w, statement=t) for t in texts[:2]]
        for item in items:
            transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
        msgs = [Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                       text=t, occurred_at=timezone.now()) for t in texts[2:]]
    written = embed_batch(w.account.id, [str(i.id) for i in items], [str(m.id) for m in msgs],
                          embedder=_FixedEmbedder(vectors))
    assert written == (2, 3)
    field = VectorField()
    with account_context(w.account.id), connection.cursor() as cur:
        stored = {k.knowledge.statement: k.embedding for k in
                  KnowledgeVector.objects.select_related("knowledge")}
        stored |= {m.message.text: m.embedding for m in
                   MessageVector.objects.select_related("message")}
        for text in texts:
            cur.execute("SELECT %s::vector", [field.get_prep_value(vectors[text])])
            as_text = field.from_db_value(cur.fetchone()[0], None, connection)
            assert list(stored[text]) == list(as_text), text
