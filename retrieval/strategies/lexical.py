"""Lexical: PostgreSQL full text over statements, analysed by lexical-question-v2.

Plain questions match statements sharing any kept term, ranked by how many terms they
cover, then by cover density (ts_rank_cd, which rewards terms close together); a bounded
proximity bonus then lifts head statements that place two terms within eight words.
Websearch operators switch to websearch_to_tsquery, where every bare term must appear.
"""

from __future__ import annotations

from typing import Any

from retrieval.lexical import POSTGRES_ENGLISH_STOPWORDS, apply_proximity_bonus
from retrieval.strategies.base import StrategyContext, StrategyResult
from retrieval.strategies.sql import fetch, visible_count, visible_ids_sql

NAME = "lexical"
PROXIMITY_HEAD = 20
# Candidate rows per term (and for all terms together) before ranking; see _rank_any.
POOL = 1000
_TERM = "\x00memhouse-lexical-term\x00"  # stands for each term in the compiled pool query


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


def _rank_any(ctx: StrategyContext, operands: list[str]) -> list[tuple[Any, ...]]:
    """Any-term matches ranked by idf-weighted coverage, then cover density.

    Coverage weighs each term by ``ln(1 + N / df)`` (N visible statements in these
    scopes, df the visible ones containing the term), normalised by the weight of the
    terms that occur at all: a speaker's name found in most of a conversation's
    statements counts for little next to the rare word the question is about. Stop
    words (empty tsquery) and absent terms have df 0 and weigh nothing.

    The candidates are bounded so a common term cannot turn one search into a scan of
    the Account: the statements holding every term and, unless those already fill the
    list, per term its visible statements, each list cut at POOL rows. Below POOL
    matches per term (any conversation-sized scope) this is every match and df is
    exact; above it, df counts the rows pooled, a lower bound, so a very common term's
    small weight is overstated a little, never a rare term's.
    """
    # Stop words match nothing (empty tsquery): no pool, and they weigh nothing anyway.
    operands = [t for t in operands if t.lower() not in POSTGRES_ENGLISH_STOPWORDS]
    if not operands:
        return []
    # A LIMIT tempts the planner into a sequential scan that "will find POOL rows soon",
    # which for a rare or absent term reads the whole Account; the GIN index answers
    # either case at once. SET LOCAL ends with this strategy's own transaction.
    fetch("SET LOCAL enable_seqscan = off", [])
    match = "search_vector @@ to_tsquery('english', %s)"
    every_sql, every_params = visible_ids_sql(ctx, where=match,
                                              where_params=[" & ".join(operands)],
                                              limit=POOL)
    every = [str(r[0]) for r in fetch(every_sql, every_params)]
    # Enough statements hold every term to fill the list: full coverage ranks them above
    # any partial match, so the per-term pools would only cost time.
    pool_sql = "SELECT unnest(%s::uuid[]) AS id"
    pool_params: list[Any] = [every]
    if len(every) < ctx.limit:
        # One compiled pool query, its term swapped per operand (a term is a parameter).
        term_sql, term_params = visible_ids_sql(ctx, where=match, where_params=[_TERM],
                                                limit=POOL)
        pool_sql += f" UNION ({term_sql})" * len(operands)
        pool_params += [t if p == _TERM else p for t in operands for p in term_params]
    # The pooled rows are read by primary key (an array, so the planner expects a few):
    # as `IN (SELECT ...)` it guessed ~3k rows and hashed them against a scan of every
    # row of the Account (100k at scale, ~60 ms, once per parallel worker).
    hits = ", ".join(f"(k.search_vector @@ to_tsquery('english', %s))::int AS h{i}"
                     for i in range(len(operands)))
    dfs = ", ".join(f"sum(m.h{i})::float AS d{i}" for i in range(len(operands)))
    idf = [f"(CASE WHEN d.d{i} > 0 THEN ln(1 + d.n / d.d{i}) ELSE 0 END)"
           for i in range(len(operands))]
    weighted = " + ".join(f"m.h{i} * {w}" for i, w in enumerate(idf))
    total = " + ".join(idf)
    sql = (f"WITH pool AS ({pool_sql}), "
           f"m AS MATERIALIZED (SELECT k.id, k.statement, "
           f"ts_rank_cd(k.search_vector, to_tsquery('english', %s), 1) AS cd, {hits} "
           f"FROM memhouse_knowledge k WHERE k.id = ANY(ARRAY(SELECT id FROM pool))), "
           f"d AS (SELECT greatest(%s::float, count(*)) AS n, {dfs} FROM m) "
           f"SELECT m.id::text, ({weighted}) / greatest(1e-9, {total}) + m.cd AS score, "
           f"m.statement FROM m, d ORDER BY score DESC, m.id LIMIT %s")
    params = [*pool_params, ctx.lexical.tsquery, *operands, visible_count(ctx), ctx.limit]
    return fetch(sql, params)


def run(ctx: StrategyContext) -> StrategyResult:
    result = StrategyResult(NAME)
    lex = ctx.lexical
    if lex.is_empty:
        result.applicable, result.reason = False, "applicability"
        return result
    q = _tsquery_sql(ctx)
    operands = [t for t in lex.tsquery.split(" | ") if t] if lex.mode == "any" else []
    if operands:
        rows = _rank_any(ctx, operands)
    else:
        visible_sql, visible_params = visible_ids_sql(ctx)
        sql = (f"SELECT k.id::text, 1.0 + ts_rank_cd(k.search_vector, {q}, 1) AS score, "
               f"k.statement FROM memhouse_knowledge k WHERE k.id IN ({visible_sql}) "
               f"AND k.search_vector @@ {q} ORDER BY score DESC, k.id LIMIT %s")
        rows = fetch(sql, [lex.tsquery, *visible_params, lex.tsquery, ctx.limit])
    ranked = [(str(kid), float(score), str(statement)) for kid, score, statement in rows]
    result.candidates = apply_proximity_bonus(ranked, lex.terms, head=PROXIMITY_HEAD)
    if not result.candidates and authorization_filtered(ctx):
        result.flags.add("authorization_filtered")
    return result
