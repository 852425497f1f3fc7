"""Temporal: only with as_of. Dated statements that match the query text, ranked by how
far their valid-time window lies from as_of (inside the window = distance 0)."""

from __future__ import annotations

from retrieval.strategies.base import StrategyContext, StrategyResult
from retrieval.strategies.sql import fetch, visible_ids_sql

NAME = "temporal"


def applies(ctx: StrategyContext) -> bool:
    """Whether the strategy can find anything for this search (decided without SQL)."""
    return ctx.as_of is not None and not ctx.lexical.is_empty


def run(ctx: StrategyContext) -> StrategyResult:
    result = StrategyResult(NAME)
    if not applies(ctx):
        result.applicable, result.reason = False, "applicability"
        return result
    visible_sql, visible_params = visible_ids_sql(ctx)
    fn = "websearch_to_tsquery" if ctx.lexical.mode == "websearch" else "to_tsquery"
    # Distance in days from as_of to the window [from, until]; open ends extend forever.
    sql = (
        "SELECT k.id::text, GREATEST(0, "
        "  CASE WHEN k.relevant_from IS NOT NULL AND %s < k.relevant_from "
        "       THEN EXTRACT(EPOCH FROM k.relevant_from - %s) "
        "       WHEN k.relevant_until IS NOT NULL AND %s > k.relevant_until "
        "       THEN EXTRACT(EPOCH FROM %s - k.relevant_until) ELSE 0 END) / 86400.0 AS days "
        f"FROM memhouse_knowledge k WHERE k.id IN ({visible_sql}) "
        "AND (k.relevant_from IS NOT NULL OR k.relevant_until IS NOT NULL) "
        f"AND k.search_vector @@ {fn}('english', %s) ORDER BY days, k.id LIMIT %s")
    at = ctx.as_of
    rows = fetch(sql, [at, at, at, at, *visible_params, ctx.lexical.tsquery, ctx.limit])
    for kid, days in rows:
        result.candidates.append((kid, 1.0 / (1.0 + float(days))))
        result.details[kid] = {"days_from_as_of": round(float(days), 3)}
    return result
