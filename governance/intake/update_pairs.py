"""A learned second pass behind the update rules: does a newer claim replace an older one?

The rules of governance.intake.supersession settle a pair only when their cue and
attribute lists know its wording ("moved to", "works at"...). Half of the update pairs
written after tuning name the change otherwise ("The Astra finally died, so I bought a
second-hand Skoda Fabia"; "Cancelled PureGym. I've joined the climbing wall at The Arch
instead"). When the rules settle nothing for a claim, this linear model reads each pair
(an older current claim of the same holder, the newer claim and the message it came
from) and gives P(the newer replaces the older). At or above its threshold intake links
the two with the seed's `contradicts` relation (newer -> older; reads mark the older
`possibly_outdated` and a question goes to the subject or the curator): never a silent
supersession, since a model may be wrong.

Features (`pair_features`) are meant to carry beyond the wording it was trained on: the
MiniLM vectors intake already has (their cosine, and u*v, |u-v| of the two claims'
vectors, reduced by a fixed projection stored with the weights), and ratios and flags
read from the texts: how much of the older claim's names and words the new message
repeats (it names the thing it changes), what the new claim brings that the old lacks,
and the rules' own signals (update cue, a change told, something given up, a shared
attribute...). No length or style features: the negatives include long LoCoMo turns and
the positives short fixture lines, and a model reading length would learn that.

Two hard gates come before the model: the same holder only (`eligible`, as the rules'
holder checks), and an older claim that holds something to replace (`holds_something`).
Only the STRONG_CUE_RECENT newest candidates are read, and only for claims intake hands
the update rules at all (pipeline: is_candidate / may_conflict / change_told).

The weights are plain JSON (update_pairs_model.json next to this file, never a pickle),
written by bench/update_pairs_train.py, which cross-validates them by fixture file and by
LoCoMo conversation and picks the threshold there.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from governance.intake import supersession as s
from governance.intake.attributes import attribute_conflict, shares_attribute
from governance.intake.junk import claim_body, content_words
from governance.intake.supersession import Candidate, Update, _whole, said_at

if TYPE_CHECKING:
    from knowledge.models import Knowledge

MODEL_PATH = Path(__file__).with_name("update_pairs_model.json")
FORMAT = "memhouse-update-pairs-linear/1"

SCALARS = (
    "cosine",
    "old_names_in_message",
    "old_words_in_message",
    "old_words_in_claim",
    "new_fresh_names",
    "new_fresh_words",
    "update_cue",
    "change_told",
    "strong_cue_message",
    "gives_up_old",
    "shares_attribute",
    "attribute_conflict",
    "additive",
    "old_past_event",
    "new_past_event",
    "negation_message",
    "old_slot",
    "new_slot",
    "same_slot",
    "holder_clash",
    "new_other_holder",
    "old_other_holder",
    "old_reported",
    "new_reported",
    "old_has_name",
    "names_swap",
    "told_fresh_name",
    "cue_close",
    "close",
    "new_repeats_old_name",
)



@functools.lru_cache(maxsize=8192)  # each text is read against up to 30 others
def _words(text: str, names: frozenset[str]) -> frozenset[str]:
    return frozenset(content_words(claim_body(text), names=names))


@functools.lru_cache(maxsize=8192)
def _stems(text: str, names: frozenset[str]) -> frozenset[str]:
    return frozenset(s._stem(w) for w in _words(text, names))


@functools.lru_cache(maxsize=8192)
def _cue(text: str) -> bool:
    return s.has_update_cue(text)


def _share(part: frozenset[str], whole: frozenset[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def pair_features(old: str, new: str, message: str, cosine: float,
                  names: frozenset[str] = frozenset()) -> list[float]:
    """The scalar features of (older claim, newer claim, the newer one's message)."""
    message = message or new
    old_named = {k for k, _ in s._named_values(old, names)}
    new_named = {k for k, _ in s._named_values(new, names)}
    msg_low = message.lower()
    old_stems, new_stems, msg_stems = (_stems(old, names), _stems(new, names),
                                       _stems(message, names))
    msg_body = claim_body(message)
    told = s.change_told(message)
    old_slots, new_slots = s.slot_values(old, names), s.slot_values(new, names)
    return [
        cosine,
        (sum(k in msg_low for k in old_named) / len(old_named)) if old_named else 0.0,
        _share(old_stems, msg_stems),
        _share(old_stems, new_stems),
        float(bool(new_named - old_named)),
        _share(new_stems, new_stems - old_stems),
        float(_cue(new) or _cue(message)),
        float(told),
        float(bool(s.STRONG_CUES.search(msg_body))),
        float(any(s._names_thing(old, thing, names) for thing in s.abandoned_things(msg_body))),
        float(shares_attribute(new, old, names)),
        float(attribute_conflict(new, old, names=names, told=told, message=message,
                                 new_event=s._past_event(new),
                                 old_event=s._past_event(old)) is not None),
        float(s._additive(new)),
        float(s._past_event(old)),
        float(s._past_event(new)),
        float(bool(s._NEGATION.search(msg_body))),
        float(bool(old_slots)),
        float(bool(new_slots)),
        float(bool(set(old_slots) & set(new_slots))),
        float(holder_clash(old_slots, new_slots)),
        float(bool(new_slots) and all(h for _, h in new_slots.values())),
        float(bool(old_slots) and all(h for _, h in old_slots.values())),
        float(claim_body(old) != old),
        float(claim_body(new) != new),
        float(bool(old_named)),
        # the message names the older claim's thing and the new claim a new one: "Left
        # Tesco. Driving for Ocado now"
        float(any(k in msg_low for k in old_named) and bool(new_named - old_named)),
        float(told and bool(new_named - old_named)),
        float(told or _cue(message)) * cosine,
        float(cosine >= 0.5),
        # the new claim goes on about the older one's thing ("the Acme office got a new
        # coffee machine" after "works at Acme") rather than naming another
        float(bool(old_named & new_named) and not new_named - old_named),
    ]


def holder_clash(old_slots: dict[str, tuple[str, tuple[str, ...] | None]],
                 new_slots: dict[str, tuple[str, tuple[str, ...] | None]]) -> bool:
    """The two claims state one slot of different holders ("Priya's manager" and "Helen
    Cho's manager"): not the same thing, whatever the model reads."""
    return any(not s.same_holder(new_slots[k][1], old_slots[k][1])
               for k in set(old_slots) & set(new_slots))


# The older claim must hold something to replace: a name, a one-value slot, an attribute
# it shares with the new claim, or words the new claim or message repeat. Conversation
# remarks ("Maria is sorry about Max") hold none and are never read (a hard gate: the
# linear model alone cannot say "only when").
_HOLDS = ("old_has_name", "old_slot", "shares_attribute", "old_names_in_message",
          "old_words_in_claim")


def holds_something(features: Sequence[float] | np.ndarray) -> bool:
    return any(features[SCALARS.index(name)] > 0 for name in _HOLDS)


def eligible(old: str, new: str, names: frozenset[str] = frozenset()) -> bool:
    """May the model read this pair at all? Not a restatement (neither says a content
    word the other does not); the same holder only (as the rules): not when
    a shared slot has two holders, nor when one claim states only another holder's slots
    ("Sandra's manager is Victor") and the other one the subject's own ("Priya's team
    lead is Sandra")."""
    a_words, b_words = _words(old, names), _words(new, names)
    if not b_words - a_words and not a_words - b_words:
        return False  # a restatement ("John is married." twice) replaces nothing
    a, b = s.slot_values(old, names), s.slot_values(new, names)
    if holder_clash(a, b):
        return False

    def others(slots: dict[str, tuple[str, tuple[str, ...] | None]]) -> bool:
        return bool(slots) and all(h for _, h in slots.values())

    def own(slots: dict[str, tuple[str, tuple[str, ...] | None]]) -> bool:
        return any(not h for _, h in slots.values())

    return not (others(b) and own(a)) and not (others(a) and own(b))


def vector_features(u: Sequence[float] | np.ndarray, v: Sequence[float] | np.ndarray,
                    projection: np.ndarray,
                    old_projection: np.ndarray) -> np.ndarray:
    """u*v and |u-v| of the two unit vectors (u the older claim's), and u itself, each
    projected to a few directions (fitted with the weights; none when empty)."""
    a, b = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
    parts = []
    if projection.size:
        parts.append(np.concatenate([a * b, np.abs(a - b)]) @ projection)
    if old_projection.size:
        parts.append(a @ old_projection)
    return np.concatenate(parts) if parts else np.zeros(0)


@dataclass(frozen=True)
class PairClassifier:
    """A logistic model read from JSON: P(update) = sigmoid(w . standardised(x) + b)."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    threshold: float
    projection: np.ndarray
    old_projection: np.ndarray

    @classmethod
    def from_dict(cls, data: dict) -> PairClassifier:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} model: {data.get('format')!r}")
        if list(data["scalars"]) != list(SCALARS):
            raise ValueError("the model's scalar features are not this featuriser's")
        projection = np.asarray(data.get("projection") or np.zeros((768, 0)), dtype=np.float64)
        old_projection = np.asarray(data.get("old_projection") or np.zeros((384, 0)),
                                    dtype=np.float64)
        width = len(SCALARS) + projection.shape[1] + old_projection.shape[1]
        weights = np.asarray(data["weights"], dtype=np.float64)
        mean = np.asarray(data["mean"], dtype=np.float64)
        scale = np.asarray(data["scale"], dtype=np.float64)
        if not weights.shape == mean.shape == scale.shape == (width,):
            raise ValueError("weights do not match the features")
        return cls(mean=mean, scale=scale, weights=weights, bias=float(data["bias"]),
                   threshold=float(data["threshold"]), projection=projection,
                   old_projection=old_projection)

    @classmethod
    def load(cls, path: Path | str = MODEL_PATH) -> PairClassifier:
        with open(path, encoding="utf-8") as fh:
            return cls.from_dict(json.load(fh))

    def row(self, old: str, new: str, message: str, u: Sequence[float], v: Sequence[float],
            names: frozenset[str] = frozenset()) -> np.ndarray:
        a, b = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
        cosine = float(np.dot(a, b))
        return np.concatenate([pair_features(old, new, message, cosine, names),
                               vector_features(a, b, self.projection, self.old_projection)])

    def probability(self, x: np.ndarray) -> float:
        z = float(((x - self.mean) / self.scale) @ self.weights) + self.bias
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    def score(self, old: str, new: str, message: str, u: Sequence[float],
              v: Sequence[float], names: frozenset[str] = frozenset()) -> float:
        """P(`new`, drawn from `message`, replaces `old`); u, v: their unit vectors. 0
        for a pair the model does not read (holds_something)."""
        x = self.row(old, new, message, u, v, names)
        return self.probability(x) if holds_something(x[:len(SCALARS)]) else 0.0


@functools.lru_cache(maxsize=1)
def default() -> PairClassifier:
    """The shipped model (read once per process)."""
    return PairClassifier.load()


def best_pair(statement: str, olds: Sequence[str], *, message: str = "",
              names: frozenset[str] = frozenset(), model: PairClassifier | None = None,
              limit: int = 30) -> tuple[int, float, bool] | None:
    """The best of `ranked_pairs`, or None."""
    found = ranked_pairs(statement, olds, message=message, names=names, model=model,
                         limit=limit)
    return found[0] if found else None


def ranked_pairs(statement: str, olds: Sequence[str], *, message: str = "",
                 names: frozenset[str] = frozenset(), model: PairClassifier | None = None,
                 limit: int = 30) -> list[tuple[int, float, bool]]:
    """The candidates among the `limit` most recent `olds` (newest first) that the model
    says `statement` replaces, or that replace `statement` (an older claim arriving late:
    the stored one then reads as the newer, its own text as its message), as (index,
    probability, reversed), at or above the threshold, best first.

    The vectors come from the embedder's document cache (the rules and the later
    embedding job encode the same texts)."""
    from retrieval.embedding import get_embedder

    model = model or default()
    olds = list(olds[:limit])
    if not olds:
        return []
    vectors = np.asarray(get_embedder().embed_documents([statement, *olds]), dtype=np.float64)
    head = vectors[0]
    found: list[tuple[int, float, bool]] = []
    for index, (old, vec) in enumerate(zip(olds, vectors[1:], strict=True)):
        if not eligible(old, statement, names):
            continue
        for reverse in (False, True):
            p = model.score(statement, old, old, head, vec, names) if reverse else \
                model.score(old, statement, message, vec, head, names)
            if p >= model.threshold:
                found.append((index, round(p, 4), reverse))
    return sorted(found, key=lambda hit: -hit[1])


def find_learned_conflict(item: Knowledge, *, names: frozenset[str],
                          candidates: Callable[[], Sequence[Candidate]],
                          message_text: str = "") -> Update | None:
    """The current row this model says `item` replaces, or that replaces `item` (an older
    claim arriving late), when the rules found nothing; its probability as the confidence
    (slot "learned"). Reads the candidates the rules read (no query of its own unless one
    scores at or above the threshold: then when each was said decides which is newer, as
    for the rules). The pipeline hands it to supersession.settle_update as `learned`."""
    rows = candidates()
    item_at: datetime | None = None
    for index, probability, reverse in ranked_pairs(
            item.statement, [c.statement for c in rows], message=message_text, names=names):
        old = _whole(rows[index])
        item_at = item_at or said_at(item)
        old_at = said_at(old)
        if item_at is not None and old_at is not None and (
                old_at == item_at or (old_at > item_at) != reverse):
            # one message's claims say no change of each other; and the model read the
            # pair the other way round from when the two were said
            continue
        return Update(old=old, slot="learned", cosine=probability, cue=False)
    return None
