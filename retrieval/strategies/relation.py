"""Relation expansion: one hop from the head of the interleaved seed lists, along typed
knowledge relations and shared (non-corpus-wide) entities. Both endpoints must be in the
reader's authorised scopes; a link never grants access, it only follows it."""

from __future__ import annotations

from retrieval.strategies.base import StrategyContext, StrategyResult
from retrieval.strategies.sql import fetch, visible_ids_sql

NAME = "relation_expand"
PER_SEED_CAP = 3


def run(ctx: StrategyContext) -> StrategyResult:
    result = StrategyResult(NAME)
    if not ctx.seeds:
        result.applicable, result.reason = False, "applicability"
        return result
    seeds = list(ctx.seeds)
    seed_rank = {s: i for i, s in enumerate(seeds)}
    visible_sql, visible_params = visible_ids_sql(ctx)
    rows = fetch(
        "SELECT seed::text, other::text, confidence FROM ("
        "  SELECT r.source_id AS seed, r.target_id AS other, r.confidence FROM memhouse_relation r"
        "   WHERE r.source_id = ANY(%s::uuid[])"
        "  UNION ALL"
        "  SELECT r.target_id, r.source_id, r.confidence FROM memhouse_relation r"
        "   WHERE r.target_id = ANY(%s::uuid[])) e "
        f"WHERE e.other IN ({visible_sql}) "
        "ORDER BY seed, confidence DESC, other",
        [seeds, seeds, *visible_params])
    scores: dict[str, float] = {}
    per_seed: dict[str, int] = {}
    neighbours = [(seed, other, float(conf), "relation") for seed, other, conf in rows]
    try:
        from retrieval.strategies.entity_match import shared_entity_neighbours

        neighbours += [(seed, other, float(score), "entity") for other, score, seed in
                       shared_entity_neighbours(ctx, seeds, per_seed_cap=PER_SEED_CAP)]
    except ImportError:  # the entity index is optional
        pass
    for seed, other, weight, via in neighbours:
        if per_seed.get(seed, 0) >= PER_SEED_CAP:
            continue
        per_seed[seed] = per_seed.get(seed, 0) + 1
        score = weight / (1.0 + seed_rank.get(seed, len(seeds)))
        if score > scores.get(other, -1.0):
            scores[other] = score
            result.details[other] = {"via": via}
    result.candidates = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[: ctx.limit]
    return result
