"""Score fusion across retrieval strategies, and strategy disagreement.

Each strategy scores in its own space (cosine similarity, full-text rank, time relevance,
salience, mention confidence). Fusion makes them comparable by min-max normalising every
returned list to [0, 1] (a singleton or tied list maps to 1: it has no observed tail), then
mixing 95% normalised score with a 5% reciprocal-rank tie-break::

    contribution_s(c) = 0.95 * norm_s(c) + 0.05 * (rrf_k + 1) / (rrf_k + rank_s(c))

with rank starting at 1, so every contribution lies in [0, 1]. The fusion score is the
weighted mean over the *configured* strategies (a configured strategy that returned nothing,
or did not run, contributes 0 but still counts in the denominator)::

    fusion_score(c) = sum_s w_s * contribution_s(c) / sum_s w_s

The returned order is the answer. Re-sorting fused candidates by any raw per-strategy score
compares numbers from different scoring spaces.

:func:`disagreement` is computed on the raw lists *before* fusion, so it measures what the
strategies thought rather than an artefact of the merge. Fusion always emits a ranked list,
even from lists that are all bad, so only the disagreement flags can say that the
query-dependent strategies found nothing.

Everything here is pure Python over floats; sums use :func:`math.fsum`, so results do not
depend on the order strategies are supplied in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import TypedDict

__all__ = [
    "DEFAULT_RRF_K",
    "NORMALIZED_SHARE",
    "RANK_SHARE",
    "Disagreement",
    "FusedCandidate",
    "StrategyDetail",
    "disagreement",
    "fuse",
]

DEFAULT_RRF_K = 15
NORMALIZED_SHARE = 0.95
RANK_SHARE = 0.05


class StrategyDetail(TypedDict):
    raw: float
    normalized: float
    rank: int
    contribution: float


@dataclass(frozen=True)
class FusedCandidate:
    id: str
    fusion_score: float
    strategies: dict[str, StrategyDetail] = field(default_factory=dict)
    """Per strategy that returned this candidate: raw score, normalised score, 1-based rank
    and (unweighted) contribution."""

    @property
    def best_rank(self) -> int:
        return min((d["rank"] for d in self.strategies.values()), default=0)


class Disagreement(TypedDict):
    pairwise_top_k_overlap: dict[str, float | None]
    mean_overlap: float | None
    query_dependent_empty: bool


def _dedupe(items: Sequence[tuple[str, float]], strategy: str) -> list[tuple[str, float]]:
    """Keep each candidate's first (best-ranked) occurrence; reject non-finite scores."""
    seen: set[str] = set()
    result: list[tuple[str, float]] = []
    for candidate_id, raw in items:
        score = float(raw)
        if not math.isfinite(score):
            raise ValueError(f"strategy {strategy!r} returned a non-finite score {raw!r}")
        if candidate_id in seen:
            continue
        seen.add(candidate_id)
        result.append((candidate_id, score))
    return result


def _normalise(scores: Sequence[float]) -> list[float]:
    low, high = min(scores), max(scores)
    if high == low:
        return [1.0] * len(scores)
    span = high - low
    if not math.isfinite(span):  # e.g. -1e308 .. 1e308: scale first to avoid overflow
        return [(s / 2 - low / 2) / (high / 2 - low / 2) for s in scores]
    return [(s - low) / span for s in scores]


def _validate_weights(weights: Mapping[str, float]) -> float:
    for strategy, weight in weights.items():
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"weight for {strategy!r} must be finite and >= 0, got {weight!r}")
    total = math.fsum(weights.values())
    if total <= 0:
        raise ValueError("at least one configured strategy needs a positive weight")
    return total


def fuse(
    lists: Mapping[str, Sequence[tuple[str, float]]],
    weights: Mapping[str, float],
    rrf_k: int = DEFAULT_RRF_K,
) -> list[FusedCandidate]:
    """Fuse per-strategy ranked lists into one ranked list.

    ``lists`` maps strategy -> ``(candidate_id, raw_score)`` best-first, higher raw score is
    better (convert distances before calling). The position in the list is the rank; it is
    not re-derived from the scores. A repeated id keeps its first occurrence.
    ``weights`` names every configured strategy; one absent from ``lists`` (dropped, not
    applicable) or with an empty list still counts in the denominator. A list for a strategy
    that has no weight is an error rather than being silently ignored.

    The result is sorted by fusion score (descending), then best rank across strategies,
    then id, so equal inputs always give the same order.
    """
    if isinstance(rrf_k, bool) or not isinstance(rrf_k, int) or rrf_k < 0:
        raise ValueError(f"rrf_k must be a non-negative integer, got {rrf_k!r}")
    unconfigured = sorted(set(lists) - set(weights))
    if unconfigured:
        raise ValueError(f"lists given for unconfigured strategies: {', '.join(unconfigured)}")
    total_weight = _validate_weights(weights)

    details: dict[str, dict[str, StrategyDetail]] = {}
    for strategy in sorted(lists):
        items = _dedupe(lists[strategy], strategy)
        if not items:
            continue
        normalised = _normalise([score for _, score in items])
        for rank, ((candidate_id, raw), norm) in enumerate(
            zip(items, normalised, strict=True), start=1
        ):
            rank_term = (rrf_k + 1) / (rrf_k + rank)
            contribution = NORMALIZED_SHARE * norm + RANK_SHARE * rank_term
            details.setdefault(candidate_id, {})[strategy] = StrategyDetail(
                raw=raw, normalized=norm, rank=rank, contribution=contribution
            )

    fused = [
        FusedCandidate(
            id=candidate_id,
            fusion_score=math.fsum(weights[s] * d["contribution"] for s, d in per_strategy.items())
            / total_weight,
            strategies=per_strategy,
        )
        for candidate_id, per_strategy in details.items()
    ]
    fused.sort(key=lambda c: (-c.fusion_score, c.best_rank, c.id))
    return fused


def _top_k_ids(items: Sequence[tuple[str, float]], k: int) -> set[str]:
    ids: list[str] = []
    for candidate_id, _ in items:
        if candidate_id not in ids:
            ids.append(candidate_id)
            if len(ids) == k:
                break
    return set(ids)


def disagreement(
    lists: Mapping[str, Sequence[tuple[str, float]]],
    *,
    query_dependent: set[str] | frozenset[str],
    k: int = 10,
) -> Disagreement:
    """How much the strategies that ran agreed, measured on their raw lists.

    Pass only strategies that ran (an empty list means "ran and found nothing"; dropped or
    not-applicable strategies must be absent).

    * ``pairwise_top_k_overlap``: for every pair of strategies (key ``"a|b"``, names sorted,
      keys sorted) the Jaccard overlap of their top-``k`` id sets; ``None`` when both lists
      are empty (overlap is undefined), ``0.0`` when exactly one is.
    * ``mean_overlap``: mean of the defined pairwise values, ``None`` if there are none.
    * ``query_dependent_empty``: at least one query-dependent strategy ran and every
      query-dependent strategy that ran returned nothing - the state in which only
      query-independent strategies (salience_recency) would have produced candidates.
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    tops = {strategy: _top_k_ids(items, k) for strategy, items in lists.items()}
    overlaps: dict[str, float | None] = {}
    for a, b in combinations(sorted(tops), 2):
        union = tops[a] | tops[b]
        overlaps[f"{a}|{b}"] = len(tops[a] & tops[b]) / len(union) if union else None
    defined = [value for value in overlaps.values() if value is not None]
    ran_query_dependent = [s for s in lists if s in query_dependent]
    return Disagreement(
        pairwise_top_k_overlap=dict(sorted(overlaps.items())),
        mean_overlap=math.fsum(defined) / len(defined) if defined else None,
        query_dependent_empty=bool(ran_query_dependent)
        and all(len(lists[s]) == 0 for s in ran_query_dependent),
    )
