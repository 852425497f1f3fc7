"""Is a capitalised word a person's given name? The intake's judge for a name that no
lexicon lists ("Sam heard Lazarus won the pub quiz": knowledge.ingest.named_persons
.unlisted_subject finds the word; this says whether it names someone).

A logistic regression over the default encoder's vector of the bare word, trained on
the given-name lexicon against the encoder vocabulary's other words
(bench/name_typer_train.py; held-out AUC 0.9995; at MARGIN 94.8% of names and no
vocabulary word pass: bench/README.md "Names no list knows"). The weights are plain
JSON (name_typer.json), never a pickle. They belong to the encoder's vector space: under
another embedder the typer says no to every word, so nothing is held on a guess.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

MODEL_PATH = Path(__file__).with_name("name_typer.json")
FORMAT = "memhouse-name-typer/1"


@lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    """The shipped weights (read once per process), as the junk and pair models are."""
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{MODEL_PATH}: not a {FORMAT} file")
    return {"weights": np.asarray(data["weights"], dtype=np.float64),
            "bias": float(data["bias"]), "threshold": float(data["threshold"]),
            "embedder": data["embedder"], "embedder_version": data["embedder_version"]}


@lru_cache(maxsize=4096)
def name_score(word: str) -> float | None:
    """The typer's margin over its cross-validated threshold for `word` (is_given_name
    asks for MARGIN more), or None when the configured embedder is not the one the
    weights were trained on."""
    from retrieval.embedding import get_embedder

    model = _load()
    embedder = get_embedder()
    identity = embedder.identity
    if identity.model != model["embedder"] or identity.version != model["embedder_version"]:
        return None
    vector = np.asarray(embedder.embed_documents([word])[0], dtype=np.float64)
    return float(vector @ model["weights"] + model["bias"] - model["threshold"])


# How far above the cross-validated threshold a word must score: English compounds a
# story or a map names ("Woodhaven", a LoCoMo town, scored 0.76; "Stormhaven" 1.11) pass
# the threshold, given names off the lexicon mostly score above 2; at 1.5 held-out recall
# is 94.8% and no held-out vocabulary word passes (bench/results/name_typer.json,
# by_margin).
MARGIN = 1.5


def is_given_name(word: str) -> bool:
    score = name_score(word)
    return score is not None and score > MARGIN
