"""Salience-recency: confident, well-sourced, recent statements.

It reads no query text, so it never runs for a text search (that would turn a miss into
a recency page); it serves only the blank-query context fallback.
"""

from __future__ import annotations

from retrieval.strategies.base import StrategyContext, StrategyResult
from retrieval.strategies.sql import fetch, visible_ids_sql

NAME = "salience_recency"
HALF_LIFE_DAYS = 30.0


def applies(ctx: StrategyContext) -> bool:
    """Whether the strategy can find anything for this search (decided without SQL)."""
    return not ctx.query.strip() or bool(ctx.options.get("blank_fallback"))


def run(ctx: StrategyContext) -> StrategyResult:
    result = StrategyResult(NAME)
    if not applies(ctx):
        result.applicable, result.reason = False, "applicability"
        return result
    visible_sql, visible_params = visible_ids_sql(ctx)
    sql = ("SELECT k.id::text, 0.5 * k.confidence "
           "+ 0.5 * power(0.5, EXTRACT(EPOCH FROM (%s - k.inserted_at)) / 86400.0 / %s) "
           "+ 0.1 * ln(1 + k.source_count) AS score "
           f"FROM memhouse_knowledge k WHERE k.id IN ({visible_sql}) "
           "ORDER BY score DESC, k.id LIMIT %s")
    rows = fetch(sql, [ctx.now, HALF_LIFE_DAYS, *visible_params, ctx.limit])
    result.candidates = [(kid, float(score)) for kid, score in rows]
    return result
