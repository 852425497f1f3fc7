"""LoCoMo context (projection cache hit vs fast fallback) and model-free ask.

    .venv/bin/python bench/context_ask.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --out bench/results/context_ask.json [--limit-conversations N] [--repeats N] \
        [--context-queries 200] [--keep-db]

One command, one private database (bench_context_ask):
  1. ingest LoCoMo through the pipeline (bench/common.py, one scope per conversation) and
     rebuild the entity index, as bench/retrieval.py does;
  2. context: for a sample of the questions, retrieval.context.get_context for a peer
     reader (one of the conversation's two speakers) at the conversation's scope, under
     four conditions per question: projections built and clean with the process-local
     payload cache cleared (cache_hit_db) and warm (cache_hit), projections marked dirty
     (fast_fallback) and deleted (fast_fallback_missing); the observed
     projection_cache_hit / fast_fallback flags are counted, not assumed;
  3. ask: every QA through retrieval.ask.ask (no effort, the scope's default profile =
     thorough) with no generation provider configured (model-free mode);
  4. abstention: the team's unrelated questions (bench/fixtures/unrelated_questions.json)
     asked in every conversation's scope, small-memory pairs
     (bench/fixtures/ask_pairs.json) scored against their statement, and ask's
     similarity floor chosen by leave-one-conversation-out next to the shipped one;
  5. JSON (keys in bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

# The provider is read from the environment when Django settings load: model-free mode
# means no provider at all, whatever the developer's shell exports.
os.environ["MEMHOUSE_LLM_BASE_URL"] = ""

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

import numpy as np  # noqa: E402

from bench import common  # noqa: E402
from bench.common import log  # noqa: E402
from bench.retrieval import pct, provenance_map  # noqa: E402

CATEGORIES = ("1", "2", "3", "4", "5")
CATEGORY_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop",
                  "5": "adversarial"}
EVIDENCE_CATEGORIES = ("1", "2", "3", "4")
CONDITIONS = ("cache_hit_db", "cache_hit", "fast_fallback", "fast_fallback_missing")


# =======================================================================================
# Questions and readers
# =======================================================================================


def all_questions(conv: common.Conversation) -> list[dict[str, Any]]:
    return [{"question": q["question"], "category": str(q.get("category")),
             "evidence": common.normalise_evidence(q.get("evidence")), "index": i}
            for i, q in enumerate(conv.qa)]


def reader_speaker(conv: common.Conversation, question: str) -> str:
    """The speaker the question names (first name, whole word); speaker_a when it names
    both or neither. The read is for that person, as an agent would read for its user."""
    named = [s for s in conv.speakers
             if re.search(rf"\b{re.escape(s.split()[0])}\b", question, re.IGNORECASE)]
    return named[0] if len(named) == 1 else conv.speakers[0]


class Readers:
    """Peer readers (posture peer, scope roots '/') for each speaker, and the scopes."""

    def __init__(self, account_id: Any, convs: list[common.Conversation]) -> None:
        from knowledge.models import Peer, Scope
        from memhouse.core.principal import Reader
        from memhouse.core.tenancy import account_context

        self.account_id = account_id
        self.readers: dict[str, Any] = {}
        self.scopes: dict[str, Any] = {}
        with account_context(account_id):
            for conv in convs:
                self.scopes[conv.sample_id] = Scope.objects.get(id=conv.scope_id)
                for key in conv.peer_keys.values():
                    peer = Peer.objects.get(account_id=account_id, key=key)
                    self.readers[key] = Reader(account_id=account_id, posture="peer",
                                               peer_id=peer.id, scope_roots=("/",))

    def for_question(self, conv: common.Conversation, question: str) -> tuple[str, Any]:
        key = conv.peer_keys[reader_speaker(conv, question)]
        return key, self.readers[key]


def dias_of(ids: list[str], prov: dict[str, set[str]]) -> set[str]:
    out: set[str] = set()
    for i in ids:
        out |= prov.get(str(i), set())
    return out


def rate(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


# =======================================================================================
# Projections: the keys get_context reads, explicit build, dirty marking, deletion
# =======================================================================================


def context_keys(reader: Any, scope: Any) -> list[Any]:
    """The projection keys retrieval.context.get_context reads for `reader` at `scope`
    without a session: the shared scope card and the reader's peer profile of the scope
    and of each ancestor."""
    from knowledge.selectors import scope_ancestors
    from retrieval.projections import Audience, Key, Kind

    chain = list(scope_ancestors(scope).values_list("id", flat=True))
    audience = Audience.PUBLIC if reader.posture == "public_only" else Audience.SHARED
    keys = [Key(Kind.SCOPE_CARD, audience, sid) for sid in chain]
    if reader.peer_id is not None:
        keys += [Key(Kind.PEER_PROFILE, Audience.SUBJECT, sid, peer_id=reader.peer_id)
                 for sid in chain]
    return keys


def _keys_q(keys: list[Any]) -> Any:
    from django.db.models import Q

    q = Q()
    for k in keys:
        q |= Q(kind=k.kind, audience=k.audience, scope_id=k.scope_id, peer_id=k.peer_id,
               session_id=k.session_id)
    return q


def projection_rows(account_id: Any, keys: list[Any]) -> list[dict[str, Any]]:
    from memhouse.core.tenancy import account_context
    from retrieval.models import Projection

    with account_context(account_id):
        return [dict(r) for r in Projection.objects.filter(account_id=account_id)
                .filter(_keys_q(keys))
                .values("id", "dirty", "built_at", "version", "kind", "scope_id")]


def ensure_built(account_id: Any, keys: list[Any]) -> dict[str, Any]:
    """Create the rows that do not exist (as projections.load does: dirty, version 1) and
    rebuild every one that is dirty or never built with projections.rebuild_many, the
    projection module's own rebuild (what the Celery task runs). Returns counts/timing."""
    from memhouse.core.tenancy import account_context
    from retrieval.models import Projection
    from retrieval.projections import rebuild_many

    rows = projection_rows(account_id, keys)
    have = {(r["kind"], r["scope_id"]) for r in rows}
    create = [k for k in keys if (k.kind, k.scope_id) not in have]
    if create:
        with account_context(account_id):
            Projection.objects.bulk_create(
                [Projection(account_id=account_id, kind=k.kind, audience=k.audience,
                            scope_id=k.scope_id, peer_id=k.peer_id, session_id=k.session_id,
                            dirty=True, version=1) for k in create], ignore_conflicts=True)
        rows = projection_rows(account_id, keys)
    todo = [r["id"] for r in rows if r["dirty"] or r["built_at"] is None]
    t = time.monotonic()
    rebuilt = rebuild_many(account_id, todo) if todo else 0
    return {"created": len(create), "rebuilt": rebuilt,
            "rebuild_ms": round((time.monotonic() - t) * 1000, 2)}


def mark_keys_dirty(account_id: Any, keys: list[Any]) -> int:
    from memhouse.core.tenancy import account_context
    from retrieval.projections import mark_dirty

    ids = [r["id"] for r in projection_rows(account_id, keys)]
    with account_context(account_id):
        return len(mark_dirty(ids))


def delete_keys(account_id: Any, keys: list[Any]) -> int:
    from memhouse.core.tenancy import account_context
    from retrieval.models import Projection

    with account_context(account_id):
        n, _ = Projection.objects.filter(account_id=account_id).filter(_keys_q(keys)).delete()
    return n


def projection_inventory(account_id: Any) -> dict[str, Any]:
    """What the built projections hold (entries per kind and scope depth)."""
    from memhouse.core.tenancy import account_context
    from retrieval.models import Projection

    out: dict[str, Any] = defaultdict(lambda: {"projections": 0, "entries": [], "total": []})
    with account_context(account_id):
        for kind, path, payload in Projection.objects.filter(
                account_id=account_id, dirty=False).values_list("kind", "scope__path",
                                                                "payload"):
            depth = "conversation" if path.count("/") >= 2 else path
            slot = out[f"{kind}@{depth}"]
            slot["projections"] += 1
            slot["entries"].append(len((payload or {}).get("entries", [])))
            slot["total"].append(int((payload or {}).get("total", 0)))
    return {k: {"projections": v["projections"],
                "mean_entries": round(float(np.mean(v["entries"])), 2),
                "mean_statements_available": round(float(np.mean(v["total"])), 2),
                "truncated": sum(1 for e, t in zip(v["entries"], v["total"], strict=True)
                                 if t > e)}
            for k, v in sorted(out.items())}


# =======================================================================================
# Context
# =======================================================================================


class ConditionStats:
    def __init__(self) -> None:
        self.latency: list[float] = []
        self.with_commit: list[float] = []
        self.commit: list[float] = []
        self.hit = 0
        self.fallback = 0
        self.calls = 0
        self.used_chars: list[int] = []
        self.truncated = 0
        self.head: list[int] = []
        self.empty_head = 0
        self.local_hits = 0
        self.db_loads = 0
        self.proj_state: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        self.contributed: Counter[str] = Counter()
        self.head_ev_hits = 0
        self.any_ev_hits = 0
        self.ev_questions = 0
        self.setup_ms: list[float] = []
        self.unexpected_flags = 0

    def add(self, res: dict[str, Any], ms: float, with_commit_ms: float,
            q: dict[str, Any], prov: dict[str, set[str]], expect_hit: bool,
            score: bool) -> None:
        self.calls += 1
        self.latency.append(ms)
        self.with_commit.append(with_commit_ms)
        self.commit.append(with_commit_ms - ms)
        self.hit += bool(res["projection_cache_hit"])
        self.fallback += bool(res["fast_fallback"])
        if bool(res["projection_cache_hit"]) != expect_hit:
            self.unexpected_flags += 1
        self.used_chars.append(int(res["used_chars"]))
        self.truncated += bool(res["truncated"])
        head = [e["id"] for e in res["knowledge"]]
        self.head.append(len(head))
        self.empty_head += not head
        p = res["projections"]
        self.local_hits += p["local_cache_hits"]
        self.db_loads += p["loaded_from_database"]
        for name in ("reused", "missing", "dirty", "stale"):
            self.proj_state[name] += p[name]
        if res.get("retrieval"):
            for d in res["retrieval"]["strategies"]["dropped"]:
                self.dropped[f"{d['name']}:{d['reason']}"] += 1
            for n in res["retrieval"]["strategies"]["contributed"]:
                self.contributed[n] += 1
        if score and q["category"] in EVIDENCE_CATEGORIES and q["evidence"]:
            wanted = set(q["evidence"])
            every = list(head)
            if res.get("peer_profile"):
                every += [e["id"] for e in res["peer_profile"]["entries"]]
            for card in res["scope_cards"]:
                every += [e["id"] for e in card["entries"]]
            self.ev_questions += 1
            self.head_ev_hits += bool(wanted & dias_of(head, prov))
            self.any_ev_hits += bool(wanted & dias_of(every, prov))

    def report(self) -> dict[str, Any]:
        return {
            "latency_ms": pct(self.latency),
            "latency_with_commit_ms": pct(self.with_commit),
            "commit_ms": pct(self.commit),
            "setup_ms": pct(self.setup_ms),
            "calls": self.calls,
            "observed": {"projection_cache_hit": self.hit, "fast_fallback": self.fallback,
                         "calls": self.calls, "unexpected": self.unexpected_flags},
            "mean_used_chars": round(float(np.mean(self.used_chars)), 1)
            if self.used_chars else None,
            "truncated": self.truncated,
            "mean_knowledge_entries": round(float(np.mean(self.head)), 2) if self.head else None,
            "empty_knowledge_head": self.empty_head,
            "projection_reads": {"local_cache_hits": self.local_hits,
                                 "loaded_from_database": self.db_loads,
                                 **dict(self.proj_state)},
            "dropped_strategies": dict(self.dropped),
            "contributed_strategies": dict(self.contributed),
            "evidence_questions": self.ev_questions,
            "knowledge_evidence_hit_rate": rate(self.head_ev_hits, self.ev_questions),
            "any_section_evidence_hit_rate": rate(self.any_ev_hits, self.ev_questions),
        }


def run_context(account_id: Any, convs: list[common.Conversation], readers: Readers,
                prov: dict[str, set[str]], *, n_queries: int, repeats: int, seed: int,
                budget: int) -> dict[str, Any]:
    from django.conf import settings

    from memhouse.core.tenancy import account_context
    from retrieval import projections
    from retrieval.context import get_context
    from retrieval.embedding import query_cache

    pool = [(ci, q) for ci, conv in enumerate(convs) for q in all_questions(conv)]
    sample = (pool if n_queries <= 0 or n_queries >= len(pool)
              else random.Random(seed).sample(pool, n_queries))
    sample.sort(key=lambda cq: (cq[0], cq[1]["index"]))

    # Build every reader's projections first, explicitly, and time it.
    build: dict[str, Any] = {"readers": 0, "projections": 0, "rebuild_ms": []}
    for conv in convs:
        scope = readers.scopes[conv.sample_id]
        for key in conv.peer_keys.values():
            with account_context(account_id):
                keys = context_keys(readers.readers[key], scope)
            # Dirty first: a reused database may hold projections an older build made.
            mark_keys_dirty(account_id, keys)
            info = ensure_built(account_id, keys)
            build["readers"] += 1
            build["projections"] += info["rebuilt"]
            build["rebuild_ms"].append(info["rebuild_ms"])
    build["rebuild_ms_per_reader"] = pct(build.pop("rebuild_ms"))
    build["inventory"] = projection_inventory(account_id)
    log(f"context: built {build['projections']} projections for {build['readers']} readers")

    stats = {c: ConditionStats() for c in CONDITIONS}
    reader_counts: Counter[str] = Counter()
    categories: Counter[str] = Counter()

    def call(cond: str, conv: common.Conversation, q: dict[str, Any], reader: Any,
             scope: Any, score: bool) -> None:
        query_cache().clear()  # a fallback search pays its own query embedding
        with account_context(account_id):
            t1 = time.monotonic()
            res = get_context(reader=reader, scope=scope, query=q["question"],
                              budget_chars=budget)
            t2 = time.monotonic()
        # Leaving account_context commits; with MEMHOUSE_CELERY_EAGER the on-commit
        # rebuild that a miss enqueues runs here, as it would inside an API request.
        t3 = time.monotonic()
        stats[cond].add(res, (t2 - t1) * 1000, (t3 - t1) * 1000, q, prov,
                        expect_hit=cond.startswith("cache_hit"), score=score)

    started = time.monotonic()
    for done, (ci, q) in enumerate(sample, start=1):
        conv = convs[ci]
        scope = readers.scopes[conv.sample_id]
        rkey, reader = readers.for_question(conv, q["question"])
        reader_counts[rkey] += 1
        categories[q["category"]] += 1
        with account_context(account_id):
            keys = context_keys(reader, scope)
        for rep in range(repeats):
            score = rep == 0
            # (a) cache hit: projections clean (rebuilt explicitly when a previous miss
            # left them dirty); first with the local payload cache cleared, then warm.
            t = time.monotonic()
            ensure_built(account_id, keys)
            projections.local_cache.clear()
            stats["cache_hit_db"].setup_ms.append((time.monotonic() - t) * 1000)
            call("cache_hit_db", conv, q, reader, scope, score)
            stats["cache_hit"].setup_ms.append(0.0)
            call("cache_hit", conv, q, reader, scope, score)
            # (b) fast fallback: the same projections marked dirty ...
            t = time.monotonic()
            mark_keys_dirty(account_id, keys)
            stats["fast_fallback"].setup_ms.append((time.monotonic() - t) * 1000)
            call("fast_fallback", conv, q, reader, scope, score)
            # ... and deleted (get_context recreates the rows and enqueues their rebuild).
            t = time.monotonic()
            ensure_built(account_id, keys)
            delete_keys(account_id, keys)
            stats["fast_fallback_missing"].setup_ms.append((time.monotonic() - t) * 1000)
            call("fast_fallback_missing", conv, q, reader, scope, score)
        if done % 25 == 0 or done == len(sample):
            el = time.monotonic() - started
            log(f"context: {done}/{len(sample)} queries ({el:.0f}s); p50 ms " + ", ".join(
                f"{c} {np.percentile(stats[c].latency, 50):.1f}" for c in CONDITIONS))
    # Leave every projection clean for whatever runs next.
    for conv in convs:
        scope = readers.scopes[conv.sample_id]
        for key in conv.peer_keys.values():
            with account_context(account_id):
                keys = context_keys(readers.readers[key], scope)
            ensure_built(account_id, keys)

    out: dict[str, Any] = {
        "queries": len(sample),
        "questions_available": len(pool),
        "repeats": repeats,
        "budget_chars": budget,
        "queries_by_category": dict(sorted(categories.items())),
        "queries_by_reader": dict(reader_counts),
        "celery_eager": settings.CELERY_TASK_ALWAYS_EAGER,
        "build": build,
    }
    for c in CONDITIONS:
        out[c] = stats[c].report()
    return out


# =======================================================================================
# Ask
# =======================================================================================


def message_dias(account_id: Any) -> dict[str, set[str]]:
    """Source message id -> its LoCoMo dia_id (the evidence a source message is)."""
    from knowledge.models import Message
    from memhouse.core.tenancy import account_context

    with account_context(account_id):  # client_message_id is "<sample_id>:<dia_id>"
        return {str(i): {dia_of(c)} for i, c in Message.objects
                .filter(client_message_id__isnull=False).values_list("id", "client_message_id")}


def dia_of(client_message_id: str | None) -> str:
    return (client_message_id or "").split(":", 1)[-1]


def embed_missing_messages(account_id: Any) -> dict[str, Any]:
    """Vectors for messages ingested before the source recall lane existed (what
    `manage.py reembed` does): a reused database may predate it."""
    from knowledge.models import Message
    from memhouse.core.tenancy import account_context
    from retrieval.models import MessageVector
    from retrieval.vectors import embed_messages

    with account_context(account_id):
        have = set(MessageVector.objects.values_list("message_id", flat=True))
        todo = [str(m) for m in Message.objects.values_list("id", flat=True) if m not in have]
    t = time.monotonic()
    done = sum(embed_messages(account_id, todo[i:i + 128]) for i in range(0, len(todo), 128))
    return {"embedded": done, "already": len(have), "seconds": round(time.monotonic() - t, 1)}


def run_source_lane(account_id: Any, convs: list[common.Conversation], readers: Readers,
                    limit: int = 6) -> dict[str, Any]:
    """The source recall lane alone (retrieval.source_recall, what ask's source tools
    call with SOURCE_TOOL_LIMIT = 6): share of questions (categories 1-4 with evidence)
    where an evidence turn is among the top `limit` messages of `exact`, of `semantic`,
    and of either, for the question's reader at the conversation's scope."""
    from knowledge.selectors import scope_ancestors
    from memhouse.core.tenancy import account_context
    from retrieval import source_recall
    from retrieval.embedding import query_cache

    hits: Counter[str] = Counter()
    n = 0
    ms: list[float] = []
    for conv in convs:
        scope = readers.scopes[conv.sample_id]
        with account_context(account_id):
            chain = list(scope_ancestors(scope).values_list("id", flat=True))
        for q in all_questions(conv):
            if q["category"] not in EVIDENCE_CATEGORIES or not q["evidence"]:
                continue
            _, reader = readers.for_question(conv, q["question"])
            wanted = set(q["evidence"])
            query_cache().clear()
            t = time.monotonic()
            with account_context(account_id):
                exact = {dia_of(m.client_message_id) for m in
                         source_recall.exact(reader, chain, q["question"], limit)}
                semantic = {dia_of(m.client_message_id) for m in
                            source_recall.semantic(reader, chain, q["question"], limit)}
            ms.append((time.monotonic() - t) * 1000)
            n += 1
            hits["exact"] += bool(wanted & exact)
            hits["semantic"] += bool(wanted & semantic)
            hits["either"] += bool(wanted & (exact | semantic))
    return {"questions": n, "limit": limit,
            **{f"{k}_evidence_hit_rate": rate(hits[k], n) for k in
               ("exact", "semantic", "either")},
            "latency_ms": pct(ms)}


def run_ask(account_id: Any, convs: list[common.Conversation], readers: Readers,
            prov: dict[str, set[str]], *, effort: str | None = None,
            source_recall: bool = False) -> dict[str, Any]:
    from memhouse.core.llm import get_provider
    from memhouse.core.tenancy import account_context
    from retrieval.ask import ask
    from retrieval.embedding import query_cache
    from retrieval.profiles import resolve_profile

    assert get_provider() is None, "model-free mode needs MEMHOUSE_LLM_BASE_URL empty"
    per: dict[str, dict[str, Any]] = {c: defaultdict(int) for c in CATEGORIES}
    conf: dict[str, list[int]] = {c: [] for c in CATEGORIES}
    reasons: dict[str, Counter[str]] = {c: Counter() for c in CATEGORIES}
    wall: list[float] = []
    own: list[float] = []
    dropped: Counter[str] = Counter()
    contributed: Counter[str] = Counter()
    n_cand: list[int] = []
    n_cited: list[int] = []
    profiles: Counter[str] = Counter()
    models_called = 0
    relevance_rows: list[dict[str, Any]] = []
    msg_prov = message_dias(account_id)
    n_source: list[int] = []
    total = sum(len(c.qa) for c in convs)
    done = 0
    for conv in convs:
        scope = readers.scopes[conv.sample_id]
        with account_context(account_id):
            profile = resolve_profile(requested=None, scope=scope, default="thorough")
        for q in all_questions(conv):
            cat = q["category"]
            _, reader = readers.for_question(conv, q["question"])
            query_cache().clear()
            t = time.monotonic()
            with account_context(account_id):
                res = ask(reader=reader, scope=scope, query=q["question"], profile=profile,
                          effort=effort, include_source_recall=source_recall)
            wall.append((time.monotonic() - t) * 1000)
            own.append(float(res["elapsed_ms"]))
            profiles[res["profile_version"]] += 1
            models_called += bool(res["model_called"])
            s = per[cat]
            s["questions"] += 1
            s["abstained"] += bool(res["abstained"])
            s["answered"] += not res["abstained"]
            conf[cat].append(int(res["answer_confidence"]))
            relevance_rows.append(_relevance_row(conv.sample_id, cat, res))
            reasons[cat][str(res["abstention_reason"])] += 1
            for d in res["retrieval"]["strategies"]["dropped"]:
                dropped[f"{d['name']}:{d['reason']}"] += 1
            for n in res["retrieval"]["strategies"]["contributed"]:
                contributed[n] += 1
            cand_ids = [c["id"] for c in res["candidates"]]
            cited_ids = [c["id"] for c in res["citations"] if c.get("type") == "knowledge"]
            n_cand.append(len(cand_ids))
            n_cited.append(len(cited_ids))
            if q["evidence"]:
                wanted = set(q["evidence"])
                s["with_evidence"] += 1
                s["cited_hits"] += bool(wanted & dias_of(cited_ids, prov))
                s["candidate_hits"] += bool(wanted & dias_of(cand_ids, prov))
                # The answer context (recall_evidence): statements by provenance, source
                # messages by their own dia_id.
                ctx = res["recall_evidence"]
                s["context_hits"] += bool(wanted & (
                    dias_of([e["id"] for e in ctx if e["type"] == "knowledge"], prov)
                    | dias_of([e["id"] for e in ctx if e["type"] == "source_message"],
                              msg_prov)))
            n_source.append(sum(1 for e in res["recall_evidence"]
                                if e["type"] == "source_message"))
            done += 1
            if done % 100 == 0 or done == total:
                log(f"ask: {done}/{total}, p50 {np.percentile(wall, 50):.0f} ms")
    by_cat: dict[str, Any] = {}
    for c in CATEGORIES:
        s = per[c]
        n = s["questions"]
        scored = c in EVIDENCE_CATEGORIES
        by_cat[c] = {
            "name": CATEGORY_NAMES[c],
            "questions": n,
            "answered": s["answered"],
            "abstained": s["abstained"],
            "answer_rate": rate(s["answered"], n),
            "abstention_rate": rate(s["abstained"], n),
            "mean_confidence": round(float(np.mean(conf[c])), 2) if conf[c] else None,
            "abstention_reasons": {k: v for k, v in reasons[c].items() if k != "None"},
            "questions_with_evidence": s["with_evidence"],
            "cited_evidence_hit_rate": rate(s["cited_hits"], s["with_evidence"])
            if scored else None,
            "candidate_evidence_hit_rate": rate(s["candidate_hits"], s["with_evidence"])
            if scored else None,
            "context_evidence_hit_rate": rate(s["context_hits"], s["with_evidence"])
            if scored else None,
        }
    ev = [per[c] for c in EVIDENCE_CATEGORIES]
    overall = {
        "questions": sum(s["questions"] for s in ev),
        "answer_rate": rate(sum(s["answered"] for s in ev), sum(s["questions"] for s in ev)),
        "cited_evidence_hit_rate": rate(sum(s["cited_hits"] for s in ev),
                                        sum(s["with_evidence"] for s in ev)),
        "candidate_evidence_hit_rate": rate(sum(s["candidate_hits"] for s in ev),
                                            sum(s["with_evidence"] for s in ev)),
        "context_evidence_hit_rate": rate(sum(s["context_hits"] for s in ev),
                                          sum(s["with_evidence"] for s in ev)),
    }
    return {
        "questions": total,
        "effort": effort,
        "include_source_recall": source_recall,
        "mean_source_messages_in_context": round(float(np.mean(n_source)), 2)
        if n_source else None,
        "provider": None,
        "model_called": models_called,
        "profile_versions": dict(profiles),
        "by_category": by_cat,
        "categories_1_4": overall,
        "latency_ms": pct(wall),
        "elapsed_ms": pct(own),
        "mean_candidates": round(float(np.mean(n_cand)), 2) if n_cand else None,
        "mean_citations": round(float(np.mean(n_cited)), 2) if n_cited else None,
        "dropped_strategies": dict(dropped),
        "contributed_strategies": dict(contributed),
        "relevance_rows": relevance_rows,
    }


# =======================================================================================
# Ask abstention: unrelated questions, small-memory pairs, the similarity floor
# =======================================================================================

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FLOOR_GRID = [round(0.30 + 0.01 * i, 2) for i in range(31)]  # 0.30 .. 0.60


def _relevance_row(conv: str, cat: str, res: dict[str, Any]) -> dict[str, Any]:
    rel = res["recall"]["relevance"]
    return {"conversation": conv, "category": cat, "abstained": bool(res["abstained"]),
            "reason": res["abstention_reason"], "basis": rel["basis"],
            "top_similarity": rel["top_similarity"]}


def _answers_at(row: dict[str, Any], floor: float) -> bool:
    """Would ask answer at this floor? (The semantic gate; rows without vectors keep the
    decision ask made, which did not read the floor.)"""
    if row["basis"] != "semantic" or row["top_similarity"] is None:
        return not row["abstained"]
    return float(row["top_similarity"]) >= floor


def _objective(rows: list[dict[str, Any]], pairs: list[float], floor: float
               ) -> tuple[float | None, float | None, float | None]:
    """(LoCoMo answer rate on categories 1-4, small-memory pairs passing, unrelated
    questions abstained) at `floor`."""
    answerable = [r for r in rows if r["category"] in EVIDENCE_CATEGORIES]
    unrelated = [r for r in rows if r["category"] == "unrelated"]
    return (rate(sum(_answers_at(r, floor) for r in answerable), len(answerable)),
            rate(sum(c >= floor for c in pairs), len(pairs)),
            rate(sum(not _answers_at(r, floor) for r in unrelated), len(unrelated)))


def _best_floor(rows: list[dict[str, Any]], pairs: list[float]) -> float:
    # The mean of the three rates, equal weight: a wrong abstention on a real question
    # and an answer to an unrelated one are both failures; ties go to the lower floor.
    def score(f: float) -> float:
        return sum(x or 0.0 for x in _objective(rows, pairs, f))

    return max(FLOOR_GRID, key=lambda f: (round(score(f), 6), -f))


def run_abstention(account_id: Any, convs: list[common.Conversation], readers: Readers,
                   locomo_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Unrelated questions asked in every conversation's scope, small-memory pairs
    scored against their statement, and the floor chosen by leave-one-conversation-out
    (plus a split a -> b check of the team-written fixtures)."""
    import json

    from django.conf import settings

    from memhouse.core.tenancy import account_context
    from retrieval.ask import ask
    from retrieval.embedding import get_embedder, query_cache
    from retrieval.profiles import resolve_profile

    unrelated = json.loads((FIXTURES / "unrelated_questions.json").read_text())["questions"]
    pair_items = json.loads((FIXTURES / "ask_pairs.json").read_text())["pairs"]
    rows = [dict(r) for r in locomo_rows]
    for conv in convs:
        scope = readers.scopes[conv.sample_id]
        with account_context(account_id):
            profile = resolve_profile(requested=None, scope=scope, default="thorough")
        for u in unrelated:
            _, reader = readers.for_question(conv, u["q"])
            query_cache().clear()
            with account_context(account_id):
                res = ask(reader=reader, scope=scope, query=u["q"], profile=profile)
            row = _relevance_row(conv.sample_id, "unrelated", res)
            row["split"] = u["split"]
            rows.append(row)
        log(f"abstention: {conv.sample_id} unrelated questions asked")
    embedder = get_embedder()
    pair_cos: list[tuple[float, str]] = []
    for p in pair_items:
        q = np.asarray(embedder.embed_query(p["question"]))
        d = np.asarray(embedder.embed_documents([p["statement"]])[0])
        pair_cos.append((float(q @ d / (np.linalg.norm(q) * np.linalg.norm(d))), p["split"]))
    pairs = [c for c, _ in pair_cos]
    shipped = float(settings.MEMHOUSE_ASK_MIN_SIMILARITY)

    def triple(rs: list[dict[str, Any]], ps: list[float], f: float) -> dict[str, Any]:
        a, p, u = _objective(rs, ps, f)
        return {"floor": f, "locomo_answer_rate_1_4": a, "pairs_pass_rate": p,
                "unrelated_abstention_rate": u}

    folds = []
    for conv in convs:
        train = [r for r in rows if r["conversation"] != conv.sample_id]
        test = [r for r in rows if r["conversation"] == conv.sample_id]
        chosen = _best_floor(train, pairs)
        folds.append({"held_out": conv.sample_id, **triple(test, pairs, chosen)})
    keys = ("locomo_answer_rate_1_4", "unrelated_abstention_rate")
    loco_mean = {k: round(float(np.mean([f[k] for f in folds if f[k] is not None])), 4)
                 for k in keys}
    split_a = [r for r in rows if r.get("split", "a") == "a"]
    split_b = [r for r in rows if r.get("split", "b") == "b"]
    chosen_a = _best_floor(split_a, [c for c, s in pair_cos if s == "a"])
    observed = [r for r in rows if r["category"] == "unrelated"]
    c5 = [r for r in rows if r["category"] == "5"]
    return {
        "shipped_floor": shipped,
        "embedder": embedder.identity.key,
        "observed": {
            "unrelated_questions": len(observed),
            "unrelated_abstention_rate": rate(sum(r["abstained"] for r in observed),
                                              len(observed)),
            "unrelated_abstention_by_split": {
                s: rate(sum(r["abstained"] for r in observed if r["split"] == s),
                        sum(1 for r in observed if r["split"] == s)) for s in ("a", "b")},
            "category_5_abstention_rate": rate(sum(r["abstained"] for r in c5), len(c5)),
        },
        "at_shipped_floor": triple(rows, pairs, shipped),
        "in_sample_best": triple(rows, pairs, _best_floor(rows, pairs)),
        "leave_one_conversation_out": {"folds": folds, "mean": loco_mean},
        "split_check": {"chosen_on_a": chosen_a,
                        "on_b": triple(split_b, [c for c, s in pair_cos if s == "b"],
                                       chosen_a)},
        "pairs_lowest": sorted(round(c, 4) for c in pairs)[:5],
        "curve": [triple(rows, pairs, f) for f in FLOOR_GRID],
    }


# =======================================================================================
# main
# =======================================================================================


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit-conversations", type=int, default=None)
    ap.add_argument("--context-queries", type=int, default=200,
                    help="questions sampled (seeded) over all conversations for the context "
                         "part; 0 = every question")
    ap.add_argument("--repeats", type=int, default=1,
                    help="calls per condition per context query (only the first is scored)")
    ap.add_argument("--budget-chars", type=int, default=None,
                    help="context budget (default: retrieval.context.DEFAULT_BUDGET)")
    ap.add_argument("--skip-context", action="store_true")
    ap.add_argument("--skip-ask", action="store_true")
    ap.add_argument("--skip-abstention", action="store_true",
                    help="skip the unrelated-question and floor calibration part of ask")
    ap.add_argument("--ask-effort", choices=("low", "medium", "high"), default=None,
                    help="ask with this effort (deterministic planner); default none")
    ap.add_argument("--source-recall", action="store_true",
                    help="ask with include_source_recall (needs --ask-effort)")
    ap.add_argument("--no-entity-rebuild", action="store_true")
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--keep-db", action="store_true")
    ap.add_argument("--reuse-db", action="store_true",
                    help="reuse bench_<db-name> from an earlier --keep-db run and skip "
                         "ingest when it holds these conversations")
    ap.add_argument("--db-name", default="context_ask")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--torch-threads", type=int, default=None)
    args = ap.parse_args(argv)

    dbname = common.bootstrap(args.db_name, keep_db=args.keep_db,
                              reuse_db=args.reuse_db)
    import logging

    logging.getLogger("celery").setLevel(logging.WARNING)
    from django.conf import settings

    from memhouse.core.llm import get_provider
    from retrieval import context as context_mod
    from retrieval.embedding import get_embedder

    settings.MEMHOUSE_LLM_BASE_URL = ""
    if get_provider() is not None:
        raise SystemExit("a generation provider is configured; this benchmark is model-free")
    threads = common.embedder_threads(args.torch_threads)
    budget = args.budget_chars or context_mod.DEFAULT_BUDGET

    payload: dict[str, Any] = {
        "benchmark": "context_ask",
        "dataset": str(Path(args.dataset).resolve()),
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "context": {},
        "ask": {},
        "config": {
            "database": dbname, "kept_database": args.keep_db,
            "reader": "memhouse.core.principal.Reader(posture='peer', peer_id=<speaker>, "
                      "scope_roots=('/',)); the speaker the question names, else speaker_a",
            "context_function": "retrieval.context.get_context(reader, scope, query=question,"
                                f" budget_chars={budget}), no session",
            "context_queries": args.context_queries, "repeats": args.repeats,
            "ask_function": "retrieval.ask.ask(reader, scope, query=question, profile="
                            "resolve_profile(requested=None, scope, default='thorough'), "
                            f"effort={args.ask_effort!r}, include_source_recall="
                            f"{args.source_recall})",
            "llm_provider": None,
            "MEMHOUSE_LLM_BASE_URL": settings.MEMHOUSE_LLM_BASE_URL,
            "embedder": get_embedder().identity.key,
            "query_prefix": settings.MEMHOUSE_EMBEDDING_QUERY_PREFIX,
            "strategy_allowlist": settings.MEMHOUSE_STRATEGY_ALLOWLIST,
            "celery_eager": settings.CELERY_TASK_ALWAYS_EAGER,
            "entity_index": "none" if args.no_entity_rebuild
            else "retrieval.entities.rebuild_entities after ingest",
            "seed": args.seed, "cpu_count": os.cpu_count(),
            **threads,
            "loadavg_start": os.getloadavg(),
            "server": common.server_settings(),
        },
    }

    def write() -> None:
        payload["config"]["loadavg_last_write"] = os.getloadavg()
        common.write_json(args.out, payload)

    convs = common.load_locomo(args.dataset, args.limit_conversations)
    payload["conversations"] = [c.sample_id for c in convs]
    log(f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
        f"{sum(len(c.qa) for c in convs)} questions")
    reused = common.attach_locomo(convs) if args.reuse_db else None
    if reused is not None:
        account_id, ingest_stats = reused, {"reused_database": True}
        log("ingest skipped: the reused database holds these conversations")
    else:
        account_id, ingest_stats = common.ingest_locomo(convs, batch_size=args.batch_size)
    payload["ingest"] = ingest_stats
    if reused is None and not args.no_entity_rebuild:
        payload["ingest"]["entity_rebuild"] = common.rebuild_entity_index(account_id)
        log(f"entity index: {payload['ingest']['entity_rebuild']}")
    write()
    readers = Readers(account_id, convs)
    prov = provenance_map(account_id)

    if not args.skip_context:
        payload["context"] = run_context(account_id, convs, readers, prov,
                                         n_queries=args.context_queries,
                                         repeats=max(1, args.repeats), seed=args.seed,
                                         budget=budget)
        write()
        for c in CONDITIONS:
            v = payload["context"][c]
            log(f"context {c}: p50/p95/p99 {v['latency_ms']['p50']}/{v['latency_ms']['p95']}/"
                f"{v['latency_ms']['p99']} ms, observed {v['observed']}, mean used_chars "
                f"{v['mean_used_chars']}")
    if args.source_recall:
        payload["ingest"]["message_vectors"] = embed_missing_messages(account_id)
        log(f"message vectors: {payload['ingest']['message_vectors']}")
        payload["source_lane"] = run_source_lane(account_id, convs, readers)
        write()
        log(f"source lane: {payload['source_lane']}")
    if not args.skip_ask:
        payload["ask"] = run_ask(account_id, convs, readers, prov, effort=args.ask_effort,
                                 source_recall=args.source_recall)
        write()
        for c, v in payload["ask"]["by_category"].items():
            log(f"ask category {c}: answer rate {v['answer_rate']}, abstention "
                f"{v['abstention_rate']}, mean confidence {v['mean_confidence']}, cited "
                f"evidence hit {v['cited_evidence_hit_rate']}")
        lat = payload["ask"]["latency_ms"]
        log(f"ask latency p50/p95/p99 {lat['p50']}/{lat['p95']}/{lat['p99']} ms")
        rows = payload["ask"].pop("relevance_rows")
        if not args.skip_abstention:
            payload["abstention"] = run_abstention(account_id, convs, readers, rows)
            write()
            ab = payload["abstention"]
            log(f"abstention at floor {ab['shipped_floor']}: {ab['at_shipped_floor']}; "
                f"observed {ab['observed']}; leave-one-conversation-out "
                f"{ab['leave_one_conversation_out']['mean']}")
    payload["python_peak_rss_mb"] = common.python_peak_rss_mb()
    payload["config"]["loadavg_end"] = os.getloadavg()
    write()
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
