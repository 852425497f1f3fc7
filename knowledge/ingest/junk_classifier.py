"""Gate A's learned junk test: a linear model over the text, behind the hand-written rules.

The rules (governance.intake.junk) catch machine output by structure and word lists with
high precision; what they miss is output of a shape nobody wrote a pattern for (a
`pip show` field, a `curl -v` header, a Celery banner, a CSV row). This model scores a
text as machine output from features any text has:

* hashed character 2-4-grams of the text with every digit read as 0 (a timestamp, a
  version and a port look alike), and hashed lower-cased words, log-scaled and
  L2-normalised;
* a few shape ratios: length, lines, letters / digits / upper case / punctuation /
  whitespace, word-like tokens, token lengths, identifier- and path-like tokens, whether
  it opens with a capital and ends like a sentence, whether a person word ("I", "my",
  "she") occurs.

The weights are plain JSON (knowledge/ingest/junk_model.json: never a pickle, which runs
code when loaded) written by bench/junk_train.py, which trains a scikit-learn
LogisticRegression on machine output generated on a real machine (bench/junk_corpus.py)
against human chat, cross-validates it grouped by program and conversation and picks the
threshold. Inference is a sparse dot product in numpy: scikit-learn is needed only to
train. The features here are the only featuriser; training imports them, so a model and
its inference can never drift apart.

The sentence embedding the pipeline computes is not a feature: it is computed after the
gates commit (retrieval.tasks.embed_knowledge), and computing it here would put a model
call on every claim's write path for a gate the text alone already serves.
"""

from __future__ import annotations

import functools
import json
import math
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MODEL_PATH = Path(__file__).with_name("junk_model.json")
FORMAT = "memhouse-junk-linear/1"
MAX_CHARS = 1000  # the head of a long paste says what it is

_DIGIT = re.compile(r"\d")
_WORDISH = re.compile(r"^[\"'(\[]*[A-Za-z][a-z'\u2019-]*[\"'),.!?;:\]]*$")
_WORD_TOKEN = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)
_IDENT = re.compile(r"\w[_./:\\]\w|\w=|::|->|=>")
_FIRST = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|our|us)\b", re.I)
_PERSON = re.compile(r"\b(?:you|your|he|him|his|she|her|they|them|their)\b", re.I)
_OPENERS = "[{(<\"'"

DENSE = (
    "length",
    "lines",
    "alpha",
    "digit",
    "upper",
    "punct",
    "space",
    "wordish",
    "mean_token",
    "max_token",
    "capital_start",
    "sentence_end",
    "first_person",
    "person",
    "line_symbol_start",
    "brackets",
    "digit_tokens",
    "ident_tokens",
)


def _crc(token: str) -> int:
    return zlib.crc32(token.encode("utf-8", "surrogatepass"))


def _dense(text: str) -> list[float]:
    n = max(len(text), 1)
    letters = [c for c in text if c.isalpha()]
    tokens = text.split()
    nt = max(len(tokens), 1)
    lines = [ln for ln in text.splitlines() if ln.strip()] or [""]
    stripped = text.strip()
    return [
        math.log1p(len(text)) / 7.0,
        math.log1p(len(lines)) / 3.0,
        len(letters) / n,
        sum(c.isdigit() for c in text) / n,
        (sum(c.isupper() for c in letters) / len(letters)) if letters else 0.0,
        sum(not c.isalnum() and not c.isspace() for c in text) / n,
        sum(c.isspace() for c in text) / n,
        sum(bool(_WORDISH.match(t)) for t in tokens) / nt,
        min(sum(len(t) for t in tokens) / nt / 10.0, 2.0),
        min(max((len(t) for t in tokens), default=0) / 40.0, 1.0),
        float(stripped[:1].isupper()),
        float(stripped[-1:] in ".!?" or not stripped[-1:].isascii()),
        float(bool(_FIRST.search(text))),
        float(bool(_PERSON.search(text))),
        sum(not ln.strip()[:1].isalpha() for ln in lines) / len(lines),
        min(sum(text.count(c) for c in "[]{}<>=|") / n * 10.0, 1.0),
        sum(any(c.isdigit() for c in t) for t in tokens) / nt,
        sum(bool(_IDENT.search(t)) for t in tokens) / nt,
    ]


def features(text: str, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """The sparse feature vector of `text` as (indices, values): `buckets` hashed n-gram
    and word columns, then the DENSE columns."""
    text = text[:MAX_CHARS]
    shape = _DIGIT.sub("0", text)
    counts: dict[int, float] = {}
    padded = f" {shape} "
    for n in (2, 3, 4):
        for i in range(len(padded) - n + 1):
            h = _crc(padded[i : i + n]) % buckets
            counts[h] = counts.get(h, 0.0) + 1.0
    for word in _WORD_TOKEN.findall(shape.lower()):
        h = _crc("w:" + word) % buckets
        counts[h] = counts.get(h, 0.0) + 1.0
    idx = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    val = np.log1p(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
    norm = float(np.linalg.norm(val))
    if norm:
        val /= norm
    dense = np.asarray(_dense(text), dtype=np.float64)
    return (
        np.concatenate([idx, buckets + np.arange(len(DENSE), dtype=np.int64)]),
        np.concatenate([val, dense]),
    )


@dataclass(frozen=True)
class JunkClassifier:
    """A linear model read from JSON: P(machine output) = sigmoid(w . x + b)."""

    buckets: int
    weights: np.ndarray
    bias: float
    threshold: float

    @classmethod
    def from_dict(cls, data: dict) -> JunkClassifier:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} model: {data.get('format')!r}")
        if list(data["dense"]) != list(DENSE):
            raise ValueError("the model's dense features are not this featuriser's")
        weights = np.asarray(data["weights"], dtype=np.float64)
        if weights.shape != (int(data["buckets"]) + len(DENSE),):
            raise ValueError("weights do not match buckets + dense features")
        return cls(
            buckets=int(data["buckets"]),
            weights=weights,
            bias=float(data["bias"]),
            threshold=float(data["threshold"]),
        )

    @classmethod
    def load(cls, path: Path | str = MODEL_PATH) -> JunkClassifier:
        with open(path, encoding="utf-8") as fh:
            return cls.from_dict(json.load(fh))

    def score(self, text: str) -> float:
        """Probability that `text` is machine output rather than something a person said."""
        if not text or not text.strip():
            return 0.0
        idx, val = features(text, self.buckets)
        z = float(self.weights[idx] @ val) + self.bias
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    def refuses(self, text: str) -> bool:
        return self.score(text) >= self.threshold


@functools.lru_cache(maxsize=1)
def default() -> JunkClassifier:
    """The shipped model (read once per process)."""
    return JunkClassifier.load()


def machine_output(text: str) -> bool:
    """The shipped model's verdict on `text`. Short texts are cached: a message's claims
    share their message text, and the model reads only its first MAX_CHARS anyway."""
    return _refuses_head(text[:MAX_CHARS])


@functools.lru_cache(maxsize=2048)
def _refuses_head(head: str) -> bool:
    return default().refuses(head)
