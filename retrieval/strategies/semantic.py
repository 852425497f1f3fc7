"""Semantic: approximate nearest neighbours in the query's own embedding space.

Only vectors of the query's space are read (the per-space partial HNSW index), and the
visibility filters sit inside the query; pgvector's iterative index scan keeps reading
the index until `limit` visible rows are found. An Account whose vectors all lie in
another space (the embedder changed, `manage.py reembed` not run yet) gets no silent
empty list: the strategy is not applicable with reason `needs_reembed`.

With `options["source_turns"]` (balanced) semantic also returns a second list, the
source-turn lane (SOURCE_TURNS): statements ranked by how close their *source message*
is to the query, where a message also inherits the similarity of the turn just before it
in its session. Extraction splits a turn into statements and drops what the turn only
answers: "I went to Woodhaven" answers "Where did you go for your research trip?", and
neither its statement nor its own text says "research trip", but the question turn
before it does. Fusion weighs the lane as its own list (`semantic.source_turns` in the
profile's weights); blended into the statement list it gains less than half as much
(bench/README.md, LoCoMo dev, cross-validated).

With `options["said_when"]` a question that names a time ("in July", "on 1 February,
2023", "last week": `knowledge.ingest.dates.named_times`) gets a third list, the said-when
lane (SAID_WHEN): the nearest visible messages said within that time, then their visible
statements scored by their best such message. Extraction moves "yesterday" out of the
statement into valid time, and most statements have no valid time at all, so the time a
question names is matched against when their source was said. Temporal still runs only
with `as_of` (the seed): this lane ranks by similarity to the question, the named time
only bounds which messages it reads.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from django.db import OperationalError, transaction

from knowledge.ingest.dates import named_times
from memhouse.core.db_router import read_connection
from retrieval.lineage import visible_messages
from retrieval.strategies.base import StrategyContext, StrategyResult
from retrieval.strategies.sql import fetch, plan_without, visible_ids_sql

NAME = "semantic"
SOURCE_TURNS = "semantic.source_turns"
SAID_WHEN = "semantic.said_when"
# Extractors of derived memory: the minimal profile's second lane (retrieval.recall).
DERIVED_EXTRACTORS = ("deduction", "consolidation")


def _search(ctx: StrategyContext, limit: int) -> list[tuple[str, float]]:
    dims = len(ctx.query_vector or ())
    visible_sql, visible_params = visible_ids_sql(ctx)
    vector = ctx.vector_literal
    sql = (f"SELECT v.knowledge_id::text, (v.embedding::vector({dims})) <=> %s::vector({dims}) "
           f"AS distance FROM memhouse_knowledge_vector v WHERE v.space_id = %s "
           f"AND v.knowledge_id IN ({visible_sql}) ORDER BY distance LIMIT %s")
    rows = fetch(sql, [vector, str(ctx.space_id), *visible_params, limit])
    # relaxed_order may return near-sorted rows; order exactly within this one list.
    return sorted(((kid, float(d)) for kid, d in rows), key=lambda r: (r[1], r[0]))


def _search_recall(ctx: StrategyContext, limit: int, lane: str) -> list[tuple[str, float]]:
    """One lane of the minimal profile, read from RecallDocument (retrieval.recall): the
    copy joins canonical Knowledge, every reader filter applies there, and a copy whose
    watermark is not the statement's current `updated_at` is never served."""
    dims = len(ctx.query_vector or ())
    visible_sql, visible_params = visible_ids_sql(ctx)
    vector = ctx.vector_literal
    sql = (f"SELECT d.knowledge_id::text, (d.embedding::vector({dims})) <=> %s::vector({dims}) "
           f"AS distance FROM memhouse_recall_document d "
           f"JOIN memhouse_knowledge k ON k.id = d.knowledge_id "
           f"WHERE d.account_id = %s AND d.space_id = %s AND d.lane = %s "
           f"AND d.source_updated_at = k.updated_at AND d.knowledge_id IN ({visible_sql}) "
           f"ORDER BY distance LIMIT %s")
    rows = fetch(sql, [vector, str(ctx.reader.account_id), str(ctx.space_id), lane,
                       *visible_params, limit])
    return sorted(((kid, float(d)) for kid, d in rows), key=lambda r: (r[1], r[0]))


# A reader other than internal may not see every message of the scope, and deciding
# which (lineage.visible_messages) checks every statement derived from a message: for a
# whole scope that grows with the scope (~75 ms at 7k messages, bench/README.md). So the
# lanes read the nearest messages of the scope first and decide visibility for those
# only: CANDIDATE_FIRST times `limit` in the first round (most messages are usually
# visible), CANDIDATE_FACTOR times more each further round until `limit` visible ones
# are found. A filtered scan (the said-when lane's time) pays for every candidate it
# reads: at 1M messages one of a month of a given year took ~200 ms for 4x `limit`
# candidates, ~110 ms for 2x (EXPLAIN ANALYZE, bench/README.md).
CANDIDATE_FIRST = 2
CANDIDATE_FACTOR = 4
# A lane is an extra list: it must never cost semantic its own. A lane runs in a
# savepoint; each of its statements runs under this statement_timeout, and none runs
# past the search's deadline (less LANE_END_MARGIN_MS): a statement whose timeout would
# let it end later (by more than LANE_SLACK_MS) first gets the time that is left, and
# none starts after it; a lane with less than LANE_MIN_MS left is dropped unread. A lane
# that overruns is cancelled and dropped alone (reported in the search's
# retrieval_outcomes) while semantic's own list still arrives before the deadline.
LANE_STATEMENT_MS = 150
LANE_END_MARGIN_MS = 20
LANE_MIN_MS = 10
LANE_SLACK_MS = 25

# A turn lends to the next turn of its session the reader may see, looking this many
# turns ahead (hidden ones in between are skipped, never lent to).
LEND_WINDOW = 5


class _LaneOut(Exception):
    """A lane's time ran out between two of its statements."""


@dataclass(frozen=True)
class Said:
    """When a message was said, as SQL on its vector's own row (mv) with its parameters.
    `exact`: read every message of the time and sort them by distance, not the HNSW walk
    (see EXACT_MAX)."""

    sql: str
    params: list[Any]
    exact: bool = False


# A time of at most this many messages (a day, a week, a month at 100k statements) is
# read whole in time order through (account, space, said_at) and sorted by distance; a
# longer one (a year; a month at 1M) by walking the HNSW index with the time as a filter.
# The walk computes ~32 distances per message it passes, the whole read one per message
# in the time, so the walk wins only when the time holds a large share of the messages;
# the planner, costing the walk too low, chose it for a month of 2.8k of 67k messages:
# 2.1k messages passed, 11k buffers, against 800 for reading the month (EXPLAIN,
# bench/README.md). A month of any year is always walked (one message in twelve).
EXACT_MAX = 10_000
# Exactly the expression migration retrieval 0012 keeps statistics on (UTC, as Django's
# `__month` on the message was): without them PostgreSQL guesses 0.5% of rows per month
# where 1/12 match, and sorts a whole month by distance instead of walking the index.
SAID_MONTH = "EXTRACT(MONTH FROM mv.said_at AT TIME ZONE 'UTC')"


def _ann_messages(ctx: StrategyContext, limit: int, said: Said | None = None
                  ) -> list[tuple[Any, float]]:
    """(message id, cosine similarity) of the `limit` messages of the reader's Account in
    the read's scopes (lineage.messages_in_scope, visible or not), and with `said` said
    within it, nearest to the query in its space, nearest first. Scope and time are read
    from the vector's own row (MessageVector.scope, said_at: a message never changes)."""
    dims = len(ctx.query_vector or ())
    vector = ctx.vector_literal
    said_sql, said_params = (f" AND ({said.sql})", said.params) if said else ("", [])
    # The distance is selected once and ordered by: a second expression over the
    # embedding would make a sort (a short window read in time order) carry every
    # candidate's vector.
    sql = (f"SELECT mv.message_id, (mv.embedding::vector({dims})) <=> %s::vector({dims}) "
           f"AS distance FROM memhouse_message_vector mv WHERE mv.space_id = %s "
           f"AND mv.account_id = %s AND mv.scope_id = ANY(%s::uuid[]){said_sql} "
           f"ORDER BY distance LIMIT %s")
    params = [vector, str(ctx.space_id), str(ctx.reader.account_id),
              [str(s) for s in ctx.scope_ids], *said_params, limit]
    # No index scan leaves the (account, space, said_at) bitmap scan and a sort.
    with plan_without("indexscan") if said is not None and said.exact else nullcontext():
        rows = fetch(sql, params)
    return [(mid, 1 - float(distance)) for mid, distance in rows]


def _messages_within(ctx: StrategyContext, windows: Sequence[tuple[Any, Any]],
                     cap: int) -> int:
    """How many message vectors of the Account and space were said within `windows`,
    counted up to `cap` (the read's scopes are not tested: an upper bound)."""
    within = " OR ".join(["(said_at >= %s AND said_at < %s)"] * len(windows))
    rows = fetch(f"SELECT count(*) FROM (SELECT 1 FROM memhouse_message_vector "
                 f"WHERE account_id = %s AND space_id = %s AND ({within}) LIMIT %s) t",
                 [str(ctx.reader.account_id), str(ctx.space_id),
                  *(v for window in windows for v in window), cap])
    return int(rows[0][0])


_MESSAGES_SQL: OrderedDict[tuple[Any, ...], tuple[str, tuple[Any, ...]]] = OrderedDict()
_MESSAGES_SQL_LOCK = threading.Lock()


def _visible_messages_sql(ctx: StrategyContext) -> tuple[str, tuple[Any, ...]]:
    """lineage.visible_messages as SQL, compiled once per search (a search asks several
    times, ~2-4 ms of Django each for a peer reader; keyed as sql.visible_ids_sql)."""
    r = ctx.reader
    key = (r.account_id, r.posture, r.peer_id, r.scope_roots, tuple(ctx.scope_ids), ctx.now)
    with _MESSAGES_SQL_LOCK:
        hit = _MESSAGES_SQL.get(key)
        if hit is not None:
            _MESSAGES_SQL.move_to_end(key)
            return hit
    sql, params = (visible_messages(ctx.reader, ctx.scope_ids, at=ctx.now)
                   .values("id").query.sql_with_params())
    built = (sql, tuple(params))
    with _MESSAGES_SQL_LOCK:
        _MESSAGES_SQL[key] = built
        while len(_MESSAGES_SQL) > 128:
            _MESSAGES_SQL.popitem(last=False)
    return built


def _visible_ids(ctx: StrategyContext, ids: list[Any]) -> set[Any]:
    """Which of `ids` the reader may see: lineage.visible_messages, in SQL, for these
    messages only."""
    if not ids:
        return set()
    # Each id is looked up by primary key and tested: as `visible AND id IN (...)` the
    # planner also read the bitmaps of every message of the Account and of the scope
    # (66k each at 100k statements) to cut the rows it tests, ~5 ms per call.
    visible_sql, visible_params = _visible_messages_sql(ctx)
    rows = fetch(f"SELECT c.id FROM unnest(%s::uuid[]) AS c(id) "
                 f"WHERE EXISTS (SELECT 1 FROM ({visible_sql}) v WHERE v.id = c.id)",
                 [[str(i) for i in ids], *visible_params])
    return {row[0] for row in rows}


def _nearest_messages(ctx: StrategyContext, said: Said | None, limit: int
                      ) -> list[tuple[Any, float]]:
    """(message id, similarity) of the `limit` messages nearest to the query that the
    reader may see (and, with `said`, were said within it), nearest first."""
    if ctx.reader.posture == "internal":  # sees every message of its scopes
        return _ann_messages(ctx, limit, said)
    k = limit * CANDIDATE_FIRST
    while True:
        candidates = _ann_messages(ctx, k, said)
        visible = _visible_ids(ctx, [mid for mid, _ in candidates])
        hits = [(mid, sim) for mid, sim in candidates if mid in visible]
        if len(hits) >= limit or len(candidates) < k:
            return hits[:limit]
        k *= CANDIDATE_FACTOR


def _lent(ctx: StrategyContext, hits: list[tuple[Any, float]]) -> list[tuple[Any, float]]:
    """(next message, the hit's similarity) per hit: the first of the LEND_WINDOW messages
    after it in its session (arrival order) that the reader may see."""
    rows = fetch(
        "SELECT h.id, n.id FROM unnest(%s::uuid[]) AS h(id) "
        "JOIN memhouse_message m ON m.id = h.id CROSS JOIN LATERAL ("
        "SELECT v.id, v.occurred_at, v.inserted_at FROM memhouse_message v "
        "WHERE v.session_id = m.session_id AND v.account_id = m.account_id "
        "AND v.scope_id = ANY(%s::uuid[]) "
        "AND (v.occurred_at, v.inserted_at, v.id) > (m.occurred_at, m.inserted_at, m.id) "
        "ORDER BY v.occurred_at, v.inserted_at, v.id LIMIT %s) n "
        "ORDER BY h.id, n.occurred_at, n.inserted_at, n.id",
        [[h[0] for h in hits], [str(s) for s in ctx.scope_ids], LEND_WINDOW])
    following: dict[Any, list[Any]] = {}  # hit -> the messages after it, in order
    for hid, nid in rows:
        following.setdefault(hid, []).append(nid)
    out: dict[Any, Any] = {}  # hit -> the message it lends to
    if ctx.reader.posture == "internal":  # sees every message of its scopes
        out = {hid: nids[0] for hid, nids in following.items()}
    else:
        # The next message of each hit first, a later one only for the hits whose next
        # one is hidden: most are visible, so one check of ~`limit` messages, not of
        # LEND_WINDOW times as many.
        pending = {hid: list(nids) for hid, nids in following.items()}
        while pending:
            asked = {hid: nids.pop(0) for hid, nids in pending.items()}
            visible = _visible_ids(ctx, list(asked.values()))
            for hid, nid in asked.items():
                if nid in visible:
                    out[hid] = nid
            pending = {hid: nids for hid, nids in pending.items()
                       if hid not in out and nids}
    sim = dict(hits)
    return [(out[hid], sim[hid]) for hid in following if hid in out]


def _statements_of(ctx: StrategyContext, scored: list[tuple[Any, float]], limit: int
                   ) -> list[tuple[str, float]]:
    """The best `limit` messages of the scored (message, similarity) pairs (a message's
    best pair), then up to `limit` of their statements the reader may see, each scored by
    its best message."""
    visible_sql, visible_params = visible_ids_sql(ctx)
    rows = fetch(
        f"WITH s(id, sim) AS (SELECT * FROM unnest(%s::uuid[], %s::float8[])), "
        f"best AS (SELECT id, max(sim) AS sim FROM s GROUP BY id "
        f"ORDER BY sim DESC, id LIMIT %s) "
        f"SELECT ks.knowledge_id::text, max(b.sim) AS sim FROM best b "
        f"JOIN memhouse_knowledge_source ks ON ks.message_id = b.id "
        f"WHERE ks.knowledge_id IN ({visible_sql}) "
        f"GROUP BY ks.knowledge_id ORDER BY sim DESC, ks.knowledge_id LIMIT %s",
        [[m for m, _ in scored], [float(v) for _, v in scored], limit, *visible_params,
         limit])
    return [(kid, float(sim)) for kid, sim in rows]


def _source_turns(ctx: StrategyContext, limit: int) -> list[tuple[str, float]]:
    """The source-turn lane: the `limit` nearest visible messages, each also lending its
    similarity to the next visible message of its session (arrival order), best `limit`
    of those by max(own, lent) similarity; then their statements the reader may see,
    each scored by its best source message. Messages are exactly the reader's
    `lineage.visible_messages`, statements the visibility filter every strategy uses,
    so nothing hidden is reached or ranks anything."""
    hits = _nearest_messages(ctx, None, limit)
    if not hits:
        return []
    return _statements_of(ctx, hits + _lent(ctx, hits), limit)


def _said_when(ctx: StrategyContext, limit: int) -> list[tuple[str, float]]:
    """The said-when lane: the `limit` nearest visible messages said within a time the
    query names, then their statements the reader may see, each scored by its best such
    message. Empty when the query names no time."""
    named = named_times(ctx.query, ctx.as_of or ctx.now)
    if not named:
        return []
    # A message's time is read from its vector's row (MessageVector.said_at).
    terms = [f"{SAID_MONTH} IN ({', '.join(['%s'] * len(named.months))})"] if named.months \
        else []
    params: list[Any] = list(named.months)
    for start, end in named.windows:
        terms.append("(mv.said_at >= %s AND mv.said_at < %s)")
        params += [start, end]
    exact = (not named.months
             and _messages_within(ctx, named.windows, EXACT_MAX + 1) <= EXACT_MAX)
    hits = _nearest_messages(ctx, Said(" OR ".join(terms), params, exact), limit)
    if not hits:
        return []
    return _statements_of(ctx, hits, limit)


def _within(end: float, timeout_ms: list[float]) -> Callable[..., Any]:
    """An execute wrapper keeping a lane's statements before `end` (monotonic): none
    starts after it, and one whose statement_timeout (`timeout_ms[0]`) would let it run
    past it by more than LANE_SLACK_MS first gets the time left (a round trip only when
    the deadline is near)."""
    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        left_ms = (end - time.monotonic()) * 1000
        if left_ms <= 0:
            raise _LaneOut
        if timeout_ms[0] - left_ms > LANE_SLACK_MS:
            timeout_ms[0] = max(1, int(left_ms))
            execute(f"SET LOCAL statement_timeout = {int(timeout_ms[0])}", None, False,
                    context)
        return execute(sql, params, many, context)
    return wrapper


def _run_lanes(result: StrategyResult,
               lanes: list[tuple[str, Callable[[], list[tuple[str, float]]]]],
               deadline: float | None = None) -> None:
    """Run each lane, its statements under LANE_STATEMENT_MS and before `deadline`
    (monotonic): its list, or its drop on a timeout."""
    if not lanes:
        return
    db = read_connection()  # the strategy's own: primary or replica (memhouse.core.db_router)
    with db.cursor() as cur:  # the strategy's timeout, read once for every lane
        cur.execute("SELECT setting::int FROM pg_settings WHERE name = 'statement_timeout'")
        outer = cur.fetchone()[0]  # ms; 0 = none
    budget = min(LANE_STATEMENT_MS, outer) if outer else LANE_STATEMENT_MS
    end = deadline - LANE_END_MARGIN_MS / 1000 if deadline is not None else None
    for name, read in lanes:
        timeout_ms = [float(budget)]
        if end is not None:
            left_ms = (end - time.monotonic()) * 1000
            if left_ms < LANE_MIN_MS:
                result.lanes_dropped[name] = "timeout"
                continue
            timeout_ms[0] = min(timeout_ms[0], left_ms)
        try:
            # a savepoint: a cancelled statement rolls back alone
            with transaction.atomic(using=db.alias):
                with db.cursor() as cur:
                    cur.execute(f"SET LOCAL statement_timeout = {int(timeout_ms[0])}")
                if end is None:
                    result.extra_lists[name] = read()
                else:
                    with db.execute_wrapper(_within(end, timeout_ms)):
                        result.extra_lists[name] = read()
                with db.cursor() as cur:  # releasing a savepoint keeps a SET LOCAL
                    cur.execute(f"SET LOCAL statement_timeout = {int(outer)}")
        except _LaneOut:
            result.lanes_dropped[name] = "timeout"
        except OperationalError as exc:
            # Only the lane's own timeout; the engine cancelling the strategy propagates.
            if "statement timeout" not in str(exc):
                raise
            result.lanes_dropped[name] = "timeout"


def awaits_reembed(account_id: uuid.UUID, space_id: uuid.UUID | None) -> bool:
    """The Account has vectors, none of them in `space_id` (None: a space never created)."""
    rows = fetch("SELECT EXISTS (SELECT 1 FROM memhouse_knowledge_vector WHERE account_id = %s"
                 " AND space_id IS DISTINCT FROM %s) AND NOT EXISTS (SELECT 1 FROM"
                 " memhouse_knowledge_vector WHERE account_id = %s AND space_id = %s)",
                 [account_id, space_id, account_id, space_id])
    return bool(rows[0][0])


def run(ctx: StrategyContext) -> StrategyResult:
    result, space_id = _run(ctx)
    # Checked only on an empty answer (rare and cheap): vectors of an old space are never
    # compared with this query, and the caller learns why semantic found nothing.
    if (result.applicable and not result.candidates and ctx.query.strip()
            and awaits_reembed(ctx.reader.account_id, space_id)):
        result.applicable, result.reason = False, "needs_reembed"
    return result


def _run(ctx: StrategyContext) -> tuple[StrategyResult, uuid.UUID | None]:
    result = StrategyResult(NAME)
    if ctx.query_vector is None and ctx.query.strip() and "vectorize" in ctx.options:
        space_id, vector = ctx.options["vectorize"]()
        if space_id is None:
            # Nothing has been embedded in this identity yet: empty, not hidden.
            return result, None
        ctx = replace(ctx, query_vector=tuple(vector), space_id=space_id)
    if ctx.query_vector is None or ctx.space_id is None or not ctx.query.strip():
        result.applicable, result.reason = False, "applicability"
        return result, None
    ef = max(40, min(1000, ctx.limit * 2))
    with read_connection().cursor() as cur:
        cur.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cur.execute(f"SET LOCAL hnsw.ef_search = {int(ef)}")
    if ctx.options.get("lanes"):
        direct = _search_recall(ctx, ctx.limit, "direct")
        derived = _search_recall(ctx, ctx.limit, "derived")
        merged: list[tuple[str, float, str, int]] = []
        for rank in range(max(len(direct), len(derived))):
            # Interleave by lane rank; direct first on an exact tie.
            for lane, rows in (("direct", direct), ("derived", derived)):
                if rank < len(rows):
                    merged.append((rows[rank][0], rows[rank][1], lane, rank + 1))
        seen: set[str] = set()
        for kid, distance, lane, lane_rank in merged:
            if kid in seen:
                continue
            seen.add(kid)
            result.candidates.append((kid, 1.0 - distance))
            result.details[kid] = {"lane": lane, "lane_rank": lane_rank,
                                   "operation": "derived" if lane == "derived" else "direct",
                                   "cosine_distance": round(distance, 6)}
        return result, ctx.space_id
    for kid, distance in _search(ctx, ctx.limit):
        result.candidates.append((kid, 1.0 - distance))
        result.details[kid] = {"cosine_distance": round(distance, 6)}
    lanes: list[tuple[str, Callable[[], list[tuple[str, float]]]]] = []
    if ctx.options.get("source_turns"):
        lanes.append((SOURCE_TURNS, partial(_source_turns, ctx, ctx.limit)))
    if ctx.options.get("said_when"):
        lanes.append((SAID_WHEN, partial(_said_when, ctx, ctx.limit)))
    _run_lanes(result, lanes, ctx.options.get("deadline"))
    return result, ctx.space_id
