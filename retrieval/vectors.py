"""Vector identity and storage: spaces, per-space HNSW indexes, embedding writes."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from knowledge import lifecycle
from knowledge.models import Knowledge, Message
from memhouse.tenancy import account_context
from retrieval import recall
from retrieval.models import EmbeddingSpace, KnowledgeVector, MessageVector

# States worth a vector: anything that can become retrievable without re-extraction.
EMBEDDABLE_STATES = tuple(sorted(lifecycle.EMBEDDABLE))


# (database, space id) whose index this process has created or found.
_indexed_spaces: set[tuple[str, uuid.UUID]] = set()


def index_name(space: EmbeddingSpace) -> str:
    return f"knowledge_vector_hnsw_{space.id.hex[:12]}"


def message_index_name(space: EmbeddingSpace) -> str:
    return f"message_vector_hnsw_{space.id.hex[:12]}"


def space_ensure(identity: Any) -> EmbeddingSpace:
    """The space row for an embedder identity, with its own partial HNSW index.

    A partial index per space keeps every ANN search inside one identity: a query vector
    is only ever compared with vectors of the same provider, model, version and dims.
    """
    space, _ = EmbeddingSpace.objects.get_or_create(
        provider=identity.provider, model=identity.model, version=identity.version,
        dims=identity.dims)
    key = (connection.settings_dict["NAME"], space.id)
    if key in _indexed_spaces:
        # Once per process: CREATE INDEX IF NOT EXISTS takes a SHARE lock on the vector
        # table, which would queue every concurrent embedding write behind it.
        return space
    with connection.cursor() as cur:
        cur.execute(
            f"CREATE INDEX IF NOT EXISTS {index_name(space)} ON memhouse_knowledge_vector "
            f"USING hnsw ((embedding::vector({int(space.dims)})) vector_cosine_ops) "
            f"WITH (m = 16, ef_construction = 64) WHERE space_id = '{space.id}'")
        cur.execute(
            f"CREATE INDEX IF NOT EXISTS {message_index_name(space)} ON "
            f"memhouse_message_vector USING hnsw ((embedding::vector({int(space.dims)})) "
            f"vector_cosine_ops) WITH (m = 16, ef_construction = 64) "
            f"WHERE space_id = '{space.id}'")
    recall.ensure_index(space)
    # Remembered after commit only: a rolled-back CREATE INDEX leaves no index.
    transaction.on_commit(lambda: _indexed_spaces.add(key))
    return space


def embed_knowledge(account_id: uuid.UUID | str, knowledge_ids: Sequence[str],
                    *, embedder: Any = None) -> int:
    """Read statements, embed them with no transaction open, write the vectors."""
    from retrieval.embedding import get_embedder

    embedder = embedder or get_embedder()
    with account_context(account_id):
        rows = list(Knowledge.objects.filter(id__in=list(knowledge_ids),
                                             state__in=EMBEDDABLE_STATES)
                    .values_list("id", "statement"))
    if not rows:
        return 0
    vectors = embedder.embed_documents([text for _, text in rows])
    with account_context(account_id):
        space = space_ensure(embedder.identity)
        existing = set(KnowledgeVector.objects.filter(
            space=space, knowledge_id__in=[i for i, _ in rows]).values_list("knowledge_id",
                                                                          flat=True))
        KnowledgeVector.objects.bulk_create([
            KnowledgeVector(account_id=account_id, knowledge_id=kid, space=space, embedding=vec)
            for (kid, _), vec in zip(rows, vectors, strict=True) if kid not in existing
        ])
    # The minimal profile's recall projection is copied from the vectors just written.
    recall.refresh(account_id, [kid for kid, _ in rows])
    return len(rows) - len(existing)


def embed_messages(account_id: uuid.UUID | str, message_ids: Sequence[str],
                   *, embedder: Any = None) -> int:
    """Source messages' vectors for ask's source recall lane (the same embedder and
    spaces as statements); embedded with no transaction open."""
    from retrieval.embedding import get_embedder

    embedder = embedder or get_embedder()
    with account_context(account_id):
        rows = list(Message.objects.filter(id__in=list(message_ids))
                    .values_list("id", "text"))
    if not rows:
        return 0
    vectors = embedder.embed_documents([text for _, text in rows])
    with account_context(account_id):
        space = space_ensure(embedder.identity)
        existing = set(MessageVector.objects.filter(
            space=space, message_id__in=[i for i, _ in rows]).values_list("message_id",
                                                                        flat=True))
        # A message erased while it was being embedded has no row left to point at.
        alive = set(Message.objects.filter(id__in=[i for i, _ in rows])
                    .values_list("id", flat=True))
        MessageVector.objects.bulk_create([
            MessageVector(account_id=account_id, message_id=mid, space=space, embedding=vec)
            for (mid, _), vec in zip(rows, vectors, strict=True)
            if mid not in existing and mid in alive
        ], ignore_conflicts=True)
    return len([m for m, _ in rows if m not in existing and m in alive])


@transaction.atomic
def drop_space_vectors(*, account_id: uuid.UUID, space: EmbeddingSpace) -> int:
    deleted, _ = KnowledgeVector.objects.filter(account_id=account_id, space=space).delete()
    return deleted
