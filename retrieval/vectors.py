"""Vector identity and storage: spaces, per-space HNSW indexes, embedding writes."""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from knowledge import lifecycle
from knowledge.models import Knowledge, Message
from memhouse.core.tenancy import account_context
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
    """Vectors for the embeddable statements among `knowledge_ids` that have none in the
    embedder's space yet; returns how many were written."""
    return embed_batch(account_id, knowledge_ids, (), embedder=embedder)[0]


def embed_messages(account_id: uuid.UUID | str, message_ids: Sequence[str],
                   *, embedder: Any = None) -> int:
    """Source messages' vectors for ask's source recall lane (the same embedder and
    spaces as statements), for those with none in the space yet; returns how many."""
    return embed_batch(account_id, (), message_ids, embedder=embedder)[1]


# What each vector table embeds: the rows it may hold, the owner key, their text column,
# and the source fields copied onto the vector row (source field, vector column): a
# message's scope and time, which semantic's message lanes filter on (retrieval 0012).
_STATEMENTS: tuple[Any, str, str, tuple[tuple[str, str], ...]] = (
    KnowledgeVector, "knowledge", "statement", ())
_MESSAGES: tuple[Any, str, str, tuple[tuple[str, str], ...]] = (
    MessageVector, "message", "text", (("scope_id", "scope_id"), ("occurred_at", "said_at")))


def _sources(vector_model: Any) -> Any:
    if vector_model is KnowledgeVector:
        return Knowledge.objects.filter(state__in=EMBEDDABLE_STATES)
    return Message.objects.all()


def _missing(space: EmbeddingSpace, ids: list[str], table: tuple[Any, ...]) -> Any:
    vector_model, owner = table[:2]
    has_vector = vector_model.objects.filter(**{owner: OuterRef("pk")}, space=space)
    return _sources(vector_model).filter(id__in=ids).exclude(Exists(has_vector))


def embed_batch(account_id: uuid.UUID | str, knowledge_ids: Sequence[str],
                message_ids: Sequence[str], *, embedder: Any = None) -> tuple[int, int]:
    """embed_knowledge and embed_messages together, with one encoder call for both (an
    intake batch's statements and messages: one sort by length, fuller batches, one
    model call instead of two). Read -> embed -> write: read the texts of the rows
    without a vector in the space (a redelivery or a reembed embeds nothing twice), embed
    them with no transaction open, then write those whose row still exists and still has
    no vector (an erasure or another worker may have come in between). Returns the
    statement and message vectors written."""
    from retrieval.embedding import get_embedder

    wanted = [(table, list(ids)) for table, ids in ((_STATEMENTS, knowledge_ids),
                                                     (_MESSAGES, message_ids)) if ids]
    if not wanted:
        return 0, 0
    embedder = embedder or get_embedder()
    with account_context(account_id):
        space = space_ensure(embedder.identity)
        rows = [(table, list(_missing(space, ids, table).values_list(
                    "id", table[2], *(field for field, _ in table[3]))))
                for table, ids in wanted]
    texts = [row[1] for _, found in rows for row in found]
    written = {KnowledgeVector: 0, MessageVector: 0}
    if texts:
        vectors = iter(embedder.embed_documents(texts))
        with account_context(account_id):
            for (vector_model, owner, _, carried), found in rows:
                if not found:
                    continue
                mine = [next(vectors) for _ in found]
                still = set(_missing(space, [row[0] for row in found], (vector_model, owner))
                            .values_list("id", flat=True))
                written[vector_model] = _insert_vectors(
                    vector_model, owner, account_id, space,
                    [(row[0], vec, row[2:]) for row, vec in zip(found, mine, strict=True)
                     if row[0] in still], columns=[column for _, column in carried])
    if knowledge_ids:
        # The minimal profile's recall projection is copied from the vectors (again, on a
        # redelivery: it also drops copies of rows no longer recallable).
        recall.refresh(account_id, list(knowledge_ids))
    return written[KnowledgeVector], written[MessageVector]


# The `vector` type's oid per open connection (binary parameters name their type): read
# once per connection, so a database created again (tests, benchmarks) is read again.
_vector_oids: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def _insert_vectors(vector_model: Any, owner: str, account_id: uuid.UUID | str,
                    space: EmbeddingSpace,
                    rows: list[tuple[Any, Sequence[float], tuple[Any, ...]]],
                    columns: Sequence[str] = ()) -> int:
    """Insert (row id, vector, values of `columns`) rows, skipping any that has a vector
    in the space by now (ON CONFLICT DO NOTHING, as bulk_create(ignore_conflicts=True)
    did); returns how many were sent. The vectors go as binary float4 on a
    server-side-binding cursor: the ORM's way formatted 384 floats as decimal text per
    vector and had the driver quote ~7 KB of it into the query (0.28 ms of CPU per
    vector, more than the rest of the write). PostgreSQL stores float4 either way: the
    float32 nearest each value."""
    import numpy as np
    import psycopg
    from pgvector.psycopg.vector import VectorBinaryDumper

    if not rows:
        return 0
    connection.ensure_connection()
    conn = connection.connection
    if conn not in _vector_oids:
        with connection.cursor() as cur:
            cur.execute("SELECT 'vector'::regtype::oid")
            _vector_oids[conn] = int(cur.fetchone()[0])
    raw = psycopg.Cursor(conn)
    raw.adapters.register_dumper(np.ndarray, type(
        "VectorDumper", (VectorBinaryDumper,), {"oid": _vector_oids[conn]}))
    now = timezone.now()
    table = vector_model._meta.db_table
    # Django's wrapper around it, so the query is logged and timed like any other.
    inner: Any = raw
    wrapped = (connection.make_debug_cursor(inner) if connection.queries_logged
               else connection.make_cursor(inner))
    params: list[Any] = [(uuid.uuid4(), uuid.UUID(str(account_id)), space.id, row_id,
                          np.asarray(vec, dtype=np.float32), now, *values)
                         for row_id, vec, values in rows]
    extra = "".join(f", {column}" for column in columns)
    with wrapped as cur:
        cur.executemany(
            f"INSERT INTO {table} (id, account_id, space_id, {owner}_id, embedding,"
            f" created_at{extra}) VALUES (%s, %s, %s, %s, %s, %s{', %s' * len(columns)})"
            " ON CONFLICT DO NOTHING", params)
    return len(rows)


def index_pending(account_id: uuid.UUID, knowledge_ids: list[Any],
                  message_ids: list[Any]) -> int:
    """How many of these statements (embeddable ones) and messages have no vector in the
    configured embedder's space yet: a write waited for with `wait` is searchable by
    meaning once this is 0 (registered with knowledge.selectors at start-up)."""
    from retrieval.embedding import get_embedder

    statements = Knowledge.objects.filter(account_id=account_id, id__in=knowledge_ids,
                                          state__in=EMBEDDABLE_STATES)
    # A message set aside (extraction failed) is never embedded: nothing to wait for.
    messages = Message.objects.filter(account_id=account_id, id__in=message_ids,
                                      extracted_at__isnull=False)
    identity = get_embedder().identity
    space = EmbeddingSpace.objects.filter(provider=identity.provider, model=identity.model,
                                          version=identity.version, dims=identity.dims).first()
    if space is not None:
        statements = statements.exclude(Exists(KnowledgeVector.objects.filter(
            knowledge=OuterRef("pk"), space=space)))
        messages = messages.exclude(Exists(MessageVector.objects.filter(
            message=OuterRef("pk"), space=space)))
    return statements.count() + (messages.count() if message_ids else 0)


@transaction.atomic
def drop_space_vectors(*, account_id: uuid.UUID, space: EmbeddingSpace) -> int:
    deleted, _ = KnowledgeVector.objects.filter(account_id=account_id, space=space).delete()
    return deleted
