"""entity_match: statements that mention the names in the query.

Names and role descriptions in ``ctx.query`` (see
:func:`retrieval.entities.extract_all_mentions`, with peer aliases resolved) select
entities of the authorised scopes, each with the names a model linked to it in its scope
(retrieval.entity_resolution); their mentions select knowledge,
restricted inside the SQL to ``visible_knowledge(reader=ctx.reader,
scope_ids=ctx.scope_ids, at=ctx.now)``. A statement scores the sum, over the matched
entities it mentions, of its strongest mention confidence times the entity's idf
``ln(1 + N / df)``, where N is the number of visible statements in those scopes and df
the number of them mentioning the entity: rarer names count more. Entities mentioned by
more than ``max(5, 30% of N)`` visible statements are corpus-wide and ignored. Each entity
contributes at most its POOL strongest visible mentions (see POOL).

Entity rows never leave retrieval: only knowledge ids and scores are returned. Document
frequencies count visible statements only, so a score reveals nothing about hidden ones.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from memhouse.core.db_router import read_connection
from retrieval.entities import extract_all_mentions, peer_alias_map, resolve_mentions
from retrieval.strategies.base import StrategyContext, StrategyResult
from retrieval.strategies.sql import plan_without, visible_count, visible_ids_sql

NAME = "entity_match"
# An entity mentioned by more than max(CORPUS_WIDE_MIN, CORPUS_WIDE_SHARE * N) visible
# statements says nothing about which statement is meant.
CORPUS_WIDE_MIN = 5
CORPUS_WIDE_SHARE = 0.3
# Mentions per entity (strongest first) that enter ranking, so one name found in a
# hundred thousand statements cannot turn a search into a scan of them. Below it (any
# conversation-sized scope) df is exact; above it df counts the pooled mentions, a lower
# bound, and such an entity only ranks its strongest POOL mentions.
POOL = 1000
# Of mentions equally strong, those of the smallest statement ids enter the pool, so the
# pool (and so df and every score) never depends on the plan or on where rows lie.
# km's LATERAL must walk entity_mention_strongest (entity, confidence DESC, knowledge)
# and stop at POOL visible mentions. Planned with the average mentions per entity (~1.7k
# at 100k statements) it expects fewer than POOL and reads every mention of the entity
# with a bitmap scan, checks each one's visibility, then sorts: for a name in 12k
# statements 24k visibility probes, ~170 ms; walking the index, 2k probes, ~10 ms
# (EXPLAIN, bench/README.md "Search at 100k and 1M"). Without bitmap scans the walk is
# the plan.
_PLAN_WITHOUT = ("bitmapscan",)


def query_keys(ctx: StrategyContext) -> dict[str, float]:
    """The resolved keys of the names in the query (internal), with their confidence."""
    mentions = extract_all_mentions(ctx.query)
    if not mentions:
        return {}
    aliases = peer_alias_map(ctx.reader.account_id)
    keys: dict[str, float] = {}
    for m in resolve_mentions(mentions, aliases):
        keys[m.key] = max(keys.get(m.key, 0.0), m.confidence)
    return keys


# Shared CTEs: `vis` the visible statements, `n` their number, `named` the groups (see
# retrieval.entity_resolution: an entity and the names a model linked to it, in one scope)
# of the entities of the authorised scopes with the wanted keys, `members` their entities,
# `km` the strongest mention per (visible statement, group) capped at POOL per entity,
# `ok` the wanted groups that are not corpus-wide, with their document frequency. A group
# is named by its canonical key, so without links it is exactly the wanted key.
_CTES = """
WITH vis AS NOT MATERIALIZED ({visible}),
n AS (SELECT %s::float AS n),
named AS (
    SELECT DISTINCT e.scope_id, coalesce(c.canonical, e.canonical) AS grp
    FROM memhouse_entity e
    LEFT JOIN memhouse_entity_link l ON l.entity_id = e.id
    LEFT JOIN memhouse_entity c ON c.id = l.canonical_id
    WHERE e.account_id = %s
      AND e.scope_id = ANY(%s::uuid[])
      AND e.canonical IN ({keys})
),
members AS (
    SELECT e.id, nm.grp FROM named nm
    JOIN memhouse_entity e
      ON e.account_id = %s AND e.scope_id = nm.scope_id AND e.canonical = nm.grp
    UNION
    SELECT l.entity_id, nm.grp FROM named nm
    JOIN memhouse_entity c
      ON c.account_id = %s AND c.scope_id = nm.scope_id AND c.canonical = nm.grp
    JOIN memhouse_entity_link l ON l.canonical_id = c.id
),
km AS (
    SELECT p.knowledge_id, m.grp AS canonical, max(p.conf) AS conf
    FROM members m
    CROSS JOIN LATERAL (
        SELECT em.knowledge_id, em.confidence AS conf
        FROM memhouse_entity_mention em
        WHERE em.entity_id = m.id AND em.account_id = %s
          AND em.knowledge_id IN (SELECT id FROM vis)
        ORDER BY em.confidence DESC, em.knowledge_id
        LIMIT {pool}
    ) p
    GROUP BY p.knowledge_id, m.grp
),
ok AS (
    SELECT km.canonical, count(*)::float AS df
    FROM km
    GROUP BY km.canonical
    HAVING count(*) <= greatest(%s, %s * (SELECT n FROM n))
)
"""


def _ctes(ctx: StrategyContext, keys_sql: str, keys_params: Sequence[Any]
          ) -> tuple[str, list[Any]]:
    visible, vparams = visible_ids_sql(ctx)
    account = str(ctx.reader.account_id)
    sql = _CTES.format(visible=visible, keys=keys_sql, pool=int(POOL))
    params = [*vparams, visible_count(ctx), account, [str(s) for s in ctx.scope_ids],
              *keys_params, account, account, account, CORPUS_WIDE_MIN, CORPUS_WIDE_SHARE]
    return sql, params


def run(ctx: StrategyContext) -> StrategyResult:
    result = StrategyResult(name=NAME)
    keys = query_keys(ctx)
    if not keys:
        result.applicable = False
        result.reason = "applicability"
        return result
    if not ctx.scope_ids or ctx.limit <= 0:
        return result
    ctes, params = _ctes(ctx, ", ".join(["%s"] * len(keys)), sorted(keys))
    sql = ctes + """
SELECT km.knowledge_id, sum(km.conf * ln(1 + (SELECT n FROM n) / ok.df)) AS score,
       count(*) AS matched
FROM km JOIN ok ON ok.canonical = km.canonical
GROUP BY km.knowledge_id
ORDER BY score DESC, km.knowledge_id
LIMIT %s
"""
    with plan_without(*_PLAN_WITHOUT), read_connection().cursor() as cur:
        cur.execute(sql, [*params, ctx.limit])
        rows = cur.fetchall()
    for kid, score, matched in rows:
        result.candidates.append((str(kid), float(score)))
        result.details[str(kid)] = {"matched_entities": int(matched)}
    return result


def shared_entity_neighbours(ctx: StrategyContext, seed_ids: Sequence[str], *,
                             per_seed_cap: int = 3) -> list[tuple[str, float, str]]:
    """Visible statements sharing a non-corpus-wide entity with a seed, for relation
    expansion: ``(neighbour id, score, seed id)``, at most `per_seed_cap` per seed, best
    first within each seed and seeds in the order given. Seeds are never neighbours.

    Both endpoints must be visible to the reader in ``ctx.scope_ids``: a seed outside the
    authorised scopes (or hidden from the reader) contributes nothing, and a neighbour in
    a linked scope is reached only when that scope is authorised too. A neighbour scores
    the sum over the shared entities of seed confidence x neighbour confidence x idf.
    """
    seeds: list[uuid.UUID] = []
    for s in seed_ids:
        try:
            seeds.append(uuid.UUID(str(s)))
        except ValueError:
            continue
    seeds = list(dict.fromkeys(seeds))
    if not seeds or not ctx.scope_ids or per_seed_cap <= 0:
        return []
    seed_array = [str(s) for s in seeds]
    # Keys mentioned by the seeds in the authorised scopes; km's visibility join then
    # drops any seed the reader may not see.
    keys_sql = """
        SELECT e2.canonical FROM memhouse_entity e2
        JOIN memhouse_entity_mention em2 ON em2.entity_id = e2.id
        WHERE e2.account_id = %s AND em2.knowledge_id = ANY(%s::uuid[])
          AND e2.scope_id = ANY(%s::uuid[])
    """
    keys_params = [str(ctx.reader.account_id), seed_array, [str(s) for s in ctx.scope_ids]]
    ctes, params = _ctes(ctx, keys_sql, keys_params)
    sql = ctes + """,
s AS (SELECT km.knowledge_id AS seed_id, km.canonical, km.conf
      FROM km WHERE km.knowledge_id = ANY(%s::uuid[])),
pairs AS (
    SELECT nb.knowledge_id AS nb_id, s.seed_id,
           sum(s.conf * nb.conf * ln(1 + (SELECT n FROM n) / ok.df)) AS score
    FROM s
    JOIN ok ON ok.canonical = s.canonical
    JOIN km nb ON nb.canonical = s.canonical
    WHERE NOT (nb.knowledge_id = ANY(%s::uuid[]))
    GROUP BY nb.knowledge_id, s.seed_id
),
ranked AS (
    SELECT nb_id, score, seed_id,
           row_number() OVER (PARTITION BY seed_id ORDER BY score DESC, nb_id) AS rn
    FROM pairs
)
SELECT nb_id, score, seed_id FROM ranked WHERE rn <= %s
"""
    with plan_without(*_PLAN_WITHOUT), read_connection().cursor() as cur:
        cur.execute(sql, [*params, seed_array, seed_array, per_seed_cap])
        rows = cur.fetchall()
    order = {s: i for i, s in enumerate(seeds)}
    rows.sort(key=lambda r: (order[r[2]], -float(r[1]), str(r[0])))
    return [(str(nb), float(score), str(seed)) for nb, score, seed in rows]
