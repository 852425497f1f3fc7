"""Fit and cross-validate a cross-feature second stage for thorough, offline.

    .venv/bin/python bench/rerank_eval.py ... --dump DUMP.pkl      # capture once
    .venv/bin/python bench/rerank_fit.py --dump DUMP.pkl --out bench/results/X.json

Per question the first `--head` fused candidates get `retrieval.rerank.cross_features`
( fused rank, MaxSim, each strategy's reciprocal rank, semantic score,
question-term coverage, length); a logistic regression (label: the candidate stands for an evidence
turn) is fitted on four conversations and orders the head of the fifth
(leave-one-conversation-out); the fit on all five gives the shipped constants.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

import numpy as np  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from bench import retrieval as rb  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--head", type=int, default=40)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--session-vote", action="store_true",
                    help="add a column: the summed positive MaxSim z of the other head "
                         "candidates from the same LoCoMo session (from the evidence map)")
    ap.add_argument("--pairwise", action="store_true",
                    help="fit on within-question differences (evidence minus other)")
    args = ap.parse_args(argv)
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memhouse.settings")
    django.setup()  # no database is opened: the dump holds everything
    from retrieval.rerank import FEATURE_NAMES, cross_features
    with open(args.dump, "rb") as fh:
        d = pickle.load(fh)
    prov, texts = d["prov"], d["texts"]
    names = [*FEATURE_NAMES, *(["session_vote"] if args.session_vote else [])]
    rows = []  # per question: conv, q, head ids, X, y, tail ids
    for k, (conv, q, lists, ids) in enumerate(d["captured"]):
        head = [i for i in ids[:args.head] if i in texts]
        sims = np.asarray([d["sims"][k][i] for i in head])
        X = cross_features(q["question"], head, texts, lists, sims)
        if args.session_vote:
            sess = [{e.split(":")[0] for e in prov.get(i, set())} for i in head]
            z = (sims - sims.mean()) / (sims.std() + 1e-9)
            vote = [sum(max(z[m], 0.0) for m in range(len(head)) if m != j and sess[m] & s)
                    for j, s in enumerate(sess)]
            X = np.hstack([X, np.asarray(vote)[:, None]])
        ev = set(q["evidence"])
        y = np.asarray([1 if prov.get(i, set()) & ev else 0 for i in head])
        rows.append((conv, q, head, X, y, ids[args.head:]))
    convs = sorted({r[0] for r in rows})

    def pairs(mask):
        rng = np.random.default_rng(0)
        xs, ys = [], []
        for r, m in zip(rows, mask, strict=True):
            if not m or r[4].all() or not r[4].any():
                continue
            pos, neg = np.flatnonzero(r[4]), np.flatnonzero(r[4] == 0)
            for p in pos:
                for n_ in neg:
                    flip = rng.random() < 0.5
                    xs.append((r[3][n_] - r[3][p]) if flip else (r[3][p] - r[3][n_]))
                    ys.append(0 if flip else 1)
        return np.vstack(xs), np.asarray(ys)

    def fit(mask):
        if args.pairwise:
            X, y = pairs(mask)
            sd = X.std(0) + 1e-9
            m = LogisticRegression(C=args.C, max_iter=2000, fit_intercept=False).fit(X / sd, y)
            return m.coef_[0] / sd, 0.0
        X = np.vstack([r[3] for r, m in zip(rows, mask, strict=True) if m])
        y = np.concatenate([r[4] for r, m in zip(rows, mask, strict=True) if m])
        mu, sd = X.mean(0), X.std(0) + 1e-9
        m = LogisticRegression(C=args.C, max_iter=2000).fit((X - mu) / sd, y)
        w = m.coef_[0] / sd
        return w, float(m.intercept_[0] - (m.coef_[0] * mu / sd).sum())

    def order(r, w):
        s = r[3] @ w
        return [r[2][j] for j in sorted(range(len(r[2])), key=lambda j: (-s[j], j))] + r[5]

    def table(orders):
        tab = rb.RecallTable()
        for r, ids in zip(rows, orders, strict=True):
            tab.add(r[1]["category"], r[1]["evidence"], [prov.get(i, set()) for i in ids[:20]],
                    r[0])
        return tab.summary()

    conv_arr = np.asarray([r[0] for r in rows])
    cv_orders: list = [None] * len(rows)
    folds = []
    for c in convs:
        w, _ = fit(conv_arr != c)
        for i, r in enumerate(rows):
            if r[0] == c:
                cv_orders[i] = order(r, w)
        folds.append({"held_out": c,
                      "weights": dict(zip(names, np.round(w, 4).tolist(), strict=True))})
    w_all, b_all = fit(np.ones(len(rows), bool))
    fused = table([r[2] + r[5] for r in rows])
    pure = table([order(r, np.eye(len(names))[names.index("maxsim")]) for r in rows])
    ins = table([order(r, w_all) for r in rows])
    cv = table(cv_orders)
    out = {"head": args.head, "C": args.C, "features": names, "pairwise": args.pairwise,
           "weights_all": dict(zip(names, w_all.tolist(), strict=True)),
           "intercept_all": b_all,
           "fused": fused, "pure_maxsim": pure, "in_sample": ins, "cross_validated": cv,
           "folds": folds}
    for name in ("fused", "pure_maxsim", "in_sample", "cross_validated"):
        t = out[name]
        print(f"{name:16s} r@5 {t['recall_at_5']['overall']:.4f} r@10 "
              f"{t['recall_at_10']['overall']:.4f} r@20 {t['recall_at_20']['overall']:.4f} "
              f"any@5d10 {t['session_recall_any_at_5_dedup10']['overall']:.4f}")
    print(json.dumps(out["weights_all"], indent=0))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
