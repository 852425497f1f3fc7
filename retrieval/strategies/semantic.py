"""Semantic: approximate nearest neighbours in the query's own embedding space.

Only vectors of the query's space are read (the per-space partial HNSW index), and the
visibility filters sit inside the query; pgvector's iterative index scan keeps reading
the index until `limit` visible rows are found.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.db import connection

from retrieval.strategies.base import StrategyContext, StrategyResult
from retrieval.strategies.sql import fetch, visible_ids_sql

NAME = "semantic"
DERIVED_EXTRACTORS = ("deduction", "consolidation")


def _search(ctx: StrategyContext, limit: int, lane: str | None) -> list[tuple[str, float]]:
    dims = len(ctx.query_vector or ())
    filters: dict[str, Any] = {}
    if lane == "derived":
        filters = {"extractor__in": DERIVED_EXTRACTORS}
    visible_sql, visible_params = visible_ids_sql(ctx, **filters)
    lane_sql = ""
    if lane == "direct":
        lane_sql = " AND v.knowledge_id NOT IN (SELECT id FROM memhouse_knowledge " \
                   "WHERE extractor = ANY(%s))"
    vector = "[" + ",".join(f"{x:.7f}" for x in ctx.query_vector or ()) + "]"
    sql = (f"SELECT v.knowledge_id::text, (v.embedding::vector({dims})) <=> %s::vector({dims}) "
           f"AS distance FROM memhouse_knowledge_vector v WHERE v.space_id = %s "
           f"AND v.knowledge_id IN ({visible_sql}){lane_sql} ORDER BY distance LIMIT %s")
    params: list[object] = [vector, str(ctx.space_id), *visible_params]
    if lane == "direct":
        params.append(list(DERIVED_EXTRACTORS))
    params.append(limit)
    rows = fetch(sql, params)
    # relaxed_order may return near-sorted rows; order exactly within this one list.
    return sorted(((kid, float(d)) for kid, d in rows), key=lambda r: (r[1], r[0]))


def run(ctx: StrategyContext) -> StrategyResult:
    result = StrategyResult(NAME)
    if ctx.query_vector is None and ctx.query.strip() and "vectorize" in ctx.options:
        space_id, vector = ctx.options["vectorize"]()
        if space_id is None:
            return result  # nothing has been embedded in this identity yet: empty, not hidden
        ctx = replace(ctx, query_vector=tuple(vector), space_id=space_id)
    if ctx.query_vector is None or ctx.space_id is None or not ctx.query.strip():
        result.applicable, result.reason = False, "applicability"
        return result
    ef = max(40, min(1000, ctx.limit * 2))
    with connection.cursor() as cur:
        cur.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cur.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
    if ctx.options.get("lanes"):
        direct = _search(ctx, ctx.limit, "direct")
        derived = _search(ctx, ctx.limit, "derived")
        merged: list[tuple[str, float, str, int]] = []
        for rank in range(max(len(direct), len(derived))):
            # Interleave by lane rank; direct first on an exact tie.
            for lane, rows in (("direct", direct), ("derived", derived)):
                if rank < len(rows):
                    merged.append((rows[rank][0], rows[rank][1], lane, rank + 1))
        seen: set[str] = set()
        for kid, distance, lane, lane_rank in merged:
            if kid in seen:
                continue
            seen.add(kid)
            result.candidates.append((kid, 1.0 - distance))
            result.details[kid] = {"lane": lane, "lane_rank": lane_rank,
                                   "operation": "derived" if lane == "derived" else "direct",
                                   "cosine_distance": round(distance, 6)}
        return result
    for kid, distance in _search(ctx, ctx.limit, None):
        result.candidates.append((kid, 1.0 - distance))
        result.details[kid] = {"cosine_distance": round(distance, 6)}
    return result
