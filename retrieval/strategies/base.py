"""The strategy interface. Each strategy is a plain function `run(ctx) -> StrategyResult`
executed by the engine on its own thread and database connection, inside a transaction
bound to the reader's Account with `statement_timeout` set to the time left.

A strategy applies every visibility filter inside its SQL (start from
`knowledge.selectors.visible_knowledge(reader=ctx.reader, scope_ids=ctx.scope_ids,
at=ctx.now)`), never filters in Python, and returns raw scores where higher is better
(convert distances).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from memhouse.core.principal import Reader
from retrieval.lexical import LexicalQuery


@dataclass(frozen=True)
class StrategyContext:
    reader: Reader
    scope_ids: tuple[uuid.UUID, ...]  # the read scope and its ancestors, authorised
    query: str
    lexical: LexicalQuery
    now: datetime
    limit: int
    as_of: datetime | None = None
    query_vector: tuple[float, ...] | None = None
    space_id: uuid.UUID | None = None
    # relation_expand only: the head of the interleaved seed lists, best first.
    seeds: tuple[str, ...] = ()
    # Evaluation-only knobs (never from external callers).
    options: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def vector_literal(self) -> str:
        """The query vector as pgvector text, formatted once per search: the semantic
        strategy's lanes each bind it (384 floats formatted is ~0.1 ms each time)."""
        return vector_literal(self.query_vector or ())


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{x:.7f}" for x in vector) + "]"


@dataclass
class StrategyResult:
    name: str
    candidates: list[tuple[str, float]] = field(default_factory=list)  # (knowledge id, raw)
    applicable: bool = True
    reason: str | None = None  # why not applicable, e.g. "applicability"
    details: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-candidate extras
    # A strategy's further ranked lists, fused beside its own under their own profile
    # weight (e.g. semantic's "semantic.source_turns"); dropped with the strategy.
    extra_lists: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    # Lanes that ran out of their own time (lane -> "timeout"); the strategy's own list
    # and its other lanes stand.
    lanes_dropped: dict[str, str] = field(default_factory=dict)
    # Content-free flags the engine turns into retrieval_outcomes (e.g. lexical terms
    # matched active rows that the reader may not see).
    flags: set[str] = field(default_factory=set)
