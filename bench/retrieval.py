"""LoCoMo evidence recall (governed search vs raw-turn baselines) and scale latency.

    .venv/bin/python bench/retrieval.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --out bench/results/retrieval.json --plot bench/results/retrieval.png \
        [--limit-conversations N] [--sizes 10000,100000,1000000] [--skip-scale] [--keep-db]
        [--cv]

One command, one private database (bench_retrieval):
  a. ingest LoCoMo through the pipeline (bench/common.py), rebuild the entity index, then
     for every QA of categories 1-4 run retrieval.engine.search for the profiles balanced
     and thorough (internal reader, the conversation's scope, limit 20) and score evidence
     recall@5/10/20 through KnowledgeSource provenance;
  b. the same questions against a dense-only (numpy cosine, same embedder) and an FTS-only
     (PostgreSQL ts_rank_cd) baseline over the raw turns, and their RRF (k=60) hybrid over
     "Speaker: text" turns; every system also gets session-level recall_any/all@5/10 and
     NDCG@10 (definitions in bench/README.md);
  a2. with --cv, leave-one-conversation-out cross-validation of balanced's fusion
     parameters (CV_GRID), reusing the one ingest;
  c. scale latency of balanced searches over synthetic statements in one Account among 10;
  d. JSON (keys in bench/README.md) and a PNG plot.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

import numpy as np  # noqa: E402

from bench import common  # noqa: E402
from bench.common import log  # noqa: E402

KS = (5, 10, 20)
CATEGORIES = ("1", "2", "3", "4")
CATEGORY_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}
PROFILES = ("balanced", "thorough")


# =======================================================================================
# Recall bookkeeping
# =======================================================================================


_TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def proc_cpu_ms(pid: int) -> float:
    """CPU time (user + system) a process has used, from /proc (clock-tick resolution)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) * _TICK_MS


def backend_cpu_ms() -> float:
    """CPU time of this thread's database backend so far (0 without a connection)."""
    from django.db import connection

    raw = connection.connection
    return proc_cpu_ms(raw.info.backend_pid) if raw is not None else 0.0


def server_cpu_ms() -> dict[int, float]:
    """CPU time of every process of the embedded PostgreSQL server (backends, parallel
    workers, background processes) by pid, for CPU per search whatever the load."""
    postmaster = common._postmaster_pid()
    if postmaster is None:
        return {}
    return {pid: proc_cpu_ms(pid) for pid, _ in common._server_processes(postmaster)}


def cpu_since(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU the server used between two server_cpu_ms() readings (a process that ended in
    between is not counted: negligible for a search's short-lived parallel workers)."""
    return sum(ms - before.get(pid, 0.0) for pid, ms in after.items())


class StrategyTimer:
    """Per-strategy timings, by wrapping (at run time, in this process only) the engine's
    `_execute` (connection + transaction + SET LOCAL + strategy) and each FIRST_STAGE
    function (the strategy body alone). App code is not modified. Beside wall time each
    body reports its CPU time: Python (its thread) and PostgreSQL (its backend, at the
    kernel's clock-tick resolution, so only the mean over many searches means much),
    which a shared machine's load does not inflate."""

    def __init__(self) -> None:
        self.exec_ms: dict[str, list[float]] = defaultdict(list)
        self.run_ms: dict[str, list[float]] = defaultdict(list)
        self.py_cpu_ms: dict[str, list[float]] = defaultdict(list)
        self.pg_cpu_ms: dict[str, list[float]] = defaultdict(list)
        self._lock = __import__("threading").Lock()
        self._saved: dict[str, Any] = {}

    def install(self) -> StrategyTimer:
        from retrieval import engine

        self._saved = {"_execute": engine._execute, "stage": dict(engine.FIRST_STAGE)}
        orig_exec = engine._execute

        def timed_exec(run: Any, ctx: Any, deadline: float, running: Any, *rest: Any) -> Any:
            t = time.monotonic()
            try:
                return orig_exec(run, ctx, deadline, running, *rest)
            finally:
                name = getattr(run, "_bench_name", getattr(run, "__module__", "?"))
                with self._lock:
                    self.exec_ms[name.rsplit(".", 1)[-1]].append(
                        (time.monotonic() - t) * 1000)

        for name, fn in list(engine.FIRST_STAGE.items()):
            engine.FIRST_STAGE[name] = self._wrap(name, fn)
        engine._execute = timed_exec
        # Main-thread phases: query embedding + space lookup, and page hydration.
        self._saved["_space_and_vector"] = engine._space_and_vector
        self._saved["_hydrate"] = engine._hydrate
        engine._space_and_vector = self._wrap("phase:query_vector", engine._space_and_vector)
        engine._hydrate = self._wrap("phase:hydrate", engine._hydrate)
        # Semantic's message lanes, inside semantic's body.
        from retrieval.strategies import semantic

        self._saved["lanes"] = {n: getattr(semantic, n) for n in ("_source_turns", "_said_when")}
        for n, fn in self._saved["lanes"].items():
            setattr(semantic, n, self._wrap(f"lane:{n.lstrip('_')}", fn))
        return self

    def _wrap(self, name: str, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t, py, pg = time.monotonic(), time.thread_time(), backend_cpu_ms()
            try:
                return fn(*args, **kwargs)
            finally:
                wall = (time.monotonic() - t) * 1000
                py_ms, pg_ms = (time.thread_time() - py) * 1000, backend_cpu_ms() - pg
                with self._lock:
                    self.run_ms[name].append(wall)
                    self.py_cpu_ms[name].append(py_ms)
                    self.pg_cpu_ms[name].append(pg_ms)
        timed._bench_name = name  # type: ignore[attr-defined]
        return timed

    def uninstall(self) -> None:
        from retrieval import engine

        if self._saved:
            engine._execute = self._saved["_execute"]
            engine._space_and_vector = self._saved["_space_and_vector"]
            engine._hydrate = self._saved["_hydrate"]
            engine.FIRST_STAGE.clear()
            engine.FIRST_STAGE.update(self._saved["stage"])
            from retrieval.strategies import semantic

            for n, fn in self._saved["lanes"].items():
                setattr(semantic, n, fn)
            self._saved = {}

    def report(self) -> dict[str, Any]:
        return {"strategy_body_ms": {k: pct(v) for k, v in sorted(self.run_ms.items())},
                "strategy_with_connection_ms": {k: pct(v)
                                                for k, v in sorted(self.exec_ms.items())},
                "strategy_python_cpu_ms": {k: pct(v) for k, v in sorted(self.py_cpu_ms.items())},
                "strategy_postgres_cpu_ms": {k: pct(v)
                                             for k, v in sorted(self.pg_cpu_ms.items())},
                "note": "strategy_with_connection_ms = engine._execute: the thread's kept "
                        "connection (pinged only after an idle spell), transaction, "
                        "set_account with the strategy's settings, strategy body; "
                        "relation_expand runs through _execute too (module name 'relation'). "
                        "*_cpu_ms: the body's CPU, its thread (Python) and its backend "
                        "(PostgreSQL, clock ticks: read the mean); a strategy answered "
                        "without a thread (temporal without as_of) has no entry"}


# Per-question metric keys (definitions in bench/README.md, "Metrics").
SESSION_KS = (5, 10)
METRIC_KEYS = (*(f"recall_at_{k}" for k in KS),
               *(f"session_recall_{m}_at_{k}" for m in ("any", "all") for k in SESSION_KS),
               "ndcg_at_10", "session_ndcg_at_10", "session_recall_any_at_5_dedup10")


def question_scores(evidence: list[str], ranked_dias: list[set[str]]) -> dict[str, float]:
    """Every metric of one question, from its evidence dia_ids and the ranked items (each
    item = the dia_ids it stands for)."""
    wanted = set(evidence)
    sessions = {common.session_of(e) for e in wanted}
    ranked_s = common.item_sessions(ranked_dias)
    out = {f"recall_at_{k}": common.recall_share(wanted, ranked_dias, k) for k in KS}
    for k in SESSION_KS:
        out[f"session_recall_any_at_{k}"] = common.recall_any(sessions, ranked_s, k)
        out[f"session_recall_all_at_{k}"] = common.recall_all(sessions, ranked_s, k)
    out["ndcg_at_10"] = common.ndcg(wanted, ranked_dias, 10)
    out["session_ndcg_at_10"] = common.ndcg(sessions, ranked_s, 10)
    # The headline: the top 10 items deduplicated to sessions, the first 5 of them.
    dedup = [{s} for s in common.sessions_dedup(ranked_s, 10)]
    out["session_recall_any_at_5_dedup10"] = common.recall_any(sessions, dedup, 5)
    return out


class RecallTable:
    """Per-question metrics, aggregated per category and overall (mean over questions)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, dict[str, float]]] = []

    def add(self, category: str, evidence: list[str], ranked_dias: list[set[str]],
            conv: str = "") -> None:
        self.rows.append((conv, category, question_scores(evidence, ranked_dias)))

    def summary(self, convs: set[str] | None = None) -> dict[str, Any]:
        rows = [r for r in self.rows if convs is None or r[0] in convs]
        out: dict[str, Any] = {}
        for key in METRIC_KEYS:
            per: dict[str, Any] = {}
            allv = [s[key] for _, _, s in rows]
            per["overall"] = round(float(np.mean(allv)), 4) if allv else None
            for c in CATEGORIES:
                v = [s[key] for _, cat, s in rows if cat == c]
                per[c] = round(float(np.mean(v)), 4) if v else None
            out[key] = per
        out["questions"] = {"overall": len(rows),
                            **{c: sum(1 for _, cat, _ in rows if cat == c)
                               for c in CATEGORIES}}
        return out


def pct(values: list[float], ps: tuple[int, ...] = (50, 95, 99)) -> dict[str, float | None]:
    if not values:
        return {f"p{p}": None for p in ps}
    arr = np.asarray(values, dtype=float)
    out: dict[str, float | None] = {f"p{p}": round(float(np.percentile(arr, p)), 2) for p in ps}
    out["mean"] = round(float(arr.mean()), 2)
    out["max"] = round(float(arr.max()), 2)
    out["n"] = len(values)
    return out


# =======================================================================================
# a. governed search over the pipeline's knowledge
# =======================================================================================


def questions(conv: common.Conversation) -> tuple[list[dict[str, Any]], dict[str, int]]:
    out, skipped = [], {"category_5": 0, "no_evidence": 0}
    for q in conv.qa:
        cat = str(q.get("category"))
        if cat not in CATEGORIES:
            skipped["category_5"] += 1
            continue
        ev = common.normalise_evidence(q.get("evidence"))
        if not ev:
            skipped["no_evidence"] += 1
            continue
        out.append({"question": q["question"], "category": cat, "evidence": ev})
    return out, skipped


def provenance_map(account_id: Any) -> dict[str, set[str]]:
    """knowledge id -> dia_ids of its source messages (KnowledgeSource -> Message)."""
    from knowledge.models import KnowledgeSource
    from memhouse.core.tenancy import account_context

    out: dict[str, set[str]] = defaultdict(set)
    with account_context(account_id):
        for kid, cmid in KnowledgeSource.objects.filter(message__isnull=False).values_list(
                "knowledge_id", "message__client_message_id"):
            if cmid and ":" in cmid:
                out[str(kid)].add(cmid.split(":", 1)[1])
    return out


def searchable_coverage(account_id: Any, convs: list[common.Conversation],
                        qs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Ceiling for the governed systems: share of a question's evidence turns that are a
    source of at least one knowledge row the internal reader can retrieve
    (knowledge.selectors.visible_knowledge), and of any knowledge row at all."""
    from django.utils import timezone

    from knowledge.models import KnowledgeSource
    from knowledge.selectors import visible_knowledge
    from memhouse.core.principal import internal_reader
    from memhouse.core.tenancy import account_context

    reader = internal_reader(account_id)
    with account_context(account_id):
        vis = visible_knowledge(reader=reader, at=timezone.now()).values("id")
        searchable = set(KnowledgeSource.objects.filter(
            knowledge_id__in=vis, message__isnull=False).values_list(
            "message__client_message_id", flat=True))
        any_row = set(KnowledgeSource.objects.filter(message__isnull=False).values_list(
            "message__client_message_id", flat=True))
    out: dict[str, Any] = {}
    for name, covered in (("searchable_knowledge", searchable), ("any_knowledge", any_row)):
        table = RecallTable()
        for conv in convs:
            for q in qs[conv.sample_id]:
                hit = {e for e in q["evidence"] if f"{conv.sample_id}:{e}" in covered}
                table.add(q["category"], q["evidence"], [hit], conv.sample_id)
        out[f"evidence_share_with_{name}"] = table.summary()["recall_at_5"]
    turns = sum(len(c.turns) for c in convs)
    out["turns_with_searchable_knowledge"] = len(searchable)
    out["turns_with_any_knowledge"] = len(any_row)
    out["turns"] = turns
    return out


def count_drops(res: Any, dropped: dict[str, int]) -> None:
    """A search's dropped strategies and lanes into `dropped`, as `name:reason`."""
    for d in res.strategies["dropped"]:
        dropped[f"{d['name']}:{d['reason']}"] += 1
    for o in res.retrieval_outcomes:  # a lane past its own time (semantic stays)
        if o["outcome"] == "dropped":
            dropped[f"{o['strategy']}:{o['reason_class']}"] += 1


def run_profiles(account_id: Any, convs: list[common.Conversation],
                 qs: dict[str, list[dict[str, Any]]], prov: dict[str, set[str]],
                 profiles: tuple[str, ...],
                 captured: dict[str, list[Captured]] | None = None) -> dict[str, Any]:
    """Search every question with each profile and score it. With `captured`, also keep
    each search's per-strategy lists and returned ids (for the cross-validation grid)."""
    from knowledge.models import Scope
    from memhouse.core.principal import internal_reader
    from memhouse.core.tenancy import account_context
    from retrieval import engine
    from retrieval.embedding import query_cache
    from retrieval.profiles import BASE_PROFILES

    reader = internal_reader(account_id)
    out: dict[str, Any] = {}
    with account_context(account_id):
        scopes = {c.sample_id: Scope.objects.get(id=c.scope_id) for c in convs}
    for pname in profiles:
        profile = BASE_PROFILES[pname]
        table = RecallTable()
        wall: list[float] = []
        engine_ms: list[float] = []
        dropped: dict[str, int] = defaultdict(int)
        contributed: dict[str, int] = defaultdict(int)
        returned: list[int] = []
        reranks: dict[str, int] = defaultdict(int)
        no_prov = 0
        timer = StrategyTimer().install()
        n_total = sum(len(v) for v in qs.values())
        done = 0
        for conv in convs:
            for q in qs[conv.sample_id]:
                query_cache().clear()  # every search pays its own query embedding
                t = time.monotonic()
                with account_context(account_id):
                    res = engine.search(reader=reader, scope=scopes[conv.sample_id],
                                        query=q["question"], profile=profile, limit=20)
                wall.append((time.monotonic() - t) * 1000)
                engine_ms.append(res.elapsed_ms)
                count_drops(res, dropped)
                for name in res.strategies["contributed"]:
                    contributed[name] += 1
                reranks[":".join(str(v) for v in (res.rerank.get("status"),
                                                    res.rerank.get("reason")) if v)] += 1
                ids = [c["id"] for c in res.candidates]
                returned.append(len(ids))
                ranked = [prov.get(i, set()) for i in ids]
                no_prov += sum(1 for r in ranked if not r)
                table.add(q["category"], q["evidence"], ranked, conv.sample_id)
                if captured is not None:
                    captured.setdefault(pname, []).append(
                        Captured(conv.sample_id, q, dict(res.lists), ids))
                done += 1
                if done % 100 == 0 or done == n_total:
                    log(f"{pname}: {done}/{n_total} searches, p50 "
                        f"{np.percentile(wall, 50):.0f} ms")
        out[pname] = {
            **table.summary(),
            "latency_ms": pct(wall),
            "engine_elapsed_ms": pct(engine_ms),
            "dropped_strategies": dict(dropped),
            "contributed_strategies": dict(contributed),
            "rerank_outcomes": dict(reranks),
            "mean_candidates_returned": round(float(np.mean(returned)), 2) if returned else 0,
            "candidates_without_provenance": no_prov,
            "profile_version": profile.version,
            "strategy_timings": timer.report(),
        }
        timer.uninstall()
    return out


# =======================================================================================
# a2. leave-one-conversation-out cross-validation of balanced's fusion parameters
# =======================================================================================


@dataclass
class Captured:
    """One search as the engine ran it: the per-strategy lists fusion saw, and the ids the
    engine returned (for the re-fusion check)."""

    conv: str
    q: dict[str, Any]
    lists: dict[str, list[tuple[str, float]]]
    ids: list[str]


# The parameters of balanced that bench tunes. Only the weights' ratios order the fused
# list, so lexical stays 1.0 and the others move around it; temporal is configured but not
# applicable without as_of (it returns no list), so its weight only rescales every score
# and is left at the shipped 0.6. `head` is each strategy's pool (also semantic's
# ef_search = 2 * head), so every head value is its own search pass; weights and rrf_k are
# applied offline with retrieval.fusion.fuse to the lists that pass captured.
# `source_turns` is the weight of semantic's source-turn lane (0: the lane left out),
# `said_when` the weight of its said-when lane (0: left out).
CV_GRID: dict[str, tuple[Any, ...]] = {
    "head": (30, 50, 80),
    "semantic": (1.0, 1.5, 2.0, 2.5, 3.0),
    "entity_match": (0.0, 0.3, 0.6, 1.0),
    "rrf_k": (5, 15, 60),
    "source_turns": (0.0, 1.0, 1.5),
    "said_when": (0.0, 1.5, 2.5),
}
SOURCE_TURNS = "semantic.source_turns"
SAID_WHEN = "semantic.said_when"


@dataclass(frozen=True)
class GridPoint:
    head: int
    semantic: float
    entity_match: float
    rrf_k: int
    source_turns: float = 0.0
    said_when: float = 0.0

    def weights(self, base: dict[str, float]) -> dict[str, float]:
        return {**base, "lexical": 1.0, "semantic": self.semantic,
                "entity_match": self.entity_match, SOURCE_TURNS: self.source_turns,
                SAID_WHEN: self.said_when}

    def as_dict(self, base: dict[str, float]) -> dict[str, Any]:
        return {"head": self.head, "rrf_k": self.rrf_k, "weights": self.weights(base)}


def capture_pass(account_id: Any, convs: list[common.Conversation],
                 qs: dict[str, list[dict[str, Any]]], profile: Any) -> list[Captured]:
    """Every question searched once with `profile` (limit 20), lists kept."""
    from knowledge.models import Scope
    from memhouse.core.principal import internal_reader
    from memhouse.core.tenancy import account_context
    from retrieval import engine

    reader = internal_reader(account_id)
    out: list[Captured] = []
    with account_context(account_id):
        scopes = {c.sample_id: Scope.objects.get(id=c.scope_id) for c in convs}
        for conv in convs:
            for q in qs[conv.sample_id]:
                res = engine.search(reader=reader, scope=scopes[conv.sample_id],
                                    query=q["question"], profile=profile, limit=20)
                out.append(Captured(conv.sample_id, q, dict(res.lists),
                                    [c["id"] for c in res.candidates]))
    return out


def refuse(c: Captured, weights: dict[str, float], rrf_k: int, limit: int = 20) -> list[str]:
    from retrieval import fusion

    # A lane weighted 0 is a lane left out (its list does not enter fusion at all).
    lists = {n: items for n, items in c.lists.items() if "." not in n or weights.get(n)}
    weights = {n: w for n, w in weights.items() if "." not in n or w}
    return [f.id for f in fusion.fuse(lists, weights, rrf_k=rrf_k)[:limit]]


def choose(points: list[Any], scores: dict[Any, np.ndarray], mask: np.ndarray,
           shipped: Any) -> Any:
    """The point with the highest mean score over the masked questions; ties go to the
    shipped point, then to the earlier point, so a flat optimum does not move the
    parameters."""
    if not mask.any():
        raise ValueError("no questions to choose on")
    return max(points, key=lambda p: (round(float(scores[p][mask].mean()), 6),
                                      p == shipped, -points.index(p)))


def cross_validate(account_id: Any, convs: list[common.Conversation],
                   qs: dict[str, list[dict[str, Any]]], prov: dict[str, set[str]],
                   shipped_pass: list[Captured]) -> dict[str, Any]:
    """Leave one conversation out: for each conversation, the grid point with the best
    mean recall@10 over the questions of the other four is applied to it. Reports the
    pooled held-out figures beside the in-sample optimum and the shipped parameters."""
    from dataclasses import replace

    from retrieval.profiles import BASE_PROFILES

    base = BASE_PROFILES["balanced"]
    started = time.monotonic()
    passes: dict[int, list[Captured]] = {base.head: shipped_pass}
    for head in CV_GRID["head"]:
        if head not in passes:
            t = time.monotonic()
            passes[head] = capture_pass(account_id, convs, qs, replace(
                base, head=head, version=f"{base.version}+bench-head{head}"))
            log(f"cv: search pass head={head} ({len(passes[head])} searches) in "
                f"{time.monotonic() - t:.0f}s")
    shipped = GridPoint(base.head, base.weights["semantic"], base.weights["entity_match"],
                        base.rrf_k, base.weights.get(SOURCE_TURNS, 0.0),
                        base.weights.get(SAID_WHEN, 0.0))
    # Re-fusing the captured lists with the shipped parameters must give the engine's order.
    same = sum(refuse(c, dict(base.weights), base.rrf_k) == c.ids for c in shipped_pass)

    points = [GridPoint(h, s, e, k, t, w) for h in CV_GRID["head"] for s in CV_GRID["semantic"]
              for e in CV_GRID["entity_match"] for k in CV_GRID["rrf_k"]
              for t in CV_GRID["source_turns"] for w in CV_GRID["said_when"]]
    if shipped not in points:
        points.insert(0, shipped)
    conv_of = np.asarray([c.conv for c in shipped_pass])
    r10: dict[GridPoint, np.ndarray] = {}
    for i, pt in enumerate(points, start=1):
        w = pt.weights(dict(base.weights))
        vals = []
        for c in passes[pt.head]:
            found: set[str] = set()
            for kid in refuse(c, w, pt.rrf_k, limit=10):
                found |= prov.get(kid, set())
            ev = set(c.q["evidence"])
            vals.append(len(ev & found) / len(ev))
        r10[pt] = np.asarray(vals)
        if i % 24 == 0 or i == len(points):
            log(f"cv: grid {i}/{len(points)} points scored "
                f"({time.monotonic() - started:.0f}s)")

    def best(mask: np.ndarray) -> GridPoint:
        return choose(points, r10, mask, shipped)

    def table_for(chosen: dict[str, GridPoint]) -> RecallTable:
        table = RecallTable()
        for conv_id, pt in chosen.items():
            w = pt.weights(dict(base.weights))
            for c in passes[pt.head]:
                if c.conv == conv_id:
                    ranked = [prov.get(k, set()) for k in refuse(c, w, pt.rrf_k)]
                    table.add(c.q["category"], c.q["evidence"], ranked, c.conv)
        return table

    ids = [c.sample_id for c in convs]
    folds, chosen = [], {}
    for held in ids:
        train = conv_of != held
        pt = best(train)
        chosen[held] = pt
        folds.append({"held_out": held, "questions": int((~train).sum()),
                      "chosen": pt.as_dict(dict(base.weights)),
                      "train_recall_at_10": round(float(r10[pt][train].mean()), 4),
                      "held_out_recall_at_10": round(float(r10[pt][~train].mean()), 4),
                      "shipped_held_out_recall_at_10":
                          round(float(r10[shipped][~train].mean()), 4)})
        log(f"cv: held out {held}: chose {pt}, held-out recall@10 "
            f"{folds[-1]['held_out_recall_at_10']} (shipped "
            f"{folds[-1]['shipped_held_out_recall_at_10']})")
    everything = np.ones(len(conv_of), dtype=bool)
    in_best = best(everything)
    # The same procedure without the source-turn lane, to say what the lane adds.
    no_lane = [p for p in points if not p.source_turns]
    shipped_no_lane = replace(shipped, source_turns=0.0)
    chosen_no_lane = {held: choose(no_lane, r10, conv_of != held, shipped_no_lane)
                      for held in ids}
    in_best_no_lane = choose(no_lane, r10, everything, shipped_no_lane)
    # And without the said-when lane.
    no_when = [p for p in points if not p.said_when]
    shipped_no_when = replace(shipped, said_when=0.0)
    chosen_no_when = {held: choose(no_when, r10, conv_of != held, shipped_no_when)
                      for held in ids}
    in_best_no_when = choose(no_when, r10, everything, shipped_no_when)
    top = sorted(points, key=lambda p: -float(r10[p].mean()))[:10]
    return {
        "method": "leave-one-conversation-out; per fold the grid point with the best mean "
                  "recall@10 over the other conversations' questions; held-out questions "
                  "pooled (each question scored once, by parameters chosen without its "
                  "conversation)",
        "grid": {k: list(v) for k, v in CV_GRID.items()},
        "fixed": {"lexical": 1.0, "temporal": base.weights["temporal"],
                  "note": "only weight ratios order the list; temporal is not applicable "
                          "without as_of"},
        "grid_points": len(points),
        "refusion_matches_engine": f"{same}/{len(shipped_pass)}",
        "shipped": {**shipped.as_dict(dict(base.weights)),
                    **table_for(dict.fromkeys(ids, shipped)).summary()},
        "in_sample_optimum": {**in_best.as_dict(dict(base.weights)),
                              **table_for(dict.fromkeys(ids, in_best)).summary()},
        "cross_validated": table_for(chosen).summary(),
        "without_source_turns": {
            "in_sample_optimum": {**in_best_no_lane.as_dict(dict(base.weights)),
                                  **table_for(dict.fromkeys(ids, in_best_no_lane)).summary()},
            "cross_validated": table_for(chosen_no_lane).summary()},
        "without_said_when": {
            "in_sample_optimum": {**in_best_no_when.as_dict(dict(base.weights)),
                                  **table_for(dict.fromkeys(ids, in_best_no_when)).summary()},
            "cross_validated": table_for(chosen_no_when).summary()},
        "folds": folds,
        "top_points_in_sample": [{**p.as_dict(dict(base.weights)),
                                  "recall_at_10": round(float(r10[p].mean()), 4)}
                                 for p in top],
        "seconds": round(time.monotonic() - started, 1),
    }


# =======================================================================================
# b. raw-turn baselines
# =======================================================================================


def turn_text(turn: common.Turn, speaker: bool) -> str:
    return f"{turn.speaker}: {turn.text}" if speaker else turn.text


Rankings = dict[str, list[list[str]]]  # conversation -> per question, dia_ids best first


def score_rankings(convs: list[common.Conversation], qs: dict[str, list[dict[str, Any]]],
                   rankings: Rankings, top: int = 20) -> RecallTable:
    table = RecallTable()
    for conv in convs:
        for q, ranked in zip(qs[conv.sample_id], rankings[conv.sample_id], strict=True):
            table.add(q["category"], q["evidence"], [{d} for d in ranked[:top]],
                      conv.sample_id)
    return table


def dense_baseline(convs: list[common.Conversation],
                   qs: dict[str, list[dict[str, Any]]], *, speaker: bool = False,
                   depth: int = 20, rankings: Rankings | None = None) -> dict[str, Any]:
    """Cosine over the raw turns of the question's conversation, same embedder: turns via
    embed_documents, questions as the embedder's query prefix + text (what embed_query
    embeds), in batches; numpy dot products of unit vectors; scored on the top 20 turns.
    The top `depth` turns per question are kept in `rankings` when it is given."""
    from retrieval.embedding import get_embedder

    emb = get_embedder()
    t0 = time.monotonic()
    turn_vecs, q_vecs = {}, {}
    for conv in convs:
        turns = [t for t in conv.turns if t.text.strip()]
        turn_vecs[conv.sample_id] = (
            [t.dia_id for t in turns],
            np.asarray(emb.embed_documents([turn_text(t, speaker) for t in turns]),
                       dtype=np.float32))
        q_vecs[conv.sample_id] = np.asarray(emb.embed_documents(
            [emb.query_prefix + q["question"] for q in qs[conv.sample_id]]), dtype=np.float32)
    embed_s = time.monotonic() - t0
    lat: list[float] = []
    ranks: Rankings = {} if rankings is None else rankings
    for conv in convs:
        dias, m = turn_vecs[conv.sample_id]
        ranks[conv.sample_id] = []
        for v in q_vecs[conv.sample_id]:
            t = time.monotonic()
            order = np.argsort(-(m @ v), kind="stable")[:max(depth, 20)]
            lat.append((time.monotonic() - t) * 1000)
            ranks[conv.sample_id].append([dias[i] for i in order])
    table = score_rankings(convs, qs, ranks)
    log(f"dense baseline (speaker={speaker}) done (embedding {embed_s:.1f}s)")
    return {**table.summary(), "latency_ms_excluding_embedding": pct(lat),
            "embedding_seconds_turns_and_questions": round(embed_s, 2)}


FTS_DDL = """
DROP TABLE IF EXISTS bench_turn;
CREATE TABLE bench_turn (
    conv text NOT NULL,
    dia_id text NOT NULL,
    text text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
    PRIMARY KEY (conv, dia_id)
);
CREATE INDEX bench_turn_tsv ON bench_turn USING gin (tsv);
"""

# The OR of the question's terms: the question's English lexemes (stemmed, stop words
# removed by to_tsvector('english', ...)), each quoted and joined with '|', cast to tsquery
# (a cast does not normalise again). Ranked by ts_rank_cd(tsv, q) with the default
# normalisation 0, ties by dia_id.
FTS_QUERY = """
WITH q AS (
    SELECT (SELECT string_agg(quote_literal(l), ' | ')
            FROM unnest(tsvector_to_array(to_tsvector('english', %s))) AS l)::tsquery AS q
)
SELECT t.dia_id, ts_rank_cd(t.tsv, q.q) AS rank
FROM bench_turn t, q
WHERE t.conv = %s AND q.q IS NOT NULL AND t.tsv @@ q.q
ORDER BY rank DESC, t.dia_id
LIMIT %s
"""


def fts_baseline(convs: list[common.Conversation],
                 qs: dict[str, list[dict[str, Any]]], *, speaker: bool = False,
                 depth: int = 20, rankings: Rankings | None = None) -> dict[str, Any]:
    """PostgreSQL full text over the raw turns (FTS_QUERY), scored on the top 20; the top
    `depth` matches per question are kept in `rankings` when it is given."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(FTS_DDL)
        rows = [(c.sample_id, t.dia_id, turn_text(t, speaker)) for c in convs for t in c.turns
                if t.text.strip()]
        cur.executemany("INSERT INTO bench_turn (conv, dia_id, text) VALUES (%s, %s, %s)",
                        rows)
        cur.execute("ANALYZE bench_turn")
    lat: list[float] = []
    empty = 0
    ranks: Rankings = {} if rankings is None else rankings
    with connection.cursor() as cur:
        for conv in convs:
            ranks[conv.sample_id] = []
            for q in qs[conv.sample_id]:
                t = time.monotonic()
                cur.execute(FTS_QUERY, [q["question"], conv.sample_id, max(depth, 20)])
                hits = [r[0] for r in cur.fetchall()]
                lat.append((time.monotonic() - t) * 1000)
                empty += not hits
                ranks[conv.sample_id].append(hits)
    table = score_rankings(convs, qs, ranks)
    log(f"fts baseline (speaker={speaker}) done")
    return {**table.summary(), "latency_ms": pct(lat), "questions_with_no_match": empty,
            "query": " ".join(FTS_QUERY.split())}


HYBRID_DEPTH = 100  # turns taken from each of the dense and FTS lists before fusion
HYBRID_RRF_K = 60


def hybrid_ranking(dense: list[str], fts: list[str]) -> list[str]:
    """One question's whole hybrid ranking (dia_ids best first, not cut at 20): the top
    HYBRID_DEPTH of its dense and of its FTS list fused by RRF, k = HYBRID_RRF_K.
    bench/answer_in_context.py packs its raw-turn baseline from it."""
    return common.rrf([dense[:HYBRID_DEPTH], fts[:HYBRID_DEPTH]], k=HYBRID_RRF_K)


def hybrid_baseline(convs: list[common.Conversation], qs: dict[str, list[dict[str, Any]]],
                    dense: Rankings, fts: Rankings) -> dict[str, Any]:
    """The afternoon baseline: the dense and the FTS ranking of the same "Speaker: text"
    turns (top HYBRID_DEPTH of each) fused by reciprocal-rank fusion, k = 60; top 20."""
    fused: Rankings = {}
    lat: list[float] = []
    for conv in convs:
        fused[conv.sample_id] = []
        for d, f in zip(dense[conv.sample_id], fts[conv.sample_id], strict=True):
            t = time.monotonic()
            fused[conv.sample_id].append(hybrid_ranking(d, f)[:20])
            lat.append((time.monotonic() - t) * 1000)
    table = score_rankings(convs, qs, fused)
    log("hybrid baseline done")
    return {**table.summary(), "fusion_latency_ms": pct(lat),
            "lists": "dense_baseline_speaker + fts_baseline_speaker",
            "depth_per_list": HYBRID_DEPTH, "rrf_k": HYBRID_RRF_K}


# =======================================================================================
# c. scale latency
# =======================================================================================

FIRST = tuple("""Ada Alan Alice Amara Anika Arjun Astrid Bea Ben Bianca Boris Carla Carlos
Chen Chloe Dana Daniel Dara Diego Elena Eli Emil Emma Esme Ezra Farah Felix Fiona Frank Gabe
Gia Gina Grace Hana Hugo Ian Ines Ingrid Ivan Jada Jamal Jana Jon Jonas Joy Kai Kamal Kara
Kenji Kira Lara Leo Lena Liam Lina Luca Lucia Maja Malik Mara Marco Maya Mei Milo Mina Nadia
Nate Nia Nico Nina Noah Nora Olga Omar Oscar Paula Pedro Priya Quinn Rafa Ravi Rhea Rosa Ruth
Sami Sara Sean Sofia Tariq Tess Theo Tina Tom Uma Vera Victor Wade Wen Yara Yusuf Zara
Zoe""".split())  # noqa: SIM905
VERBS = tuple("""visited painted cooked photographed repaired organised joined studied
sketched planted baked recorded hiked climbed sailed rebuilt designed taught practised
presented wrote read adopted trained coached volunteered restored assembled composed knitted
brewed filmed mapped tested sold bought rented shared celebrated hosted booked cancelled
finished started""".split())  # noqa: SIM905
OBJECTS = tuple("""garden mural bicycle guitar novel sourdough kayak telescope quilt podcast
workshop marathon exhibition recital bakery aquarium greenhouse robot drone camera violin
canoe tent mosaic pottery sculpture website newsletter album fundraiser playground library
orchard vineyard treehouse puzzle chessboard lantern piano notebook portfolio recipe scarf
poster calendar terrarium skateboard surfboard hammock fireplace balcony""".split())  # noqa: SIM905
PLACES = tuple("""Lisbon Oslo Kyoto Denver Austin Nairobi Porto Dublin Seoul Lima Quebec Cusco
Tromso Hanoi Bergen Malaga Tucson Galway Krakow Ghent Cork Perth Hobart Leeds Bruges Siena
Split Tallinn Riga Vilnius Bologna Toledo Seville Zagreb""".split())  # noqa: SIM905
ADJ = tuple("""old new small large blue red quiet noisy bright shared local community weekend
summer winter spring autumn evening morning family""".split())  # noqa: SIM905
TIMES = ("last spring", "during the summer", "in early March", "over the holidays",
         "after work", "on the weekend", "in late October", "before the move",
         "with friends", "for the first time", "again this year", "twice last month")
TEMPLATES = (
    "{a} {v} the {adj} {o} in {p} {t}.",
    "{a} and {b} {v} a {adj} {o} near {p}.",
    "{a} says the {o} in {p} was {adj} when they {v} it {t}.",
    "{a} {v} {b}'s {o} {t} and plans to go back to {p}.",
    "The {adj} {o} that {a} {v} {t} is still in {p}.",
    "{a} {v} a {o} for {b} {t}.",
)


def _zipf_choice(rng: random.Random, items: tuple[str, ...], s: float = 1.1) -> str:
    # Power-law choice so some terms are frequent and most are rare, as in real text.
    weights = _ZIPF_CACHE.setdefault((id(items), s), [1.0 / (i + 1) ** s
                                                      for i in range(len(items))])
    return rng.choices(items, weights=weights, k=1)[0]


_ZIPF_CACHE: dict[Any, list[float]] = {}


def _prototype(rng: random.Random) -> dict[str, str]:
    return {"a": _zipf_choice(rng, FIRST), "b": rng.choice(FIRST),
            "v": _zipf_choice(rng, VERBS), "o": _zipf_choice(rng, OBJECTS),
            "p": _zipf_choice(rng, PLACES)}


def _sentence(rng: random.Random, proto: dict[str, str]) -> str:
    tpl = rng.choice(TEMPLATES)
    fields = dict(proto)
    if rng.random() < 0.3:  # some drift inside a cluster keeps the text from repeating
        fields["p"] = rng.choice(PLACES)
    fields.update(adj=rng.choice(ADJ), t=rng.choice(TIMES))
    return tpl.format(**fields)


def _question(rng: random.Random, proto: dict[str, str]) -> str:
    forms = ("What did {a} do with the {o} in {p}?", "When did {a} {vb} the {o}?",
             "Where is the {o} that {a} {v}?", "Who {v} a {o} with {a}?",
             "What happened to {a}'s {o} in {p}?")
    vb = proto["v"][:-1] if proto["v"].endswith("ed") else proto["v"]
    return rng.choice(forms).format(vb=vb, **proto)


# The synthetic load's speakers per Account, statements per source message (LoCoMo dev:
# ~1.5), messages per session, and the share of statements that are personal facts about
# their speaker (hidden from the other speakers, and so are the messages they came from).
SCALE_PEERS = 4
SCALE_STATEMENTS_PER_MESSAGE = 1.5
SCALE_SESSION_MESSAGES = 20
SCALE_PERSONAL_SHARE = 0.1


class Scale:
    def __init__(self, *, sizes: list[int], n_queries: int, others_share: float,
                 clusters: int, noise: float, entities: bool, seed: int,
                 write: Any, warmup: int = 10, messages: bool = True,
                 dated_share: float = 0.0, peer_reader: bool = False,
                 explain_only: bool = False) -> None:
        self.explain_only = explain_only
        self.warmup = warmup
        self.messages = messages
        self.dated_share = dated_share
        self.peer_reader = peer_reader
        self.sizes = sizes
        self.n_queries = n_queries
        self.others_share = others_share
        self.n_clusters = clusters
        self.noise = noise
        self.entities = entities
        self.rng = random.Random(seed)
        self.nprng = np.random.default_rng(seed)
        self.write = write
        self.results: dict[str, Any] = {}

    # --- setup ----------------------------------------------------------------------
    def setup(self) -> None:
        from knowledge import services
        from memhouse.core.tenancy import account_context
        from retrieval.embedding import get_embedder
        from retrieval.vectors import index_name, message_index_name, space_ensure

        self.embedder = get_embedder()
        with account_context(uuid.uuid4()):
            self.space = space_ensure(self.embedder.identity)
        self.index = index_name(self.space)
        self.message_index = message_index_name(self.space)
        from django.db.models import Count

        from knowledge.accounts import list_account_ids
        from knowledge.models import Account, Knowledge

        existing = {}  # slug -> Account, in a reused database
        for aid in list_account_ids():
            with account_context(aid):
                found = Account.objects.filter(id=aid).first()
            if found is not None:
                existing[found.slug] = found
        from knowledge.models import Peer

        self.accounts: list[tuple[Any, Any]] = []
        self.have: dict[Any, int] = {}
        self.peers: dict[Any, list[Any]] = {}
        for i in range(10):
            acct = existing.get(f"scale-{i}")
            if acct is None:
                acct = services.account_create(name=f"Scale {i}", slug=f"scale-{i}")
            with account_context(acct.id):
                scope = services.scope_ensure(account_id=acct.id, path="/synthetic")
                have = Knowledge.objects.filter(scope=scope).aggregate(n=Count("id"))["n"]
                peers = []
                for p in range(SCALE_PEERS):
                    peer = Peer.objects.filter(key=f"speaker-{p}").first() or \
                        services.peer_create(account_id=acct.id, key=f"speaker-{p}",
                                             kind="human", display_name=f"Speaker {p}")
                    peers.append(peer.id)
            self.peers[acct.id] = peers
            self.accounts.append((acct.id, scope.id))
            self.have[acct.id] = int(have)
        self.target = self.accounts[0]
        self.protos = [_prototype(self.rng) for _ in range(self.n_clusters)]
        t = time.monotonic()
        texts = [_sentence(self.rng, p) for p in self.protos]
        self.centers = np.asarray(self.embedder.embed_documents(texts), dtype=np.float32)
        log(f"scale: {self.n_clusters} cluster centres embedded in "
            f"{time.monotonic() - t:.1f}s")
        qrng = random.Random(12345)
        self.queries = [_question(qrng, self.protos[qrng.randrange(self.n_clusters)])
                        for _ in range(self.n_queries)]
        # A share of the questions names a time, so semantic's said-when lane reads the
        # messages said then (a month of any year, or a month of a given year).
        months = ("January", "February", "March", "April", "May", "June", "July", "August",
                  "September", "October", "November", "December")
        year = datetime.now(UTC).year
        for i in range(round(self.n_queries * self.dated_share)):
            j = (i * 7919) % self.n_queries
            when = qrng.choice(months) + (f" {qrng.choice((year - 1, year))}"
                                          if qrng.random() < 0.5 else "")
            self.queries[j] = self.queries[j].rstrip("?") + f" in {when}?"

    # --- loading --------------------------------------------------------------------
    def _vectors(self, clusters: np.ndarray) -> np.ndarray:
        v = self.centers[clusters] + self.nprng.normal(
            0.0, self.noise, size=(len(clusters), self.centers.shape[1])).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return v

    def _insert(self, account_id: Any, scope_id: Any, n: int, chunk: int = 20000) -> None:
        from django.db import connection
        from django.utils import timezone
        from pgvector.psycopg import register_vector

        from knowledge.models import Knowledge
        from memhouse.core.tenancy import account_context

        fields = [f for f in Knowledge._meta.concrete_fields]
        cols = [str(f.column) for f in fields]
        now = timezone.now()
        kinds = ["fact", "event", "preference", "relation", "skill"]
        peers = self.peers[account_id]
        done = 0
        while done < n:
            m = min(chunk, n - done)
            clusters = self.nprng.integers(0, self.n_clusters, size=m)
            vecs = self._vectors(clusters)
            ids = [uuid.uuid4() for _ in range(m)]
            # Statement j comes from message msg_of[j]; a message's time, speaker and
            # vector follow its first statement (sessions of consecutive messages).
            n_msgs = max(1, round(m / SCALE_STATEMENTS_PER_MESSAGE))
            msg_of = [j * n_msgs // m for j in range(m)]
            msg_ids = [uuid.uuid4() for _ in range(n_msgs)]
            first = {}
            for j, k in enumerate(msg_of):
                first.setdefault(k, j)
            n_sess = -(-n_msgs // SCALE_SESSION_MESSAGES)
            sess_ids = [uuid.uuid4() for _ in range(n_sess)]
            sess_when = [now - _td(self.rng.random() * 730) for _ in range(n_sess)]
            msg_when = [sess_when[k // SCALE_SESSION_MESSAGES] + _td(k % SCALE_SESSION_MESSAGES
                                                                    / 1440) for k in range(n_msgs)]
            msg_peer = [peers[self.rng.randrange(len(peers))] for _ in range(n_msgs)]
            texts = [_sentence(self.rng, self.protos[int(c)]) for c in clusters]
            with account_context(account_id):
                with connection.cursor() as cur:
                    cur.execute("SELECT set_config('memhouse.archive_import', 'on', true)")
                raw = connection.connection
                register_vector(raw)
                collist = ", ".join(cols)
                vcols = "id, account_id, knowledge_id, space_id, embedding, created_at"
                with raw.cursor() as cur:
                    # COPY cannot write into a table under RLS: COPY into temporary
                    # staging tables, then INSERT ... SELECT (RLS WITH CHECK and the
                    # knowledge guard trigger still apply to that INSERT).
                    cur.execute(f"CREATE TEMP TABLE bench_stage_k ON COMMIT DROP AS "
                                f"SELECT {collist} FROM memhouse_knowledge WITH NO DATA")
                    cur.execute(f"CREATE TEMP TABLE bench_stage_v ON COMMIT DROP AS "
                                f"SELECT {vcols} FROM memhouse_knowledge_vector WITH NO DATA")
                    with cur.copy(f"COPY bench_stage_k ({collist}) FROM STDIN") as cp:
                        for j, kid in enumerate(ids):
                            if self.messages:
                                when = msg_when[msg_of[j]]
                                personal = self.rng.random() < SCALE_PERSONAL_SHARE
                            else:
                                when, personal = now - _td(self.rng.random() * 730), False
                            values = {
                                "id": kid, "account_id": account_id, "scope_id": scope_id,
                                "statement": texts[j],
                                "subject_peer_id": msg_peer[msg_of[j]] if personal else None,
                                "kind": self.rng.choice(kinds),
                                "level": "peer" if personal else "scope",
                                "confidence": round(0.5 + 0.4 * self.rng.random(), 3),
                                "sensitivity": "personal" if personal else "internal",
                                "inserted_at": when,
                                "state": "active", "verification": "gate_keep",
                                "state_reason": "f4_gate_a_b_accepted",
                                "source_count": int(self.messages),
                                "extractor": "bench/synthetic", "updated_at": when,
                            }
                            cp.write_row([values[f.column] if f.column in values
                                          else _default(f) for f in fields])
                    with cur.copy(f"COPY bench_stage_v ({vcols}) "
                                  "FROM STDIN WITH (FORMAT BINARY)") as cp:
                        cp.set_types(["uuid", "uuid", "uuid", "uuid", "vector",
                                      "timestamptz"])
                        for kid, vec in zip(ids, vecs, strict=True):
                            cp.write_row([uuid.uuid4(), account_id, kid, self.space.id, vec,
                                          now])
                    if self.messages:
                        self._insert_messages(
                            cur, account_id, scope_id,
                            sessions=list(zip(sess_ids, sess_when, strict=True)),
                            messages=[(mid, sess_ids[k // SCALE_SESSION_MESSAGES],
                                       msg_peer[k], texts[first[k]], msg_when[k],
                                       vecs[first[k]]) for k, mid in enumerate(msg_ids)],
                            sources=[(kid, msg_ids[msg_of[j]]) for j, kid in enumerate(ids)],
                            now=now, flush_knowledge=(collist, vcols))
                    else:
                        cur.execute(f"INSERT INTO memhouse_knowledge ({collist}) "
                                    f"SELECT {collist} FROM bench_stage_k")
                        cur.execute(f"INSERT INTO memhouse_knowledge_vector ({vcols}) "
                                    f"SELECT {vcols} FROM bench_stage_v")
            done += m

    def _insert_messages(self, cur: Any, account_id: Any, scope_id: Any, *,
                         sessions: list[tuple[Any, Any]], messages: list[tuple[Any, ...]],
                         sources: list[tuple[Any, Any]], now: Any,
                         flush_knowledge: tuple[str, str]) -> None:
        """Sessions, messages (with their vectors) and one KnowledgeSource per statement,
        staged by COPY like the statements; the staged statements are inserted between
        the messages and their sources (foreign keys)."""
        from knowledge.models import KnowledgeSource, Message, Session
        from retrieval.models import MessageVector

        def stage(model: Any, rows: list[dict[str, Any]], binary: dict[str, str] | None = None
                  ) -> str:
            fields = list(model._meta.concrete_fields)
            cols = ", ".join(str(f.column) for f in fields)
            table = f"bench_stage_{model._meta.db_table.removeprefix('memhouse_')}"
            cur.execute(f"CREATE TEMP TABLE {table} ON COMMIT DROP AS "
                        f"SELECT {cols} FROM {model._meta.db_table} WITH NO DATA")
            if binary:
                with cur.copy(f"COPY {table} ({cols}) FROM STDIN WITH (FORMAT BINARY)") as cp:
                    cp.set_types([binary[str(f.column)] for f in fields])
                    for row in rows:
                        cp.write_row([row[str(f.column)] for f in fields])
            else:
                with cur.copy(f"COPY {table} ({cols}) FROM STDIN") as cp:
                    for row in rows:
                        values = [row[f.column] if f.column in row else _default(f)
                                  for f in fields]
                        cp.write_row([json.dumps(v) if isinstance(v, dict | list) else v
                                      for v in values])
            cur.execute(f"INSERT INTO {model._meta.db_table} ({cols}) SELECT {cols} FROM {table}")
            return table

        base = {"account_id": account_id, "scope_id": scope_id}
        stage(Session, [{**base, "id": sid, "external_id": f"synthetic-{sid.hex[:12]}",
                         "started_at": when} for sid, when in sessions])
        stage(Message, [{**base, "id": mid, "session_id": sid, "peer_id": peer, "text": text,
                         "occurred_at": when, "inserted_at": when, "extracted_at": when}
                        for mid, sid, peer, text, when, _ in messages])
        collist, vcols = flush_knowledge
        cur.execute(f"INSERT INTO memhouse_knowledge ({collist}) SELECT {collist} "
                    f"FROM bench_stage_k")
        cur.execute(f"INSERT INTO memhouse_knowledge_vector ({vcols}) SELECT {vcols} "
                    f"FROM bench_stage_v")
        noise = self.nprng.normal(0.0, self.noise / 2, size=(len(messages),
                                                             self.centers.shape[1]))
        mvecs = np.asarray([m[5] for m in messages], dtype=np.float32) + noise.astype(np.float32)
        mvecs /= np.linalg.norm(mvecs, axis=1, keepdims=True)
        stage(MessageVector, [{"id": uuid.uuid4(), "account_id": account_id, "message_id": m[0],
                               "space_id": self.space.id, "embedding": v,
                               "scope_id": scope_id, "said_at": m[4], "created_at": now}
                              for m, v in zip(messages, mvecs, strict=True)],
              binary={"id": "uuid", "account_id": "uuid", "message_id": "uuid",
                      "space_id": "uuid", "embedding": "vector", "scope_id": "uuid",
                      "said_at": "timestamptz", "created_at": "timestamptz"})
        stage(KnowledgeSource, [{"id": uuid.uuid4(), "account_id": account_id,
                                 "knowledge_id": kid, "message_id": mid,
                                 "document_version_id": None, "excerpt": "", "created_at": now}
                                for kid, mid in sources])

    def load_to(self, size: int) -> dict[str, Any]:
        from django.db import connection

        other = round(size * self.others_share / 9)
        want = {a: (size if a == self.target[0] else other) for a, _ in self.accounts}
        add = sum(max(0, want[a] - self.have[a]) for a in want)
        if add == 0 and all(self.have[a] == want[a] for a in want):
            log(f"scale {size}: reusing the loaded rows and their HNSW index")
            return {"rows_added": 0, "reused_database": True,
                    "target_account_rows": want[self.target[0]],
                    "other_account_rows_each": other,
                    "total_rows_all_accounts": sum(self.have.values())}
        t = time.monotonic()
        with connection.cursor() as cur:
            cur.execute(f"DROP INDEX IF EXISTS {self.index}")
            cur.execute(f"DROP INDEX IF EXISTS {self.message_index}")
        # space_ensure creates a space's index once per process: forget it, so the call
        # after the load builds it again (without this the scale part found no index).
        from retrieval import vectors

        vectors._indexed_spaces.discard((connection.settings_dict["NAME"], self.space.id))
        for account_id, scope_id in self.accounts:
            n = want[account_id] - self.have[account_id]
            if n > 0:
                self._insert(account_id, scope_id, n)
                self.have[account_id] = want[account_id]
                log(f"scale {size}: account {account_id.hex[:8]} now "
                    f"{self.have[account_id]} rows ({time.monotonic() - t:.0f}s)")
        load_s = time.monotonic() - t
        t = time.monotonic()
        with connection.cursor() as cur:
            for table in ("knowledge", "knowledge_vector", "message", "message_vector",
                          "knowledge_source", "session"):
                cur.execute(f"ANALYZE memhouse_{table}")
        analyze_s = time.monotonic() - t
        t = time.monotonic()
        with connection.cursor() as cur:
            cur.execute("SET maintenance_work_mem = '6GB'")
            cur.execute("SET max_parallel_maintenance_workers = 1")
        from memhouse.core.tenancy import account_context
        from retrieval.vectors import space_ensure

        with account_context(self.target[0]):
            space_ensure(self.embedder.identity)  # recreates the per-space HNSW index
        with connection.cursor() as cur:
            cur.execute("RESET maintenance_work_mem")
            cur.execute("RESET max_parallel_maintenance_workers")
            cur.execute("SELECT pg_relation_size(%s::regclass), "
                        "pg_total_relation_size('memhouse_knowledge'), "
                        "pg_total_relation_size('memhouse_knowledge_vector')", [self.index])
            idx_bytes, k_bytes, v_bytes = cur.fetchone()
        index_s = time.monotonic() - t
        log(f"scale {size}: loaded {add} rows in {load_s:.0f}s, HNSW built in {index_s:.0f}s")
        info = {"rows_added": add, "load_seconds": round(load_s, 1),
                "analyze_seconds": round(analyze_s, 1),
                "hnsw_build_seconds": round(index_s, 1),
                "hnsw_index_mb": round(idx_bytes / 2**20, 1),
                "knowledge_table_mb": round(k_bytes / 2**20, 1),
                "vector_table_mb": round(v_bytes / 2**20, 1),
                "target_account_rows": want[self.target[0]],
                "other_account_rows_each": other,
                "total_rows_all_accounts": sum(self.have.values())}
        if self.entities:
            t = time.monotonic()
            counts = common.rebuild_entity_index(self.target[0])
            info["entity_rebuild"] = counts
            log(f"scale {size}: entity index rebuilt in {time.monotonic() - t:.0f}s "
                f"({counts['mentions']} mentions)")
        return info

    # --- measuring ------------------------------------------------------------------
    def measure(self, size: int, info: dict[str, Any]) -> dict[str, Any]:
        from memhouse.core.principal import Reader, internal_reader

        account_id, _ = self.target
        if self.explain_only:
            return {**info, "explain": self.explain(self._explain_questions())}
        out = {**info, **self._measure_reader(size, internal_reader(account_id))}
        emb = []
        for q in self.queries[:50]:
            t = time.monotonic()
            self.embedder.embed_query(q)
            emb.append((time.monotonic() - t) * 1000)
        out["query_embedding_ms"] = pct(emb)
        out["explain"] = self.explain(self._explain_questions())
        if self.peer_reader:
            # One of the speakers: personal facts about the others, and the messages they
            # came from, are hidden from them (lineage.visible_messages).
            peer = Reader(account_id=account_id, posture="peer",
                          peer_id=self.peers[account_id][0], scope_roots=None)
            out["peer_reader"] = self._measure_reader(size, peer, label="peer")
        return out

    def _measure_reader(self, size: int, reader: Any, label: str = "internal"
                        ) -> dict[str, Any]:
        from knowledge.ingest.dates import named_times
        from knowledge.models import Scope
        from memhouse.core.tenancy import account_context
        from retrieval import engine
        from retrieval.embedding import query_cache
        from retrieval.profiles import BASE_PROFILES

        account_id, scope_id = self.target
        with account_context(account_id):
            scope = Scope.objects.get(id=scope_id)
        profile = BASE_PROFILES["balanced"]

        cpu: dict[str, list[float]] = {"python": [], "postgres": []}

        def one(q: str) -> tuple[float, Any]:
            query_cache().clear()
            py, pg = time.process_time(), server_cpu_ms()
            t = time.monotonic()
            with account_context(account_id):
                res = engine.search(reader=reader, scope=scope, query=q, profile=profile,
                                    limit=20)
            ms = (time.monotonic() - t) * 1000
            cpu["python"].append((time.process_time() - py) * 1000)
            cpu["postgres"].append(cpu_since(pg, server_cpu_ms()))
            return ms, res
        for i in range(self.warmup):  # warm-up: caches, connections, plans, index pages
            one(self.queries[i % len(self.queries)])
        for values in cpu.values():
            values.clear()
        wall, eng, dropped_any = [], [], 0
        dropped: dict[str, int] = defaultdict(int)
        contributed: dict[str, int] = defaultdict(int)
        returned = []
        timer = StrategyTimer().install()
        for i, q in enumerate(self.queries):
            ms, res = one(q)
            wall.append(ms)
            eng.append(res.elapsed_ms)
            reasons = [d for d in res.strategies["dropped"] if d["reason"] == "timeout"]
            dropped_any += bool(reasons)
            count_drops(res, dropped)
            for n in res.strategies["contributed"]:
                contributed[n] += 1
            returned.append(len(res.candidates))
            if (i + 1) % 50 == 0:
                log(f"scale {size} ({label} reader): {i + 1}/{len(self.queries)} searches, "
                    f"p50 {np.percentile(wall, 50):.0f} ms")
        timer.uninstall()
        dated = {i for i, q in enumerate(self.queries) if named_times(q, datetime.now(UTC))}
        return {
            "reader": label,
            "searches": len(self.queries),
            "latency_ms": pct(wall),
            "latency_ms_questions_naming_a_time": pct([w for i, w in enumerate(wall)
                                                       if i in dated]),
            "questions_naming_a_time": len(dated),
            "engine_elapsed_ms": pct(eng),
            # CPU per search, which the machine's load does not inflate: this process
            # (every thread: the engine, its strategies, the query embedding) and the
            # PostgreSQL server (clock ticks per search: read the mean).
            "cpu_ms_per_search": {k: pct(v) for k, v in cpu.items()},
            "searches_with_timeout_drop": dropped_any,
            "dropped_strategies": dict(dropped),
            "contributed_strategies": dict(contributed),
            "mean_candidates_returned": round(float(np.mean(returned)), 2),
            "strategy_timings": timer.report(),
        }

    def _explain_questions(self) -> list[str]:
        """The first question naming a month of a given year, the first naming a month of
        any year, and the first naming no time."""
        from knowledge.ingest.dates import named_times

        now = datetime.now(UTC)
        kinds = (lambda q: bool(named_times(q, now)) and bool(re.search(r"\d{4}\?$", q)),
                 lambda q: bool(named_times(q, now)) and not re.search(r"\d{4}\?$", q),
                 lambda q: not named_times(q, now))
        return [q for q in (next((q for q in self.queries if kind(q)), None) for kind in kinds)
                if q]

    def explain(self, queries: list[str]) -> dict[str, Any]:
        """EXPLAIN (ANALYZE, BUFFERS) of every SELECT the semantic (with its source-turn
        and said-when lanes), lexical and entity_match strategies send, per question and
        reader (internal; a peer too with --scale-peer-reader). The strategy functions
        are called directly in this thread, with the context the engine would build, and
        their SQL is captured with Django's connection.execute_wrapper; each plan runs in
        the same transaction, after the strategy's own SET LOCALs and the engine's (no
        parallel workers). Keys: explain[reader][question index][strategy or lane]."""
        from memhouse.core.principal import Reader, internal_reader

        account_id, _ = self.target
        readers = {"internal": internal_reader(account_id)}
        if self.peer_reader:
            readers["peer"] = Reader(account_id=account_id, posture="peer",
                                     peer_id=self.peers[account_id][0], scope_roots=None)
        out: dict[str, Any] = {"questions": queries}
        for label, reader in readers.items():
            out[label] = [self._explain_one(q, reader) for q in queries]
        return out

    def _explain_one(self, query: str, reader: Any) -> dict[str, Any]:
        import psycopg
        from django.db import connection
        from django.utils import timezone

        from knowledge.models import Scope
        from knowledge.selectors import scope_ancestors
        from memhouse.core.tenancy import account_context
        from retrieval import engine
        from retrieval.lexical import analyze
        from retrieval.profiles import BASE_PROFILES
        from retrieval.strategies import semantic
        from retrieval.strategies.base import StrategyContext

        account_id, scope_id = self.target
        profile = BASE_PROFILES["balanced"]
        out: dict[str, Any] = {}
        part = ["body"]  # which list the SQL being captured belongs to

        def lane(name: str, fn: Any) -> Any:
            def labelled(*args: Any, **kwargs: Any) -> Any:
                part[0] = f"lane:{name}"
                try:
                    return fn(*args, **kwargs)
                finally:
                    part[0] = "body"
            return labelled

        saved = {n: getattr(semantic, n) for n in ("_source_turns", "_said_when")}
        for name in ("semantic", "lexical", "entity_match"):
            run = engine.FIRST_STAGE.get(name)
            if run is None:
                continue
            captured: list[tuple[str, str, Any, list[str]]] = []

            def capture(execute: Any, sql: str, params: Any, many: bool, context: Any,
                        _c: list[tuple[str, str, Any, list[str]]] = captured) -> Any:
                # The planner settings a strategy switched off for this statement
                # (retrieval.strategies.sql.plan_without), to plan it the same way again;
                # only for a query, never inside a transaction a timeout has aborted.
                if sql.lstrip().split(None, 1)[0].upper() in ("SELECT", "WITH") and (
                        connection.connection.info.transaction_status
                        != psycopg.pq.TransactionStatus.INERROR):
                    off = [r[0] for r in connection.connection.execute(
                        "SELECT name FROM pg_settings WHERE name LIKE 'enable%' "
                        "AND setting = 'off' AND reset_val = 'on'").fetchall()]
                else:
                    off = []
                _c.append((part[0], sql, params, off))
                return execute(sql, params, many, context)

            with account_context(account_id):
                with connection.cursor() as cur:
                    cur.execute("SET LOCAL max_parallel_workers_per_gather = 0")
                scope = Scope.objects.get(id=scope_id)
                space_id, vector = engine._space_and_vector(reader, query)
                ctx = StrategyContext(
                    reader=reader,
                    scope_ids=tuple(scope_ancestors(scope).values_list("id", flat=True)),
                    query=query, lexical=analyze(query), now=timezone.now(),
                    limit=max(profile.head, 20), query_vector=vector or None,
                    space_id=space_id, options={
                        "lanes": False, "blank_fallback": False,
                        "source_turns": semantic.SOURCE_TURNS in profile.weights,
                        "said_when": semantic.SAID_WHEN in profile.weights})
                for n, fn in saved.items():
                    setattr(semantic, n, lane(n.lstrip("_"), fn))
                try:
                    with connection.execute_wrapper(capture):
                        t = time.monotonic()
                        res = run(ctx)
                        body_ms = (time.monotonic() - t) * 1000
                finally:
                    for n, fn in saved.items():
                        setattr(semantic, n, fn)
                plans: dict[str, list[list[str]]] = defaultdict(list)
                for where, sql, params, off in captured:
                    head = sql.lstrip().split(None, 1)[0].upper()
                    if (head not in ("SELECT", "WITH") or "pg_settings" in sql
                            or "set_config" in sql):
                        continue
                    with connection.cursor() as cur:
                        for setting in off:
                            cur.execute("SELECT set_config(%s, 'off', true)", [setting])
                        cur.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS) " + sql, params)
                        plan = [_VEC_LITERAL.sub("'[...384 floats...]'", r[0])
                                for r in cur.fetchall()]
                        for setting in off:
                            cur.execute("SELECT set_config(%s, 'on', true)", [setting])
                    plans[where].append([f"(planned with {', '.join(off)} off)"] * bool(off)
                                        + plan)
            for where, found in plans.items():
                key = name if where == "body" else where
                out[key] = {"plans": found,
                            "execution_ms": [_execution_ms(p) for p in found],
                            "uses_hnsw_index": any(self.index in line or
                                                   self.message_index in line
                                                   for p in found for line in p)}
            out.setdefault(name, {}).update({"body_ms": round(body_ms, 2),
                                             "applicable": res.applicable,
                                             "candidates": len(res.candidates)})
        return out

    def run(self) -> dict[str, Any]:
        self.setup()
        for size in self.sizes:
            started = time.monotonic()
            try:
                info = self.load_to(size)
                res = self.measure(size, info)
            except Exception as exc:  # report what failed, keep finished sizes
                log(f"scale {size}: FAILED {type(exc).__name__}: {exc}")
                self.results[str(size)] = {"error": f"{type(exc).__name__}: {exc}"}
                self.write()
                break
            res["wall_seconds"] = round(time.monotonic() - started, 1)
            res["loadavg_after"] = os.getloadavg()
            self.results[str(size)] = res
            if self.explain_only:
                log(f"scale {size}: plans written")
                self.write()
                continue
            lat = res["latency_ms"]
            log(f"scale {size}: p50 {lat['p50']} p95 {lat['p95']} p99 {lat['p99']} ms, "
                f"{res['searches_with_timeout_drop']} searches dropped a strategy; "
                f"semantic uses HNSW: "
                f"{res['explain']['internal'][0].get('semantic', {}).get('uses_hnsw_index')}")
            if "peer_reader" in res:
                lat = res["peer_reader"]["latency_ms"]
                log(f"scale {size}, peer reader: p50 {lat['p50']} p95 {lat['p95']} p99 "
                    f"{lat['p99']} ms, {res['peer_reader']['searches_with_timeout_drop']} "
                    f"searches dropped a strategy")
            self.write()
        return self.results


_VEC_LITERAL = re.compile(r"'\[[-0-9.,e]+\]'")
_EXECUTION = re.compile(r"Execution Time: ([0-9.]+) ms")


def _execution_ms(plan: list[str]) -> float | None:
    found = [float(m.group(1)) for line in plan if (m := _EXECUTION.search(line))]
    return found[-1] if found else None


def _td(days: float) -> Any:
    from datetime import timedelta

    return timedelta(days=days)


def _default(field: Any) -> Any:
    if field.has_default():
        return field.get_default()
    if field.null:
        return None
    raise RuntimeError(f"no value for {field.model.__name__}.{field.name}")


# =======================================================================================
# d. plot
# =======================================================================================


def plot(payload: dict[str, Any], path: str) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed; no plot written"
    systems = [s for s in ("balanced", "thorough", "dense_baseline",
                           "dense_baseline_speaker", "fts_baseline", "fts_baseline_speaker",
                           "hybrid_baseline_speaker")
               if s in payload["systems"]]
    groups = ["overall", *CATEGORIES]
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.2))
    ax = axes[0]
    width = 0.8 / max(1, len(systems))
    for i, s in enumerate(systems):
        vals = [payload["systems"][s]["recall_at_10"].get(g) or 0 for g in groups]
        xs = [j + (i - (len(systems) - 1) / 2) * width for j in range(len(groups))]
        ax.bar(xs, vals, width, label=s)
        for x, v in zip(xs, vals, strict=True):
            ax.text(x, v + 0.01, f"{v:.2f}", ha="center", fontsize=7)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g if g == "overall" else f"{g} {CATEGORY_NAMES[g]}" for g in groups])
    ax.set_ylim(0, 1)
    ax.set_ylabel("evidence recall@10")
    ax.set_title("LoCoMo dev: evidence recall@10 per category")
    ax.legend(fontsize=8)
    ax = axes[1]
    scale = {int(k): v for k, v in payload.get("scale", {}).items() if "latency_ms" in v}
    if scale:
        sizes = sorted(scale)
        for p, style in (("p50", "o-"), ("p95", "s--"), ("p99", "^:")):
            ax.plot(sizes, [scale[x]["latency_ms"][p] for x in sizes], style, label=p)
        for x in sizes:
            v = scale[x]
            ax.annotate(f"{v['searches_with_timeout_drop']}/{v['searches']} dropped a strategy",
                        (x, v["latency_ms"]["p50"]), textcoords="offset points",
                        xytext=(0, -14), ha="center", fontsize=7)
        ax.axhline(300, color="grey", lw=0.8, ls="--", label="balanced deadline 300 ms")
        ax.set_xscale("log")
        ax.set_xlabel("statements in the searched Account (10 Accounts in the database)")
        ax.set_ylabel("balanced search wall time, ms")
        ax.set_title("Scale: balanced search latency")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "scale part not run", ha="center", va="center")
        ax.set_axis_off()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


# =======================================================================================
# main
# =======================================================================================


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--plot", default=None)
    ap.add_argument("--limit-conversations", type=int, default=None)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--skip-locomo", action="store_true", help="scale part only")
    ap.add_argument("--cv", action="store_true",
                    help="leave-one-conversation-out cross-validation of balanced's fusion "
                         "parameters over CV_GRID (needs the LoCoMo part)")
    ap.add_argument("--scale-queries", type=int, default=200)
    ap.add_argument("--no-scale-messages", action="store_true",
                    help="scale part: statements only, no source messages (as before "
                         "2026-12-04 evening; semantic's message lanes then read nothing)")
    ap.add_argument("--scale-dated-share", type=float, default=0.25,
                    help="scale part: share of the questions that name a time ('in July')")
    ap.add_argument("--scale-peer-reader", action="store_true",
                    help="scale part: also search as one of the speakers (a peer reader)")
    ap.add_argument("--scale-explain-only", action="store_true",
                    help="scale part: load (or reuse) each size and write the EXPLAIN "
                         "(ANALYZE, BUFFERS) plans of each strategy and lane, no searches")
    ap.add_argument("--scale-warmup", type=int, default=10,
                    help="searches before the measured ones at each size (a cold HNSW "
                         "index at 1M needs ~100 to reach its steady state)")
    ap.add_argument("--others-share", type=float, default=0.5,
                    help="the nine other Accounts together hold this multiple of each size")
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--noise", type=float, default=0.03,
                    help="per-dimension Gaussian noise around a cluster centre")
    ap.add_argument("--no-entity-rebuild", action="store_true",
                    help="do not run retrieval.entities.rebuild_entities after loading")
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--keep-db", action="store_true")
    ap.add_argument("--reuse-db", action="store_true",
                    help="measure an existing bench_<db-name> from a --keep-db run as it is "
                         "(scale: rows already loaded to a size are not reloaded)")
    ap.add_argument("--image-captions", action="store_true",
                    help="append each shared image's caption to its turn, for the governed "
                         "ingest and the baselines alike (bench/common.py turn_with_image); "
                         "with --reuse-db, only if the reused database was ingested so")
    ap.add_argument("--profiles", default=",".join(PROFILES),
                    help="comma-separated profiles to search (default balanced,thorough)")
    ap.add_argument("--db-name", default="retrieval")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--replot", metavar="JSON", default=None,
                    help="only redraw --plot from an existing results JSON")
    ap.add_argument("--deadline-scale", type=float, default=1.0,
                    help="multiply the profiles' deadlines for the LoCoMo quality part (a "
                         "busy machine; bench/common.py scale_deadlines); needs "
                         "--skip-scale: latency is measured with the real deadlines")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="override the embedder's intra-op threads in this process (default: "
                         "MEMHOUSE_EMBEDDER_THREADS, 1)")
    args = ap.parse_args(argv)
    if args.cv and (args.skip_locomo or (args.limit_conversations or 2) < 2):
        ap.error("--cv needs the LoCoMo part and at least 2 conversations")
    if args.deadline_scale != 1 and not args.skip_scale:
        ap.error("--deadline-scale needs --skip-scale (latency uses the real deadlines)")
    if args.replot:
        import json

        print(plot(json.loads(Path(args.replot).read_text()), args.plot or "retrieval.png"))
        return 0

    dbname = common.bootstrap(args.db_name, keep_db=args.keep_db, reuse_db=args.reuse_db)
    import logging

    logging.getLogger("celery").setLevel(logging.WARNING)
    from django.conf import settings

    from retrieval.embedding import get_embedder

    threads = common.embedder_threads(args.torch_threads)
    deadlines = common.scale_deadlines(args.deadline_scale)

    payload: dict[str, Any] = {
        "benchmark": "retrieval",
        "dataset": str(Path(args.dataset).resolve()),
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "systems": {},
        "latency_ms": {},
        "scale": {},
        "config": {
            "database": dbname, "kept_database": args.keep_db,
            "limit": 20, "ks": list(KS), "profiles": args.profiles.split(","),
            "reader": "memhouse.core.principal.internal_reader (posture internal)",
            "embedder": get_embedder().identity.key,
            "query_prefix": settings.MEMHOUSE_EMBEDDING_QUERY_PREFIX,
            "strategy_allowlist": settings.MEMHOUSE_STRATEGY_ALLOWLIST,
            "celery_eager": settings.CELERY_TASK_ALWAYS_EAGER,
            "entity_index": "none" if args.no_entity_rebuild
            else "retrieval.entities.rebuild_entities after ingest/load",
            "image_captions": args.image_captions,
            "sizes": args.sizes, "scale_queries": args.scale_queries,
            "scale_warmup": args.scale_warmup,
            "scale_messages": not args.no_scale_messages,
            "scale_dated_share": args.scale_dated_share,
            "scale_peer_reader": args.scale_peer_reader,
            "others_share": args.others_share, "clusters": args.clusters,
            "noise": args.noise, "seed": args.seed, "cpu_count": os.cpu_count(),
            **threads,
            "deadline_scale": args.deadline_scale, "deadlines_ms": deadlines,
            "loadavg_start": os.getloadavg(),
            "server": common.server_settings(),
        },
    }

    def write() -> None:
        payload["config"]["loadavg_last_write"] = os.getloadavg()
        if args.plot and payload["systems"]:
            try:
                payload["plot"] = plot(payload, args.plot)
            except Exception as exc:  # a plotting problem must not lose the numbers
                payload["plot"] = f"plot failed: {exc}"
        common.write_json(args.out, payload)

    if not args.skip_locomo:
        convs = common.load_locomo(args.dataset, args.limit_conversations,
                                   image_captions=args.image_captions)
        payload["conversations"] = [c.sample_id for c in convs]
        log(f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns")
        # --reuse-db: the LoCoMo Account an earlier --keep-db run ingested, as it is.
        reused = common.attach_locomo(convs) if args.reuse_db else None
        if reused is not None:
            account_id = reused
            payload["ingest"] = {"reused": True}
            log("LoCoMo: reusing the ingested Account")
        else:
            account_id, ingest_stats = common.ingest_locomo(convs, batch_size=args.batch_size)
            payload["ingest"] = ingest_stats
        if reused is None and not args.no_entity_rebuild:
            payload["ingest"]["entity_rebuild"] = common.rebuild_entity_index(account_id)
            log(f"entity index: {payload['ingest']['entity_rebuild']}")
        qs, skipped = {}, {"category_5": 0, "no_evidence": 0}
        for c in convs:
            qs[c.sample_id], sk = questions(c)
            for k, v in sk.items():
                skipped[k] += v
        payload["questions_skipped"] = skipped
        prov = provenance_map(account_id)
        payload["governed_ceiling"] = searchable_coverage(account_id, convs, qs)
        write()
        captured: dict[str, list[Captured]] | None = {} if args.cv else None
        profiles = tuple(args.profiles.split(","))
        governed = run_profiles(account_id, convs, qs, prov, profiles, captured)
        for p in profiles:
            payload["systems"][p] = governed[p]
            payload["latency_ms"][p] = governed[p]["latency_ms"]
        write()
        payload["systems"]["dense_baseline"] = dense_baseline(convs, qs)
        payload["systems"]["fts_baseline"] = fts_baseline(convs, qs)
        # Variants: each turn prefixed with its speaker ("Caroline: ..."), since the raw
        # turn text never names its own speaker while the questions do.
        dense_sp: Rankings = {}
        fts_sp: Rankings = {}
        payload["systems"]["dense_baseline_speaker"] = dense_baseline(
            convs, qs, speaker=True, depth=HYBRID_DEPTH, rankings=dense_sp)
        payload["systems"]["fts_baseline_speaker"] = fts_baseline(
            convs, qs, speaker=True, depth=HYBRID_DEPTH, rankings=fts_sp)
        payload["systems"]["hybrid_baseline_speaker"] = hybrid_baseline(
            convs, qs, dense_sp, fts_sp)
        payload["latency_ms"]["dense_baseline"] = \
            payload["systems"]["dense_baseline"]["latency_ms_excluding_embedding"]
        payload["latency_ms"]["fts_baseline"] = payload["systems"]["fts_baseline"]["latency_ms"]
        write()
        for s, v in payload["systems"].items():
            log(f"{s}: recall@5/10/20 overall "
                f"{v['recall_at_5']['overall']}/{v['recall_at_10']['overall']}/"
                f"{v['recall_at_20']['overall']}, session any@5 "
                f"{v['session_recall_any_at_5']['overall']}, any@5 of top-10 sessions "
                f"{v['session_recall_any_at_5_dedup10']['overall']}, ndcg@10 "
                f"{v['ndcg_at_10']['overall']}")
        if captured is not None:
            payload["cross_validation"] = cross_validate(account_id, convs, qs, prov,
                                                         captured["balanced"])
            cv = payload["cross_validation"]
            log(f"cv: balanced recall@10 shipped {cv['shipped']['recall_at_10']['overall']}, "
                f"in-sample optimum {cv['in_sample_optimum']['recall_at_10']['overall']}, "
                f"cross-validated {cv['cross_validated']['recall_at_10']['overall']} "
                f"(without the source-turn lane "
                f"{cv['without_source_turns']['cross_validated']['recall_at_10']['overall']}, "
                f"without the said-when lane "
                f"{cv['without_said_when']['cross_validated']['recall_at_10']['overall']}; "
                f"re-fusion matches engine {cv['refusion_matches_engine']})")
            write()
    if not args.skip_scale:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        scale = Scale(sizes=sizes, n_queries=args.scale_queries,
                      others_share=args.others_share, clusters=args.clusters,
                      noise=args.noise, entities=not args.no_entity_rebuild, seed=args.seed,
                      write=write, warmup=args.scale_warmup,
                      messages=not args.no_scale_messages,
                      dated_share=args.scale_dated_share, peer_reader=args.scale_peer_reader,
                      explain_only=args.scale_explain_only)
        payload["scale"] = scale.results
        scale.run()
    payload["python_peak_rss_mb"] = common.python_peak_rss_mb()
    payload["config"]["loadavg_end"] = os.getloadavg()
    write()
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
