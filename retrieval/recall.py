"""RecallDocument: the minimal profile's recall projection, copied after embedding.

A non-authoritative copy of each retrievable statement's vector with its lane (direct, or
derived: deduction / consolidation) and a source watermark (the statement's `updated_at`
when copied). Rebuildable: `manage.py reembed` rebuilds it with the vectors, archives
leave it out, backups list it as derived.

* **Written** by :func:`refresh` after embedding (retrieval.vectors.embed_knowledge) and by
  the lifecycle refresh hook inside every state change's transaction: a statement whose
  new state is not retrievable loses its copies, any other is copied again with its new
  watermark.
* **Read** only by the semantic strategy's lanes (retrieval.strategies.semantic), joined
  to canonical Knowledge with every reader filter and `source_updated_at = updated_at`,
  so a copy that missed a change (any write that bypassed the hook) is never served.
* **Erased** with its statement or its vector in the same transaction (foreign keys with
  cascade: erasure deletes the statement, a dropped space its vectors).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from knowledge import lifecycle
from memhouse.core.tenancy import account_context
from retrieval.models import EmbeddingSpace, KnowledgeVector, RecallDocument
from retrieval.strategies.semantic import DERIVED_EXTRACTORS

# Copied states: what any reader may retrieve (provisional only for its subject, which
# the reader filter at lookup decides).
RECALLABLE = tuple(sorted(lifecycle.SEARCHABLE | lifecycle.SUBJECT_SEARCHABLE))


def index_name(space: EmbeddingSpace) -> str:
    return f"recall_document_hnsw_{space.id.hex[:12]}"


def ensure_index(space: EmbeddingSpace) -> None:
    """A partial HNSW index per space, as for the vectors themselves."""
    with connection.cursor() as cur:
        cur.execute(
            f"CREATE INDEX IF NOT EXISTS {index_name(space)} ON memhouse_recall_document "
            f"USING hnsw ((embedding::vector({int(space.dims)})) vector_cosine_ops) "
            f"WITH (m = 16, ef_construction = 64) WHERE space_id = '{space.id}'")


def _refresh_sql(account_id: Any, knowledge_ids: Sequence[Any] | None) -> int:
    """Replace the copies of `knowledge_ids` (None: every statement) in this transaction."""
    only = "" if knowledge_ids is None else " AND knowledge_id = ANY(%s::uuid[])"
    only_k = "" if knowledge_ids is None else " AND k.id = ANY(%s::uuid[])"
    ids = [] if knowledge_ids is None else [[str(i) for i in knowledge_ids]]
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM memhouse_recall_document WHERE account_id = %s{only}",
                    [str(account_id), *ids])
        cur.execute(
            "INSERT INTO memhouse_recall_document (id, account_id, knowledge_id, vector_id,"
            " space_id, lane, embedding, source_updated_at, created_at)"
            " SELECT gen_random_uuid(), k.account_id, k.id, v.id, v.space_id,"
            "  CASE WHEN k.extractor = ANY(%s) THEN %s ELSE %s END,"
            "  v.embedding, k.updated_at, now()"
            " FROM memhouse_knowledge k JOIN memhouse_knowledge_vector v ON v.knowledge_id = k.id"
            f" WHERE k.account_id = %s AND k.state = ANY(%s){only_k}",
            [list(DERIVED_EXTRACTORS), RecallDocument.Lane.DERIVED, RecallDocument.Lane.DIRECT,
             str(account_id), list(RECALLABLE), *ids])
        return int(cur.rowcount)


def refresh(account_id: uuid.UUID | str, knowledge_ids: Sequence[Any]) -> int:
    """Copy (again) the given statements' vectors, or drop their copies when they are not
    retrievable any more; returns how many copies exist for them now."""
    if not knowledge_ids:
        return 0
    with account_context(account_id), transaction.atomic():
        return _refresh_sql(account_id, knowledge_ids)


def rebuild(account_id: uuid.UUID | str) -> int:
    """Rebuild the Account's whole recall projection from its vectors (one transaction)."""
    with account_context(account_id), transaction.atomic():
        for space in EmbeddingSpace.objects.filter(
                pk__in=KnowledgeVector.objects.values("space_id")):
            ensure_index(space)
        return _refresh_sql(account_id, None)


def on_knowledge_change(item: Any) -> None:
    """The lifecycle refresh hook: inside the state change's transaction (its Account
    bound), so a statement never outlives its retrievable state in the projection."""
    if item.state == lifecycle.INITIAL_STATE:
        return  # a freshly proposed row has no vector and no copy yet
    _refresh_sql(item.account_id, [item.pk])


def on_knowledge_change_many(items: Sequence[Any]) -> None:
    """The same for a set-based transition (transition_many): one refresh for the batch."""
    by_account: dict[Any, list[Any]] = {}
    for item in items:
        if item.state != lifecycle.INITIAL_STATE:
            by_account.setdefault(item.account_id, []).append(item.pk)
    for account_id, ids in by_account.items():
        _refresh_sql(account_id, ids)
