"""Trial: how far balanced's fusion weights alone can take the session metric.

    .venv/bin/python bench/session_grid_trial.py --dataset \
        /work/shared/eval/locomo/locomo_dev.json --db-name final \
        --out bench/results/session_grid_trial.json

Reads a `--keep-db` LoCoMo database of bench/retrieval.py as it is (like `--reuse-db`),
captures balanced's per-strategy lists once per head (bench/retrieval.py `capture_pass`),
re-fuses them over GRID (wider than bench/retrieval.py's CV_GRID: lexical's weight and
rrf_k 30 too) and scores every point on recall@10 and on the issue's session metric
(`session_recall_any_at_5_dedup10`: the top-10 items deduplicated to sessions, any
evidence session among the first five). Then leave-one-conversation-out, choosing on
each objective in turn (recall@10, the session metric, their sum): the held-out figures
say whether weights chosen for the session metric carry to a conversation not seen.

Output keys: `shipped`, `in_sample_best.{objective}` (`point`, `recall_at_10`,
`session_any5_dedup10`), `cross_validated.{objective}` (the same pooled over held-out
conversations, plus `folds`), `grid`, `points`.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

import numpy as np  # noqa: E402

from bench import common  # noqa: E402
from bench import retrieval as rb  # noqa: E402
from bench.common import log  # noqa: E402

GRID: dict[str, tuple[Any, ...]] = {
    "head": (50, 80), "semantic": (1.0, 1.5, 2.0), "entity_match": (0.0, 0.6),
    "rrf_k": (5, 15, 30, 60), "source_turns": (0.5, 1.0, 1.5), "said_when": (1.5, 2.0, 2.5),
    "lexical": (0.6, 1.0, 1.4),
}
SESSION = "session_recall_any_at_5_dedup10"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--db-name", default="final")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    common.bootstrap(args.db_name, keep_db=True, reuse_db=True)
    from retrieval.profiles import BASE_PROFILES

    convs = common.load_locomo(args.dataset)
    account_id = common.attach_locomo(convs)
    if account_id is None:
        raise SystemExit(f"no LoCoMo Account in bench_{args.db_name}: run bench/retrieval.py "
                         "with --keep-db first")
    qs = {c.sample_id: rb.questions(c)[0] for c in convs}
    prov = rb.provenance_map(account_id)
    base = BASE_PROFILES["balanced"]
    passes = {h: rb.capture_pass(account_id, convs, qs, replace(
        base, head=h, version=f"{base.version}+trial-head{h}")) for h in GRID["head"]}
    points = list(itertools.product(*GRID.values()))
    r10: dict[tuple[Any, ...], np.ndarray] = {}
    sess: dict[tuple[Any, ...], np.ndarray] = {}
    for n, p in enumerate(points, start=1):
        head, semantic, entity, rrf_k, turns, when, lexical = p
        w = {**base.weights, "semantic": semantic, "entity_match": entity,
             rb.SOURCE_TURNS: turns, rb.SAID_WHEN: when, "lexical": lexical}
        scores = [rb.question_scores(c.q["evidence"],
                                     [prov.get(k, set()) for k in rb.refuse(c, w, rrf_k)])
                  for c in passes[head]]
        r10[p] = np.asarray([s["recall_at_10"] for s in scores])
        sess[p] = np.asarray([s[SESSION] for s in scores])
        if n % 200 == 0:
            log(f"{n}/{len(points)} points")
    shipped = (base.head, base.weights["semantic"], base.weights["entity_match"], base.rrf_k,
               base.weights[rb.SOURCE_TURNS], base.weights[rb.SAID_WHEN],
               base.weights["lexical"])
    conv = np.asarray([c.conv for c in passes[base.head]])
    objectives = {"recall_at_10": r10, "session": sess,
                  "sum": {p: r10[p] + sess[p] for p in points}}

    def figures(p: tuple[Any, ...], mask: np.ndarray | None = None) -> dict[str, Any]:
        m = np.ones(len(conv), bool) if mask is None else mask
        return {"point": dict(zip(GRID, p, strict=True)),
                "recall_at_10": round(float(r10[p][m].mean()), 4),
                "session_any5_dedup10": round(float(sess[p][m].mean()), 4)}

    out: dict[str, Any] = {"grid": {k: list(v) for k, v in GRID.items()}, "points": len(points),
                           "shipped": figures(shipped) if shipped in r10 else None,
                           "in_sample_best": {}, "cross_validated": {}}
    for name, scores in objectives.items():
        # bench/retrieval.py's own choice rule: best mean, ties to shipped, then grid order.
        out["in_sample_best"][name] = figures(rb.choose(points, scores,
                                                        np.ones(len(conv), bool), shipped))
        rr, ss, folds = np.zeros(len(conv)), np.zeros(len(conv)), []
        for held in sorted(set(conv)):
            train = conv != held
            pt = rb.choose(points, scores, train, shipped)
            rr[~train], ss[~train] = r10[pt][~train], sess[pt][~train]
            folds.append({"held_out": held, **figures(pt, ~train)})
        out["cross_validated"][name] = {"recall_at_10": round(float(rr.mean()), 4),
                                        "session_any5_dedup10": round(float(ss.mean()), 4),
                                        "folds": folds}
        log(f"{name}: in-sample best {out['in_sample_best'][name]}; cross-validated "
            f"r@10 {rr.mean():.4f} session {ss.mean():.4f}")
    common.write_json(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
