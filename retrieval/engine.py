"""The retrieval engine: fan strategies out under one deadline, fuse, maybe rerank.

1. Resolve the profile and reserve the rerank allowance before anything starts.
2. Run the first-stage strategies concurrently, each on its own thread and that thread's
   kept database connection, in a transaction bound to the reader's Account with
   `statement_timeout` = the time left (both set in one round trip), on the read replica
   when the caller's block reads from it (memhouse.core.db_router). A strategy that
   cannot apply (temporal without as_of) is answered without a thread. Late strategies
   are cancelled (the backend query is cancelled too), dropped and reported; failures
   likewise.
3. relation_expand (when the profile has it) expands the head of the interleaved seed
   lists within the remaining time.
4. Disagreement is computed on the strategies' raw lists, then score-aware fusion
   orders them with their lanes' lists (semantic.source_turns, each its own weight).
5. Rerank (profiles with `rerank`): the configured generation provider reorders the
   fused head within the reserved allowance, or without one MaxSim over the encoder's
   token embeddings does (retrieval.rerank).
6. Source crowding (profiles with `repeat_deferral`): a statement whose source turn
   already backs a higher one waits behind new turns (retrieval.crowding).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from knowledge.models import Scope
from knowledge.scope_relations import linked_scopes
from knowledge.selectors import scope_chain, visible_knowledge
from memhouse.core.db_router import read_alias, reads_on
from memhouse.core.principal import Reader
from memhouse.core.tenancy import set_account
from retrieval import conflicts, crowding, evidence, fusion
from retrieval import rerank as reranker
from retrieval.lexical import ANALYZER_VERSION, analyze
from retrieval.profiles import QUERY_DEPENDENT, Profile, allowed
from retrieval.strategies import entity_match_or_none, lexical, relation, salience, semantic
from retrieval.strategies import temporal as temporal_strategy
from retrieval.strategies.base import StrategyContext, StrategyResult

log = logging.getLogger(__name__)

FIRST_STAGE: dict[str, Callable[[StrategyContext], StrategyResult]] = {
    "semantic": semantic.run,
    "lexical": lexical.run,
    "temporal": temporal_strategy.run,
    "salience_recency": salience.run,
}
_entity = entity_match_or_none()
if _entity is not None:
    FIRST_STAGE["entity_match"] = _entity
# Strategies that say without SQL whether they can apply: one that cannot is answered
# "not applicable" here, without a thread, a connection or a transaction (temporal
# without as_of, i.e. most searches).
APPLIES: dict[str, Callable[[StrategyContext], bool]] = {
    "temporal": temporal_strategy.applies,
    "salience_recency": salience.applies,
}

_pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="memhouse-strategy")
MAX_LIMIT = 100


@dataclass
class SearchResult:
    candidates: list[dict[str, Any]]
    strategies: dict[str, Any]
    retrieval_outcomes: list[dict[str, str]]
    disagreement: dict[str, Any]
    reader_posture: str
    profile: str
    profile_version: str
    analyzer_version: str
    deadline_ms: int
    reserved_rerank_ms: int
    rerank: dict[str, Any]
    elapsed_ms: float
    page: dict[str, Any]
    lists: dict[str, list[tuple[str, float]]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out.pop("lists")
        return out


class _Running:
    """A strategy on its own connection; `cancel()` interrupts its backend query."""

    def __init__(self) -> None:
        self.pgconn: Any = None
        self.lock = threading.Lock()
        self.cancelled = False

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            if self.pgconn is not None:
                try:
                    self.pgconn.cancel_safe(timeout=0.2)
                except Exception:  # the query may have just finished
                    log.debug("cancel failed", exc_info=True)


# Strategy threads keep their database connection between searches (the pool is
# bounded, so so are the connections): opening one costs more than most strategies, so
# the strategies of one search, and every later search, reuse them. Nothing of one
# search stays on a connection: the Account and every other setting a strategy makes
# are transaction-local and end with its transaction (memhouse.core.tenancy).
_strategy_connections: set[Any] = set()
_strategy_connections_lock = threading.Lock()
# A connection idle longer than this is pinged before use (a server restart or an idle
# timeout may have closed it); one used moments ago is not: a ping is a round trip.
IDLE_CHECK_SECONDS = 5.0
_last_used = threading.local()


def _ready_connection(alias: str) -> Any:
    conn = connections[alias]
    if not hasattr(_last_used, "at"):
        _last_used.at = {}  # alias -> when this thread last used its connection
    idle = time.monotonic() - _last_used.at.get(alias, 0.0)
    if conn.connection is not None and (
            conn.errors_occurred or (idle > IDLE_CHECK_SECONDS and not conn.is_usable())):
        conn.close()
    with _strategy_connections_lock:
        _strategy_connections.add(conn)  # this thread's wrapper
    return conn


def close_strategy_connections() -> None:
    """Close the pool threads' connections (tests and shutdown; not during searches)."""
    with _strategy_connections_lock:
        wrappers = list(_strategy_connections)
        _strategy_connections.clear()
    for wrapper in wrappers:
        raw = wrapper.connection
        if raw is not None:
            raw.close()
            wrapper.connection = None


def _execute(run: Callable[[StrategyContext], StrategyResult], ctx: StrategyContext,
             deadline: float, running: _Running, alias: str) -> StrategyResult:
    conn = _ready_connection(alias)
    try:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise TimeoutError("no time left")
        # The caller's database (primary or replica), in this thread's own transaction.
        with reads_on(alias), transaction.atomic(using=alias):
            # One round trip binds the Account and the strategy's settings to this
            # transaction. No parallel workers: the strategies already run side by side,
            # and a worker's start-up (and a plan run once per worker) costs more than
            # it saves within a search's deadline on a shared machine.
            set_account(ctx.reader.account_id, using=alias, local={
                "statement_timeout": str(left_ms), "max_parallel_workers_per_gather": "0"})
            with running.lock:
                running.pgconn = conn.connection
            if running.cancelled:
                raise TimeoutError("cancelled")
            return run(ctx)
    finally:
        _last_used.at[alias] = time.monotonic()
        with running.lock:
            running.pgconn = None


def _run_all(jobs: dict[str, tuple[Callable[[StrategyContext], StrategyResult], StrategyContext]],
             deadline: float) -> tuple[dict[str, StrategyResult], dict[str, str]]:
    futures: dict[str, tuple[Future[StrategyResult], _Running]] = {}
    alias = read_alias()  # pool threads do not inherit the caller's context
    for name, (run, ctx) in jobs.items():
        running = _Running()
        futures[name] = (_pool.submit(_execute, run, ctx, deadline, running, alias), running)
    done: dict[str, StrategyResult] = {}
    dropped: dict[str, str] = {}
    for name, (future, running) in futures.items():
        try:
            done[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except (FutureTimeout, TimeoutError):  # late, or no time left when it started
            running.cancel()
            future.cancel()
            dropped[name] = "timeout"
        except Exception as exc:
            # statement_timeout cancels the backend with QueryCanceled.
            if "statement timeout" in str(exc) or "canceling statement" in str(exc):
                dropped[name] = "timeout"
            else:
                log.warning("strategy %s failed: %s", name, type(exc).__name__)
                dropped[name] = "error"
    return done, dropped


def _interleave(lists: list[list[tuple[str, float]]], n: int) -> list[str]:
    out: list[str] = []
    for rank in range(max((len(items) for items in lists), default=0)):
        for items in lists:
            if rank < len(items) and items[rank][0] not in out:
                out.append(items[rank][0])
                if len(out) >= n:
                    return out
    return out


def _space_and_vector(reader: Reader, query: str) -> tuple[uuid.UUID | None, tuple[float, ...]]:
    from retrieval.embedding import get_embedder, query_cache
    from retrieval.models import EmbeddingSpace

    embedder = get_embedder()
    ident = embedder.identity
    space = EmbeddingSpace.objects.filter(provider=ident.provider, model=ident.model,
                                          version=ident.version, dims=ident.dims).first()
    if space is None:  # nothing embedded in this identity yet
        return None, ()
    vector = query_cache().get_or_compute(reader.account_id, embedder, query)
    return space.id, tuple(vector)


def query_space_and_vector(reader: Reader, query: str
                           ) -> tuple[uuid.UUID | None, tuple[float, ...]]:
    """The default embedder's space and the (cached) query vector; (None, ()) when
    nothing has been embedded in that space yet. An embedding, never a generation call."""
    return _space_and_vector(reader, query)


_FIRST_PERSON = re.compile(r"\b(?:(I|me|myself)|(my|mine))\b", re.IGNORECASE)


def for_the_reader(reader: Reader, query: str) -> str:
    """A peer reader's "I" / "my" is that peer: "Where do I work?" searches as "Where do
    Sam Okafor work?" (statements are stored in the third person, by name)."""
    if reader.posture != "peer" or reader.peer_id is None or not _FIRST_PERSON.search(query):
        return query
    from knowledge.models import Peer

    name = (Peer.objects.filter(pk=reader.peer_id).values_list("display_name", "key")
            .first() or ("", ""))
    who = name[0] or name[1]
    if not who:
        return query

    return _FIRST_PERSON.sub(lambda m: who if m.group(1) else f"{who}'s", query)


def search(*, reader: Reader, scope: Scope, query: str, profile: Profile, limit: int = 10,
           offset: int = 0, as_of: datetime | None = None,
           strategies: tuple[str, ...] | None = None, blank_fallback: bool = False,
           rerank_gate: Callable[[dict[str, list[tuple[str, float]]]], bool] | None = None
           ) -> SearchResult:
    """Search for `reader` at `scope`. `strategies` is an internal evaluation override.
    `rerank_gate` sees the strategies' lists before a reranking profile reranks; when it
    returns False the rerank is skipped (`no_relevant_evidence`), so a caller that will
    discard the results (ask's relevance gate) never pays for a model call."""
    started = time.monotonic()
    query = for_the_reader(reader, query)
    reserved = profile.rerank_reserve_ms if profile.rerank else 0
    # An allowance too short for any reranker (a request's short deadline shrinks it,
    # profiles.with_deadline) is not reserved: the strategies keep the whole deadline.
    short_allowance = profile.rerank and reserved < reranker.MIN_ALLOWANCE_MS
    if short_allowance:
        reserved = 0
    deadline = started + max(1, profile.deadline_ms - reserved) / 1000.0
    now = timezone.now()
    configured = tuple(strategies or profile.strategies)
    weights = {s: profile.weights.get(s, 1.0) for s in configured}
    # Lanes of a configured strategy (e.g. semantic.source_turns) fuse as lists of their
    # own under the profile's weight for them.
    weights.update({lane: w for lane, w in profile.weights.items()
                    if "." in lane and lane.split(".", 1)[0] in configured and w > 0})
    lex = analyze(query)
    scope_ids = scope_chain(scope).ids
    head = max(profile.head, limit + offset)
    dropped: dict[str, str] = {s: "disabled" for s in configured if not allowed(s)}
    runnable = [s for s in configured if s not in dropped]
    missing = [s for s in runnable if s != "relation_expand" and s not in FIRST_STAGE]
    dropped.update({s: "unavailable" for s in missing})
    base = StrategyContext(
        reader=reader, scope_ids=scope_ids, query=query, lexical=lex, now=now, limit=head,
        as_of=as_of,
        # The query is embedded inside the semantic strategy's own thread, so lexical and
        # the others do not wait for the model, and a slow embedding costs only semantic.
        # `deadline` (monotonic): semantic's lanes keep inside it, so a slow lane is
        # dropped alone and never costs semantic its own list.
        options={"lanes": profile.lanes, "blank_fallback": blank_fallback,
                 "deadline": deadline,
                 "source_turns": semantic.SOURCE_TURNS in weights,
                 "said_when": semantic.SAID_WHEN in weights,
                 "vectorize": lambda: _space_and_vector(reader, query)})
    jobs = {s: (FIRST_STAGE[s], base) for s in runnable
            if s in FIRST_STAGE and s not in dropped}
    idle = {s: StrategyResult(s, applicable=False, reason="applicability") for s in jobs
            if s in APPLIES and not APPLIES[s](base)}
    done, late = _run_all({s: j for s, j in jobs.items() if s not in idle}, deadline)
    done.update(idle)
    dropped.update(late)
    if "relation_expand" in runnable and "relation_expand" not in dropped:
        first_lists = [r.candidates for r in done.values() if r.applicable]
        seeds = tuple(_interleave(first_lists, profile.seed_head))
        ctx = StrategyContext(**{**base.__dict__, "seeds": seeds,
                                 "limit": max(10, profile.seed_head * (
                                     relation.PER_SEED_CAP + relation.LINKED_PER_SEED_CAP))})
        rel_done, rel_late = _run_all({"relation_expand": (relation.run, ctx)}, deadline)
        done.update(rel_done)
        dropped.update(rel_late)
    lists = {n: r.candidates for n, r in done.items() if r.applicable}
    outcomes: list[dict[str, str]] = []
    for name, r in sorted(done.items()):
        if not r.applicable:
            outcomes.append({"strategy": name, "outcome": "not_applicable",
                             "reason_class": r.reason or "applicability"})
        if "authorization_filtered" in r.flags:
            outcomes.append({"strategy": name, "outcome": "candidate_filter",
                             "reason_class": "authorization_filtered"})
        for lane, why in sorted(r.lanes_dropped.items()):
            outcomes.append({"strategy": lane, "outcome": "dropped", "reason_class": why})
    disagreement = fusion.disagreement(lists, query_dependent=set(QUERY_DEPENDENT))
    fused_lists = dict(lists)  # the strategies' lists and their lanes' (not strategies)
    for r in done.values():
        if r.applicable:
            fused_lists.update({lane: c for lane, c in r.extra_lists.items()
                                if lane in weights})
    fused = fusion.fuse(fused_lists, weights, rrf_k=profile.rrf_k)
    rerank: dict[str, Any] = {"status": "not_requested"}
    read_ids = _with_linked_scopes(reader, scope_ids, done)
    if short_allowance:
        rerank = {"status": "skipped", "reason": "deadline"}
    elif profile.rerank and rerank_gate is not None and not rerank_gate(lists):
        rerank = {"status": "skipped", "reason": "no_relevant_evidence"}
    elif profile.rerank:
        # The head is reranked whatever the page, so pages continue the same order.
        fused, rerank = reranker.rerank(reader=reader, scope_ids=read_ids, now=now,
                                        query=query, fused=fused, head=profile.rerank_head,
                                        maxsim_head=profile.maxsim_head,
                                        allowance_ms=reserved, lists=fused_lists)
    # A statement from a turn already placed waits behind new turns (retrieval.crowding).
    fused, repeats = crowding.defer_repeats(fused, wait=profile.repeat_deferral)
    # The older claim of an unsettled contradiction never shows without the newer one,
    # just before it, even when only the older ranked (conflicts.pull_newer).
    window = [c.id for c in fused[:conflicts.PULL_WINDOW]]
    marks = conflicts.outdated_by(reader=reader, ids=window, scope_ids=read_ids, at=now)
    fused = conflicts.pull_newer(
        fused, marks, id_of=lambda c: c.id,
        make=lambda i, older: fusion.FusedCandidate(id=i, fusion_score=older.fusion_score))
    page_items = fused[offset: offset + limit]
    candidates = _hydrate(reader, read_ids, now, page_items, done, offset)
    for c in candidates:
        c["deferred_after"] = repeats.get(c["id"])
    # Of two claims that say otherwise, the newer first and the older marked (conflicts).
    # The window's marks are known already; only page ids outside it (a deep page, a
    # newer claim pulled in) are looked up.
    asked = set(window)
    unasked = [c["id"] for c in candidates if c["id"] not in asked]
    if unasked:
        marks = {**marks, **conflicts.outdated_by(reader=reader, ids=unasked,
                                                   scope_ids=read_ids, at=now)}
    candidates = conflicts.mark(candidates, marks)
    for position, c in enumerate(candidates):
        c["rank"] = offset + position + 1
    elapsed = (time.monotonic() - started) * 1000
    return SearchResult(
        candidates=candidates,
        strategies={
            "contributed": sorted(n for n, c in lists.items() if c),
            "empty": sorted(n for n, c in lists.items() if not c),
            "not_applicable": sorted(n for n, r in done.items() if not r.applicable),
            "dropped": [{"name": n, "reason": why} for n, why in sorted(dropped.items())],
        },
        retrieval_outcomes=outcomes, disagreement=dict(disagreement),
        reader_posture=reader.posture, profile=profile.name,
        profile_version=profile.version, analyzer_version=ANALYZER_VERSION,
        deadline_ms=profile.deadline_ms, reserved_rerank_ms=reserved, rerank=rerank,
        elapsed_ms=round(elapsed, 2),
        page={"limit": limit, "offset": offset,
              "next_offset": offset + limit if len(fused) > offset + limit else None},
        lists=fused_lists,
    )


def _with_linked_scopes(reader: Reader, scope_ids: tuple[uuid.UUID, ...],
                        done: dict[str, StrategyResult]) -> tuple[uuid.UUID, ...]:
    """The read's scopes plus the linked scopes relation expansion reached through a scope
    relation (authorised twice, knowledge.scope_relations), so the rerank and the page read
    those candidates through the same visibility filter as every other one."""
    rel = done.get("relation_expand")
    if rel is None or not any(str(d.get("via", "")).startswith("linked_")
                              for d in rel.details.values()):
        return scope_ids
    return scope_ids + tuple(link.linked for link in
                             linked_scopes(reader=reader, scope_ids=scope_ids))


def _hydrate(reader: Reader, scope_ids: tuple[uuid.UUID, ...], now: datetime,
             items: list[fusion.FusedCandidate], done: dict[str, StrategyResult],
             offset: int) -> list[dict[str, Any]]:
    """Statements for the page, read again through the visibility filter (in order)."""
    ids = [c.id for c in items]
    rows = {str(k.id): k for k in visible_knowledge(reader=reader, scope_ids=scope_ids, at=now)
            .filter(id__in=ids).select_related("scope", "subject_peer")}
    said = evidence.said_at_of(rows)
    out: list[dict[str, Any]] = []
    for position, cand in enumerate(items):
        k = rows.get(cand.id)
        if k is None:  # changed state since the strategies ran
            continue
        entry: dict[str, Any] = {
            "id": cand.id, "rank": offset + position + 1, "statement": k.statement,
            "subject_peer_key": k.subject_peer.key if k.subject_peer else None,
            "scope": k.scope.path, "kind": k.kind, "level": k.level, "state": k.state,
            "confidence": k.confidence, "sensitivity": k.sensitivity,
            "relevant_from": k.relevant_from, "relevant_until": k.relevant_until,
            "inserted_at": k.inserted_at,
            # What an agent reads: the time in absolute words (retrieval.evidence).
            "when": evidence.when_of(k, said),
            "fusion_score": round(cand.fusion_score, 6),
            "scores": {name: {key: (round(v, 6) if isinstance(v, float) else v)
                              for key, v in detail.items()}
                       for name, detail in cand.strategies.items()},
        }
        sem = done.get("semantic")
        if sem is not None and cand.id in sem.details and "lane" in sem.details[cand.id]:
            entry["lane"] = sem.details[cand.id]
        out.append(entry)
    return out
