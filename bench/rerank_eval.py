"""A model-free second-stage scorer for thorough's fused head, measured on LoCoMo dev.

    .venv/bin/python bench/rerank_eval.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --out bench/results/rerank_eval.json [--keep-db] [--reuse-db] [--db-name rerank]

The candidate: token-level late interaction (MaxSim, as in ColBERT) over the default
encoder's token embeddings. For a query q and a statement d, the score is the mean over
q's word-piece tokens of the highest cosine to any of d's tokens; it reads the query and
the statement together, which the first-stage (one pooled vector each) does not.

1. ingest LoCoMo dev through the pipeline (bench/common.py; a --keep-db database is
   reused with --reuse-db), rebuild the entity index;
2. search every question of categories 1-4 once with the shipped thorough profile (or
   `--profile balanced`: what a second stage would do to balanced's fused order; balanced
   does not rerank, so its "engine" figures are the fused order)
   (limit = the deepest head in HEADS), keeping the per-strategy lists
   (bench/retrieval.py `capture_pass`);
3. offline: rerank the first `head` fused candidates, for every head in HEADS, by
   fused_z + alpha * maxsim_z (both z-scored within the head; alpha 0 is the fused order,
   alpha "inf" pure MaxSim) for every alpha in ALPHAS and score recall@10 etc. with
   bench/retrieval.py's `RecallTable`;
4. leave-one-conversation-out: for each conversation the (head, alpha) with the best mean
   recall@10 on the other four (ties: the shipped point, then grid order) scores it.

The engine now ships alpha = inf (retrieval/rerank.py, used when no provider is
configured), so step 2 also records the engine's own reranked top 20 ("engine"), its
rerank status and time; the grid starts from the fused order re-fused from the captured
lists. The scorer is the engine's own (`retrieval.rerank.token_encoder` / `maxsim`).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

import numpy as np  # noqa: E402

from bench import common  # noqa: E402
from bench import retrieval as rb  # noqa: E402
from bench.common import log  # noqa: E402

ALPHAS: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, math.inf)
# Rerank depths: how many fused candidates MaxSim reorders (the profile's `rerank_head`).
HEADS: tuple[int, ...] = (20, 30, 40, 50, 60)
HEAD = max(HEADS)  # the search limit of the capture pass


def _z(values: np.ndarray) -> np.ndarray:
    sd = float(values.std())
    return (values - values.mean()) / sd if sd > 0 else np.zeros_like(values)


def statements(account_id: Any, ids: set[str]) -> dict[str, str]:
    from knowledge.models import Knowledge
    from memhouse.core.tenancy import account_context

    with account_context(account_id):
        return {str(k): s for k, s in Knowledge.objects.filter(id__in=list(ids))
                .values_list("id", "statement")}


def capture(account_id: Any, convs: list[common.Conversation],
            qs: dict[str, list[dict[str, Any]]], profile: Any
            ) -> tuple[list[rb.Captured], list[list[str]], list[dict[str, Any]], list[float]]:
    """bench/retrieval.py `capture_pass`, also keeping the engine's rerank report and
    elapsed time (no provider is configured here: the engine reranks model-free)."""
    from knowledge.models import Scope
    from memhouse.core.principal import internal_reader
    from memhouse.core.tenancy import account_context
    from retrieval import engine
    from retrieval.embedding import query_cache

    reader = internal_reader(account_id)
    out: list[rb.Captured] = []
    ids: list[list[str]] = []
    reranks: list[dict[str, Any]] = []
    elapsed: list[float] = []
    with account_context(account_id):
        scopes = {c.sample_id: Scope.objects.get(id=c.scope_id) for c in convs}
        for conv in convs:
            for q in qs[conv.sample_id]:
                query_cache().clear()
                res = engine.search(reader=reader, scope=scopes[conv.sample_id],
                                    query=q["question"], profile=profile, limit=HEAD)
                got = [c["id"] for c in res.candidates]
                out.append(rb.Captured(conv.sample_id, q, dict(res.lists), list(got)))
                ids.append(got)
                reranks.append(res.rerank)
                elapsed.append(res.elapsed_ms)
    return out, ids, reranks, elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit-conversations", type=int, default=None)
    ap.add_argument("--keep-db", action="store_true")
    ap.add_argument("--reuse-db", action="store_true")
    ap.add_argument("--db-name", default="rerank")
    ap.add_argument("--profile", default="thorough",
                    help="the profile whose fused head is captured and reordered (balanced: "
                         "what a second stage would do there; the engine's own order is then "
                         "the fused one, balanced does not rerank)")
    ap.add_argument("--dump", default=None,
                    help="also pickle the captured lists, heads, MaxSim scores, statement "
                         "texts and evidence map here (for offline scorer fitting)")
    args = ap.parse_args(argv)
    started = time.monotonic()
    common.bootstrap(args.db_name, keep_db=args.keep_db, reuse_db=args.reuse_db)
    from retrieval.profiles import BASE_PROFILES

    convs = common.load_locomo(args.dataset, args.limit_conversations)
    account_id = common.attach_locomo(convs) if args.reuse_db else None
    if account_id is None:
        account_id, _ = common.ingest_locomo(convs)
        log(f"entity index: {common.rebuild_entity_index(account_id)}")
    qs = {c.sample_id: rb.questions(c)[0] for c in convs}
    prov = rb.provenance_map(account_id)
    profile = BASE_PROFILES[args.profile]
    t = time.monotonic()
    captured, engine_ids, reranks, elapsed = capture(account_id, convs, qs, profile)
    log(f"{args.profile} pass: {len(captured)} searches in {time.monotonic() - t:.0f}s")
    # What the offline grid reorders: the fused order, re-fused from the captured lists
    # (bench/retrieval.py `refuse`), whatever the engine's own rerank did.
    engine_ids = [ids[:20] for ids in engine_ids]
    for c in captured:
        c.ids = rb.refuse(c, dict(profile.weights), profile.rrf_k, limit=HEAD)
    texts = statements(account_id, {i for c in captured for i in c.ids[:HEAD]})

    from retrieval import rerank

    encoder = rerank.token_encoder()
    if encoder is None:
        raise SystemExit("the configured embedder has no token embeddings")
    t = time.monotonic()
    sims: dict[int, dict[str, float]] = {}
    for k, c in enumerate(captured):
        head = [i for i in c.ids[:HEAD] if i in texts]
        sims[k] = dict(zip(head, rerank.maxsim(encoder, c.q["question"],
                                               [texts[i] for i in head]), strict=True))
    log(f"MaxSim of {len(captured)} heads in {time.monotonic() - t:.0f}s")

    if args.dump:
        import pickle

        with open(args.dump, "wb") as fh:
            pickle.dump({"captured": [(c.conv, c.q, c.lists, c.ids) for c in captured],
                         "sims": sims, "texts": texts, "prov": prov,
                         "weights": dict(profile.weights), "rrf_k": profile.rrf_k}, fh)
    Point = tuple[int, float]  # (head, alpha)

    def order(k: int, c: rb.Captured, point: Point) -> list[str]:
        depth, alpha = point
        head = [i for i in c.ids[:depth] if i in texts]
        if alpha == 0.0 or len(head) < 2:
            return c.ids[:20]
        fused = _z(-np.arange(len(head), dtype=np.float64))  # rank-based: fusion order
        sim = _z(np.asarray([sims[k][i] for i in head]))
        score = sim if math.isinf(alpha) else fused + alpha * sim
        ranked = [head[j] for j in sorted(range(len(head)), key=lambda j: (-score[j], j))]
        return (ranked + c.ids[depth:])[:20]

    points: list[Point] = [(h, a) for h in HEADS for a in ALPHAS]
    orders = {p: [order(k, c, p) for k, c in enumerate(captured)] for p in points}
    r10: dict[Point, np.ndarray] = {}
    for p in points:
        vals = []
        for c, ids in zip(captured, orders[p], strict=True):
            ranked = [prov.get(i, set()) for i in ids]
            vals.append(rb.question_scores(c.q["evidence"], ranked)["recall_at_10"])
        r10[p] = np.asarray(vals)

    def table(chosen: dict[str, Point]) -> dict[str, Any]:
        tab = rb.RecallTable()
        for k, c in enumerate(captured):
            ids = orders[chosen[c.conv]][k]
            tab.add(c.q["category"], c.q["evidence"], [prov.get(i, set()) for i in ids],
                    c.conv)
        return tab.summary()

    conv_of = np.asarray([c.conv for c in captured])
    shipped_point: Point = (profile.maxsim_head, math.inf)
    fused_point: Point = (HEADS[0], 0.0)
    folds, chosen = [], {}
    for conv in convs:
        train = conv_of != conv.sample_id
        best = rb.choose(points, r10, train, shipped_point)
        chosen[conv.sample_id] = best
        folds.append({"held_out": conv.sample_id, "head": best[0], "alpha": str(best[1]),
                      "train_recall_at_10": round(float(r10[best][train].mean()), 4),
                      "held_out_recall_at_10": round(float(r10[best][~train].mean()), 4),
                      "fused_held_out_recall_at_10": round(float(
                          r10[fused_point][~train].mean()), 4)})
        log(f"fold {conv.sample_id}: head {best[0]} alpha {best[1]}, held-out recall@10 "
            f"{folds[-1]['held_out_recall_at_10']} (fused "
            f"{folds[-1]['fused_held_out_recall_at_10']})")
    ids_all = [c.sample_id for c in convs]
    shipped = rb.RecallTable()
    for c, ids in zip(captured, engine_ids, strict=True):
        shipped.add(c.q["category"], c.q["evidence"], [prov.get(i, set()) for i in ids],
                    c.conv)
    statuses: dict[str, int] = {}
    for r in reranks:
        key = (f"{r['status']}:{r.get('reranker') or r.get('reason')}"
               f"{':partial' if r.get('partial') else ''}")
        statuses[key] = statuses.get(key, 0) + 1
    rerank_ms = [float(r["elapsed_ms"]) for r in reranks if "elapsed_ms" in r]
    payload = {
        "engine": {**shipped.summary(), "rerank_status": statuses,
                   "rerank_elapsed_ms": rb.pct(rerank_ms),
                   "search_elapsed_ms": rb.pct(elapsed)},
        "benchmark": "rerank_eval", "scorer": "maxsim over the default encoder's tokens",
        "embedder": encoder[0],
        "profile_version": profile.version, "maxsim_head": profile.maxsim_head,
        "heads": list(HEADS), "questions": len(captured),
        "in_sample": {f"{h}:{a}": round(float(r10[(h, a)].mean()), 4) for h, a in points},
        "fused": table(dict.fromkeys(ids_all, fused_point)),
        "pure_maxsim": table(dict.fromkeys(ids_all, shipped_point)),
        "cross_validated": table(chosen),
        "folds": folds,
        "seconds": round(time.monotonic() - started, 1),
    }
    for key, value in payload["in_sample"].items():
        log(f"head:alpha {key}: recall@10 {value}")
    log(f"cross-validated recall@10 {payload['cross_validated']['recall_at_10']['overall']} "
        f"vs fused {payload['fused']['recall_at_10']['overall']}; engine (shipped rerank) "
        f"{payload['engine']['recall_at_10']['overall']}, rerank {statuses}, rerank ms "
        f"{payload['engine']['rerank_elapsed_ms']}, search ms "
        f"{payload['engine']['search_elapsed_ms']}")
    common.write_json(args.out, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
