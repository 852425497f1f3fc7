"""Helpers for strategies that write SQL around the reader-visibility queryset."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from knowledge.selectors import visible_knowledge
from memhouse.core.db_router import read_connection
from retrieval.strategies.base import StrategyContext

# One search compiles the same visibility filter again and again (each strategy and
# lane, lexical once per term): ~0.3-1 ms of Django each time, a fifth of a search's
# Python at 100k statements. The SQL depends only on what the key holds (visible_knowledge
# reads the reader's Account, posture and peer; the scope roots are in the key too, so a
# reader that differs in any of them never shares an entry), so it is compiled once per
# search: `now` is the search's own instant.
_SQL_CACHE: OrderedDict[tuple[Any, ...], tuple[str, tuple[Any, ...]]] = OrderedDict()
_SQL_CACHE_LOCK = threading.Lock()
_SQL_CACHE_MAX = 512


def visible_ids_sql(ctx: StrategyContext, *, where: str | None = None,
                    where_params: Sequence[Any] = (), limit: int | None = None,
                    **filters: Any) -> tuple[str, tuple[Any, ...]]:
    """`SELECT id FROM knowledge WHERE <every visibility filter> [AND where] [LIMIT]` as
    SQL + params. `where` is raw SQL on the same row (columns of memhouse_knowledge)."""
    if filters:
        return _visible_ids_sql(ctx, where, where_params, limit, filters)
    r = ctx.reader
    key = (r.account_id, r.posture, r.peer_id, r.scope_roots, tuple(ctx.scope_ids), ctx.now,
           where, tuple(where_params), limit)
    with _SQL_CACHE_LOCK:
        hit = _SQL_CACHE.get(key)
        if hit is not None:
            _SQL_CACHE.move_to_end(key)
            return hit
    built = _visible_ids_sql(ctx, where, where_params, limit, {})
    with _SQL_CACHE_LOCK:
        _SQL_CACHE[key] = built
        while len(_SQL_CACHE) > _SQL_CACHE_MAX:
            _SQL_CACHE.popitem(last=False)
    return built


def _visible_ids_sql(ctx: StrategyContext, where: str | None, where_params: Sequence[Any],
                     limit: int | None, filters: dict[str, Any]
                     ) -> tuple[str, tuple[Any, ...]]:
    qs = visible_knowledge(reader=ctx.reader, scope_ids=ctx.scope_ids, at=ctx.now)
    if filters:
        qs = qs.filter(**filters)
    if where:
        qs = qs.filter(RawSQL(where, list(where_params), output_field=BooleanField()))
    if limit is not None:
        qs = qs[:limit]
    sql, params = qs.values("id").query.sql_with_params()
    return sql, tuple(params)


@contextmanager
def plan_without(*methods: str) -> Iterator[None]:
    """Statements in the block planned without these plan nodes (`enable_<method>` off),
    restored after it; only inside the strategy's transaction (set_config local).

    For a parameterised LATERAL the planner only has average statistics: it may guess an
    entity has fewer mentions than a LIMIT, so "read them all and sort" looks as cheap as
    walking an ordered index and stopping at the LIMIT (bench/README.md, "Search at
    100k and 1M")."""
    names = [f"enable_{m}" for m in methods]
    with read_connection().cursor() as cur:
        cur.execute("SELECT " + ", ".join(
            f"current_setting('{n}'), set_config('{n}', 'off', true)" for n in names))
        row = cur.fetchone()
    before = [row[2 * i] for i in range(len(names))]
    yield
    with read_connection().cursor() as cur:  # not reached on an error: the transaction is over
        cur.execute("SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(names)),
                    [v for pair in zip(names, before, strict=True) for v in pair])


def fetch(sql: str, params: tuple[Any, ...] | list[Any]) -> list[tuple[Any, ...]]:
    with read_connection().cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []


# N (visible statements in the read's scopes) changes slowly but costs a scan of every
# visible row; it is cached briefly per reader and scope set, and counted only up to
# COUNT_CAP: a search must never wait for (or, cancelled at its deadline, never finish)
# a count of a million rows. Above the cap N is a lower bound, which still orders terms
# by rarity. It counts this reader's visible rows only, so idf-weighted scores reveal
# nothing about hidden ones.
COUNT_CAP = 20000
_N_CACHE: dict[tuple[Any, ...], tuple[float, float]] = {}
_N_CACHE_LOCK = threading.Lock()
_N_CACHE_MAX = 4096


def visible_count(ctx: StrategyContext) -> float:
    """How many statements this reader sees in ctx.scope_ids (idf's N), at most
    COUNT_CAP, cached for MEMHOUSE_ENTITY_STATS_TTL seconds."""
    ttl = float(getattr(settings, "MEMHOUSE_ENTITY_STATS_TTL", 60))
    key = (ctx.reader.account_id, ctx.reader.posture, ctx.reader.peer_id,
           tuple(sorted(str(s) for s in ctx.scope_ids)))
    now = time.monotonic()
    with _N_CACHE_LOCK:
        hit = _N_CACHE.get(key)
    if hit is not None and hit[0] > now:
        return hit[1]
    visible, vparams = visible_ids_sql(ctx, limit=COUNT_CAP)
    n = float(fetch(f"SELECT count(*) FROM ({visible}) v", vparams)[0][0])
    if ttl > 0:
        with _N_CACHE_LOCK:
            if len(_N_CACHE) >= _N_CACHE_MAX:
                _N_CACHE.clear()
            _N_CACHE[key] = (now + ttl, n)
    return n
