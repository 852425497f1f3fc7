"""Relation expansion: one hop from the head of the interleaved seed lists, along typed
knowledge relations and shared (non-corpus-wide) entities. Both endpoints must be in the
reader's authorised scopes; a link never grants access, it only follows it.

Across scopes the hop needs a scope relation (knowledge.scope_relations) between the
seed's own scope and the other scope, authorised twice: the reader's grants must reach
both endpoint scopes, and the neighbour must pass every visibility filter there. Each seed
draws at most PER_SEED_CAP neighbours from the read's scopes and at most
LINKED_PER_SEED_CAP from linked scopes (all links together)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from knowledge.scope_relations import linked_scopes
from retrieval.strategies.base import StrategyContext, StrategyResult
from retrieval.strategies.sql import fetch, visible_ids_sql

NAME = "relation_expand"
PER_SEED_CAP = 3
LINKED_PER_SEED_CAP = 2
# Shared-entity neighbours fetched per seed and link before keeping the linked scope's:
# the origin scope's own neighbours come back too and must not crowd them out unbounded.
LINKED_ENTITY_FETCH = 4 * PER_SEED_CAP

Neighbour = tuple[str, str, float, str]  # (seed, neighbour, weight, via)


def _relation_rows(seeds: list[str], visible_sql: str, visible_params: tuple[Any, ...]
                   ) -> list[tuple[Any, ...]]:
    """(seed, other, confidence) for typed relations from a seed to a statement in
    `visible_sql`, best first per seed."""
    return fetch(
        "SELECT seed::text, other::text, confidence FROM ("
        "  SELECT r.source_id AS seed, r.target_id AS other, r.confidence FROM memhouse_relation r"
        "   WHERE r.source_id = ANY(%s::uuid[])"
        "  UNION ALL"
        "  SELECT r.target_id, r.source_id, r.confidence FROM memhouse_relation r"
        "   WHERE r.target_id = ANY(%s::uuid[])) e "
        f"WHERE e.other IN ({visible_sql}) "
        "ORDER BY seed, confidence DESC, other",
        [seeds, seeds, *visible_params])


def linked_neighbours(ctx: StrategyContext, seeds: list[str]) -> list[Neighbour]:
    """Neighbours in scopes linked to a seed's own scope, for links whose both endpoint
    scopes the reader may read (knowledge.scope_relations.linked_scopes). A seed must be
    visible in the read's scopes; a neighbour must be visible in the linked scope."""
    links = linked_scopes(reader=ctx.reader, scope_ids=ctx.scope_ids)
    if not links or not seeds:
        return []
    visible_sql, visible_params = visible_ids_sql(ctx)
    seed_scope: dict[str, uuid.UUID] = {
        str(kid): scope_id for kid, scope_id in fetch(
            "SELECT id, scope_id FROM memhouse_knowledge WHERE id = ANY(%s::uuid[]) "
            f"AND id IN ({visible_sql})", [seeds, *visible_params])}
    out: list[Neighbour] = []
    for link in links:
        origin_seeds = [s for s in seeds if seed_scope.get(s) == link.origin]
        if not origin_seeds:
            continue
        there_sql, there_params = visible_ids_sql(replace(ctx, scope_ids=(link.linked,)))
        out += [(seed, other, float(conf), "linked_relation")
                for seed, other, conf in _relation_rows(origin_seeds, there_sql, there_params)]
        try:
            from retrieval.strategies.entity_match import shared_entity_neighbours
        except ImportError:  # the entity index is optional
            continue
        both = replace(ctx, scope_ids=(link.origin, link.linked))
        found = shared_entity_neighbours(both, origin_seeds, per_seed_cap=LINKED_ENTITY_FETCH)
        if not found:
            continue
        in_linked = {str(k) for (k,) in fetch(
            f"SELECT id FROM ({there_sql}) v WHERE v.id = ANY(%s::uuid[])",
            [*there_params, [n for n, _, _ in found]])}
        out += [(seed, other, float(score), "linked_entity")
                for other, score, seed in found if other in in_linked]
    return out


def run(ctx: StrategyContext) -> StrategyResult:
    result = StrategyResult(NAME)
    if not ctx.seeds:
        result.applicable, result.reason = False, "applicability"
        return result
    seeds = list(ctx.seeds)
    seed_rank = {s: i for i, s in enumerate(seeds)}
    visible_sql, visible_params = visible_ids_sql(ctx)
    rows = _relation_rows(seeds, visible_sql, visible_params)
    scores: dict[str, float] = {}
    neighbours = [(seed, other, float(conf), "relation") for seed, other, conf in rows]
    try:
        from retrieval.strategies.entity_match import shared_entity_neighbours

        neighbours += [(seed, other, float(score), "entity") for other, score, seed in
                       shared_entity_neighbours(ctx, seeds, per_seed_cap=PER_SEED_CAP)]
    except ImportError:  # the entity index is optional
        pass

    def take(found: list[Neighbour], cap: int) -> None:
        per_seed: dict[str, int] = {}
        for seed, other, weight, via in found:
            if per_seed.get(seed, 0) >= cap:
                continue
            per_seed[seed] = per_seed.get(seed, 0) + 1
            score = weight / (1.0 + seed_rank.get(seed, len(seeds)))
            if score > scores.get(other, -1.0):
                scores[other] = score
                result.details[other] = {"via": via}

    take(neighbours, PER_SEED_CAP)
    take(linked_neighbours(ctx, seeds), LINKED_PER_SEED_CAP)
    result.candidates = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[: ctx.limit]
    return result
