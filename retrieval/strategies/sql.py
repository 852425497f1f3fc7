"""Helpers for strategies that write SQL around the reader-visibility queryset."""

from __future__ import annotations

from typing import Any

from django.db import connection

from knowledge.selectors import visible_knowledge
from retrieval.strategies.base import StrategyContext


def visible_ids_sql(ctx: StrategyContext, **filters: Any) -> tuple[str, tuple[Any, ...]]:
    """`SELECT id FROM knowledge WHERE <every visibility filter>` as SQL + params."""
    qs = visible_knowledge(reader=ctx.reader, scope_ids=ctx.scope_ids, at=ctx.now)
    if filters:
        qs = qs.filter(**filters)
    sql, params = qs.values("id").query.sql_with_params()
    return sql, tuple(params)


def fetch(sql: str, params: tuple[Any, ...] | list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())
