"""Train the name typer: is a capitalised word someone's given name? (issue 33 item 3)

The intake holds a claim about a named person other than the speaker for a curator; it
knows a name from the given-name lexicon (knowledge/ingest/data/person_names.txt) or a
registered peer. A name off the lexicon ("Lazarus won the pub quiz", "Jago's band is
playing") used to stay an active fact about the speaker. The typer reads the word's
embedding (the default encoder, the bare word) with a logistic regression:

* positives: the lexicon's given names that are not also an English word of the
  encoder's vocabulary (Faker's first-name lists, MIT);
* negatives: the encoder vocabulary's whole words (three letters or more) that are not
  given names: common nouns ("Pottery", "Veggies"), places, brands the vocabulary knows.

Words are split into five folds (cross-validated: a fold's words are never trained on)
and the threshold is the lowest score at which at most `--max-fpr` of held-out
non-names pass. The weights ship as JSON (governance/intake/name_typer.json), never a
pickle.

    .venv/bin/python bench/name_typer_train.py --out bench/results/name_typer.json

Keys of --out: counts, folds (auc, recall at the threshold, fpr per fold), threshold,
auc, recall, fpr (pooled over the folds), by_margin (recall and fpr at the threshold plus
0-2), examples (held-out names missed, non-names
passed), config.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
WEIGHTS = REPO / "governance" / "intake" / "name_typer.json"
VOCAB = REPO / "retrieval" / "minilm" / "tokenizer.json"


def training_words() -> tuple[list[str], list[str]]:
    vocab = json.loads(VOCAB.read_text(encoding="utf-8"))["model"]["vocab"]
    words = {w for w in vocab if re.fullmatch(r"[a-z]{3,}", w)}
    from knowledge.ingest.named_persons import given_names

    names = {n.lower(): n for n in sorted(given_names()) if n.isalpha()}
    positives = sorted(n for low, n in names.items() if low not in words)
    negatives = sorted(w.capitalize() for w in words if w not in names)
    return positives, negatives


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="result JSON")
    ap.add_argument("--max-fpr", type=float, default=0.02,
                    help="held-out non-names allowed past the threshold")
    ap.add_argument("--c", type=float, default=1.0, help="inverse L2 strength")
    ap.add_argument("--no-write", action="store_true", help="do not write the weights")
    args = ap.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memhouse.settings")
    import django

    django.setup()
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    from retrieval.embedding import get_embedder

    started = time.monotonic()
    positives, negatives = training_words()
    words = positives + negatives
    y = np.array([1] * len(positives) + [0] * len(negatives))
    embedder = get_embedder()
    print(f"embedding {len(words)} words ...", file=sys.stderr)
    x = np.array(embedder.embed_documents(words), dtype=np.float64)
    rng = np.random.default_rng(41)
    fold = rng.integers(0, 5, size=len(words))
    scores = np.zeros(len(words))
    folds = []
    for k in range(5):
        train, test = fold != k, fold == k
        model = LogisticRegression(C=args.c, class_weight="balanced", max_iter=2000)
        model.fit(x[train], y[train])
        scores[test] = model.decision_function(x[test])
        folds.append({"fold": k, "auc": round(float(roc_auc_score(y[test], scores[test])), 4)})
    neg_scores = np.sort(scores[y == 0])
    threshold = float(neg_scores[int(np.ceil((1 - args.max_fpr) * len(neg_scores))) - 1])
    passed = scores > threshold
    for item in folds:
        k = item["fold"]
        mask = fold == k
        item["recall"] = round(float(passed[mask & (y == 1)].mean()), 4)
        item["fpr"] = round(float(passed[mask & (y == 0)].mean()), 4)
    model = LogisticRegression(C=args.c, class_weight="balanced", max_iter=2000)
    model.fit(x, y)
    identity = embedder.identity
    result = {
        "benchmark": "name_typer",
        "counts": {"names": len(positives), "non_names": len(negatives)},
        "folds": folds,
        "auc": round(float(roc_auc_score(y, scores)), 4),
        "threshold": round(threshold, 4),
        "recall": round(float(passed[y == 1].mean()), 4),
        "fpr": round(float(passed[y == 0].mean()), 4),
        # name_typer.MARGIN: the intake asks for this much above the threshold
        "by_margin": {str(m): {"recall": round(float((scores[y == 1] > threshold + m).mean()), 4),
                               "fpr": round(float((scores[y == 0] > threshold + m).mean()), 4)}
                      for m in (0.0, 0.5, 1.0, 1.5, 2.0)},
        "examples": {
            "names_missed": [w for w, s, t in zip(words, scores, y, strict=True)
                             if t == 1 and s <= threshold][:40],
            "non_names_passed": [w for w, s, t in zip(words, scores, y, strict=True)
                                 if t == 0 and s > threshold][:80],
        },
        "config": {"max_fpr": args.max_fpr, "c": args.c, "embedder": identity.model,
                   "embedder_version": identity.version,
                   "elapsed_seconds": round(time.monotonic() - started, 1)},
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not args.no_write:
        WEIGHTS.write_text(json.dumps({
            "format": "memhouse-name-typer/1",
            "about": "Is a capitalised word a given name? Logistic regression on the default "
                     "encoder's vector of the bare word; trained by bench/name_typer_train.py.",
            "embedder": identity.model,
            "embedder_version": identity.version,
            "threshold": round(threshold, 6),
            "bias": float(model.intercept_[0]),
            "weights": [round(float(w), 6) for w in model.coef_[0]],
        }) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("counts", "auc", "threshold", "recall", "fpr")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
