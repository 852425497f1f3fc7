"""Retrieval profiles: named, versioned bundles of strategies, weights, rank constant,
rerank and deadline. Scopes may override them, inherited nearest-wins down the tree."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings

from memhouse.core.errors import ApplicationError

ALL_STRATEGIES = ("semantic", "lexical", "temporal", "salience_recency", "entity_match",
                  "relation_expand")
# Strategies whose output depends on the query text (for disagreement.query_dependent_empty).
QUERY_DEPENDENT = frozenset({"semantic", "lexical", "temporal", "entity_match",
                             "relation_expand"})


@dataclass(frozen=True)
class Profile:
    name: str
    version: str
    strategies: tuple[str, ...]
    weights: dict[str, float]
    rrf_k: int = 15
    rerank: bool = False
    deadline_ms: int = 300
    # Reserved before strategies start when rerank is on.
    rerank_reserve_ms: int = 0
    rerank_head: int = 20  # fused candidates the model orders (listwise, one call)
    # Fused candidates the model-free MaxSim rerank orders when no provider is configured:
    # it costs no tokens, and deeper than 20 it reaches evidence fusion ranked 21-40.
    maxsim_head: int = 20
    head: int = 50  # candidates each strategy returns
    seed_head: int = 10  # relation_expand expands from this many interleaved seeds
    lanes: bool = False  # minimal: direct and derived semantic lanes
    # Source crowding (retrieval.crowding): a statement whose source turn already backs a
    # higher one waits behind this many statements that bring a new turn; 0 keeps fused order.
    repeat_deferral: int = 0
    experimental: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)


BASE_PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("fast", "fast-v1", ("semantic", "salience_recency"),
                {"semantic": 1.0, "salience_recency": 0.5}, deadline_ms=100, head=20),
        # v2: semantic weighs 2.0. Once the extractor kept reported clauses ("Nate said they
        # eat vegetables") the dense list became the better one: LoCoMo dev recall@10 0.650
        # -> 0.661 (weight 1.5: 0.660, 2.5: 0.660, 3.0: 0.659; bench/README.md).
        # v3: semantic's source-turn lane fused as its own list (retrieval.strategies.
        # semantic). LoCoMo dev recall@10 0.668 -> 0.710, 0.707 cross-validated
        # (leave one conversation out over its weight; bench/README.md).
        # v4: semantic's said-when lane (the messages said in the time a question names)
        # fused as its own list, semantic 2.0 -> 1.5: recall@10 0.709 -> 0.736, session
        # any@5 of the top-10 sessions 0.905 -> 0.934; 0.733 / 0.928 when every weight is
        # chosen by leave-one-conversation-out (bench/README.md).
        # v5: source crowding (retrieval.crowding): recall@10 0.734 -> 0.745, better or
        # equal in every conversation (bench/README.md, "Source crowding").
        Profile("balanced", "balanced-v5", ("semantic", "lexical", "temporal", "entity_match"),
                {"semantic": 1.5, "lexical": 1.0, "temporal": 0.6, "entity_match": 0.6,
                 "semantic.source_turns": 1.0, "semantic.said_when": 2.0},
                deadline_ms=300, repeat_deferral=10),
        # v3: the model-free rerank (MaxSim) reads the first 40 fused candidates, not 20:
        # LoCoMo dev recall@10 0.686 -> 0.700, the depth chosen by leave-one-conversation-
        # out over 20-60 (flat from 40 on; bench/rerank_eval.py). A model still sees 20.
        # v4: semantic's source-turn lane fused as its own list, as in balanced-v3 (same
        # weight), and the model-free rerank orders the head of 40 by a linear second
        # stage over MaxSim and the strategies' ranks (retrieval.rerank.CROSS_WEIGHTS):
        # LoCoMo dev recall@10 0.712 fused -> 0.722 cross-validated (bench/README.md).
        # v5: the said-when lane as in balanced-v4 (weight 2.0), and the second stage
        # refitted with its rank as a feature: recall@10 0.734 fused -> 0.743 cross-
        # validated, session any@5 of the top-10 sessions 0.940 (bench/README.md).
        # v6: source crowding after the rerank, as in balanced-v5: recall@10 0.737 ->
        # 0.758, every conversation up (bench/README.md, "Source crowding").
        Profile("thorough", "thorough-v6", ALL_STRATEGIES,
                {"semantic": 2.0, "lexical": 1.0, "temporal": 0.6, "salience_recency": 0.3,
                 "entity_match": 0.6, "relation_expand": 0.4, "semantic.source_turns": 1.0,
                 "semantic.said_when": 2.0},
                rerank=True, deadline_ms=1500, rerank_reserve_ms=500, maxsim_head=40,
                head=80, repeat_deferral=10),
        Profile("minimal", "minimal-v1", ("semantic", "lexical"),
                {"semantic": 1.0, "lexical": 1.0}, deadline_ms=300, lanes=True,
                experimental=True),
    )
}
# Per-scope overrides (scope setting `retrieval_profiles`: {profile name: {key: value}}).
# `rerank_reserve_ms` is the rerank allowance of a reranking profile; a real model needs
# more than the 500 ms thorough reserves by default, so raise it with `deadline_ms`, e.g.
# {"thorough": {"deadline_ms": 4000, "rerank_reserve_ms": 3000}}. It must stay below the
# deadline (the strategies keep the rest); a value that does not is ignored.
_OVERRIDABLE = {"weights", "rrf_k", "deadline_ms", "head", "rerank_reserve_ms"}


def _apply_overrides(profile: Profile, overrides: dict[str, Any]) -> Profile:
    clean = {k: v for k, v in overrides.items() if k in _OVERRIDABLE}
    if not clean:
        return profile
    weights = dict(profile.weights)
    for name, w in (clean.pop("weights", None) or {}).items():
        if name in profile.weights and isinstance(w, (int, float)) and w >= 0:
            weights[name] = float(w)
    changes: dict[str, Any] = {"weights": weights}
    for key in ("rrf_k", "deadline_ms", "head"):
        if isinstance(clean.get(key), int) and clean[key] > 0:
            changes[key] = clean[key]
    reserve = clean.get("rerank_reserve_ms")
    if (profile.rerank and isinstance(reserve, int) and not isinstance(reserve, bool)
            and 0 < reserve < changes.get("deadline_ms", profile.deadline_ms)):
        changes["rerank_reserve_ms"] = reserve
    return replace(profile, **changes, overrides={**overrides})


def with_deadline(profile: Profile, deadline_ms: int) -> Profile:
    """`profile` under a request's own deadline. A reranking profile's reserve keeps its
    share of the deadline when the request shortens it (thorough: 500 of 1500 ms, so a
    300 ms request reserves 100 ms), so the strategies always keep the larger part and the
    rerank never runs past the deadline the caller asked for; a longer deadline leaves
    the reserve as it is (the strategies get the extra time)."""
    reserve = profile.rerank_reserve_ms
    if profile.rerank and deadline_ms < profile.deadline_ms:
        reserve = reserve * deadline_ms // profile.deadline_ms
    return replace(profile, deadline_ms=deadline_ms, rerank_reserve_ms=reserve)


def _versioned(profile: Profile) -> Profile:
    """Suffix the version with a digest of whatever changes ranking beyond the base: scope
    overrides and the embedder's query prefix."""
    extra = {"overrides": profile.overrides,
             "query_prefix": getattr(settings, "MEMHOUSE_EMBEDDING_QUERY_PREFIX", "")}
    if not profile.overrides and not extra["query_prefix"]:
        return profile
    digest = hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8]
    return replace(profile, version=f"{profile.version}+{digest}")


def resolve_profile(*, requested: str | None, scope: Any, default: str) -> Profile:
    """The profile for a read at `scope`: explicit request, else the nearest scope's
    `retrieval_profile`, else `default`; then that scope chain's overrides, nearest-wins."""
    from knowledge.selectors import scope_setting

    name = requested or scope_setting(scope=scope, key="retrieval_profile", default=default)
    profile = BASE_PROFILES.get(name)
    if profile is None:
        raise ApplicationError("unknown_profile", f"profile must be one of "
                               f"{sorted(p for p in BASE_PROFILES if p != 'minimal')}")
    if profile.experimental and not settings.MEMHOUSE_EXPERIMENTAL_MINIMAL_RECALL:
        raise ApplicationError("profile_disabled", "the minimal profile is experimental; "
                               "set MEMHOUSE_EXPERIMENTAL_MINIMAL_RECALL=true to use it")
    overrides = (scope_setting(scope=scope, key="retrieval_profiles", default={}) or {})
    return _versioned(_apply_overrides(profile, overrides.get(name) or {}))


def allowed(strategy: str) -> bool:
    """The operator allowlist: a strategy absent from it never runs."""
    return strategy in settings.MEMHOUSE_STRATEGY_ALLOWLIST
