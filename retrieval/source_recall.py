"""Ask's source recall lane: the reader's visible source messages, searched whole.

Two tools, both one SQL query with the reader's message visibility inside it (exactly
`lineage.visible_messages`: in the read's scopes, and spoken by the reader or with every
statement derived from them visible to the reader):

* `exact`: full-text search over the message text (the GIN index of migration 0008),
  ranked by ts_rank, newest first on ties;
* `semantic`: nearest message vectors (MessageVector, one per message and embedding
  space, written after intake and rebuilt by `manage.py reembed`) to the cached query
  vector, in the query's own space; pgvector's iterative index scan keeps reading the
  per-space HNSW index until `limit` visible rows are found.

Every visible message is a candidate, not the newest few; a message without a vector in
the space (not embedded yet) is reachable by `exact` only.
"""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector
from django.db import connection
from django.db.models import F

from knowledge.models import Message
from memhouse.core.principal import Reader
from retrieval import engine
from retrieval.lexical import analyze
from retrieval.lineage import visible_messages
from retrieval.strategies.base import vector_literal


def exact(reader: Reader, scope_ids: list[Any], query: str, limit: int) -> list[Message]:
    terms = analyze(query).terms
    if not terms:
        return []
    tsq = SearchQuery(" or ".join(terms), config="english", search_type="websearch")
    # The same expression as the index (to_tsvector('english', coalesce(text, ''))).
    vector = SearchVector("text", config="english")
    return list(visible_messages(reader, scope_ids).select_related("scope")
                .annotate(rank=SearchRank(vector, tsq))
                .filter(rank__gt=0).order_by(F("rank").desc(), "-occurred_at", "id")[:limit])


def semantic(reader: Reader, scope_ids: list[Any], query: str, limit: int) -> list[Message]:
    if not query.strip():
        return []
    space_id, vector = engine.query_space_and_vector(reader, query)
    if space_id is None or not vector:
        return []
    visible_sql, visible_params = (visible_messages(reader, scope_ids).values("id")
                                   .query.sql_with_params())
    dims = len(vector)
    literal = vector_literal(vector)
    with connection.cursor() as cur:
        cur.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cur.execute(f"SET LOCAL hnsw.ef_search = {max(40, limit * 4)}")
        cur.execute(
            f"SELECT mv.message_id, (mv.embedding::vector({dims})) <=> %s::vector({dims}) "
            f"AS distance FROM memhouse_message_vector mv WHERE mv.space_id = %s "
            f"AND mv.message_id IN ({visible_sql}) ORDER BY distance LIMIT %s",
            [literal, str(space_id), *visible_params, limit])
        # relaxed_order may return near-sorted rows: order exactly.
        ranked = sorted(cur.fetchall(), key=lambda r: (float(r[1]), str(r[0])))
    ids = [r[0] for r in ranked]
    rows = {m.id: m for m in visible_messages(reader, scope_ids).select_related("scope")
            .filter(pk__in=ids)}
    return [rows[i] for i in ids if i in rows]
