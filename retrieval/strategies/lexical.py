"""Lexical: PostgreSQL full text over statements, analysed by lexical-question-v2.

Plain questions match statements sharing any kept term, ranked by how many terms they
cover, then by cover density (ts_rank_cd, which rewards terms close together); a bounded
proximity bonus then lifts head statements that place two terms within eight words.
Websearch operators switch to websearch_to_tsquery, where every bare term must appear.
"""

from __future__ import annotations

from retrieval.lexical import apply_proximity_bonus
from retrieval.strategies.base import StrategyContext, StrategyResult
from retrieval.strategies.sql import fetch, visible_ids_sql

NAME = "lexical"
PROXIMITY_HEAD = 20


def _tsquery_sql(ctx: StrategyContext) -> str:
    fn = "websearch_to_tsquery" if ctx.lexical.mode == "websearch" else "to_tsquery"
    return f"{fn}('english', %s)"


def authorization_filtered(ctx: StrategyContext) -> bool:
    """Do active rows in these scopes match, although none is visible to this reader?
    Only the boolean leaves this function: no ids, text, scores or counts."""
    q = _tsquery_sql(ctx)
    rows = fetch(
        f"SELECT EXISTS (SELECT 1 FROM memhouse_knowledge k WHERE k.state = 'active' "
        f"AND k.scope_id = ANY(%s) AND (k.expires_at IS NULL OR k.expires_at > %s) "
        f"AND k.search_vector @@ {q})",
        [list(ctx.scope_ids), ctx.now, ctx.lexical.tsquery])
    return bool(rows and rows[0][0])


def run(ctx: StrategyContext) -> StrategyResult:
    result = StrategyResult(NAME)
    lex = ctx.lexical
    if lex.is_empty:
        result.applicable, result.reason = False, "applicability"
        return result
    visible_sql, visible_params = visible_ids_sql(ctx)
    q = _tsquery_sql(ctx)
    params: list[object] = []
    if lex.mode == "any":
        operands = [t for t in lex.tsquery.split(" | ") if t]
        coverage = " + ".join(["(k.search_vector @@ to_tsquery('english', %s))::int"]
                              * len(operands)) or "0"
        params += operands
        # Terms that are English stop words match nothing; they do not count as missed.
        coverage_sql = (f"({coverage})::float / GREATEST(1, (SELECT count(*) FROM "
                        f"unnest(%s::text[]) t WHERE numnode(to_tsquery('english', t)) > 0))")
        params.append(operands)
    else:
        coverage_sql = "1.0"
    sql = (f"SELECT k.id::text, {coverage_sql} + ts_rank_cd(k.search_vector, {q}, 1) AS score, "
           f"k.statement FROM memhouse_knowledge k WHERE k.id IN ({visible_sql}) "
           f"AND k.search_vector @@ {q} ORDER BY score DESC, k.id LIMIT %s")
    params = [*params, lex.tsquery, *visible_params, lex.tsquery, ctx.limit]
    rows = fetch(sql, params)
    ranked = [(kid, float(score), statement) for kid, score, statement in rows]
    result.candidates = apply_proximity_bonus(ranked, lex.terms, head=PROXIMITY_HEAD)
    if not result.candidates and authorization_filtered(ctx):
        result.flags.add("authorization_filtered")
    return result
