"""Rerank of the fused head (reranking profiles): by the generation provider when one is
configured, else by token-level late interaction (MaxSim) over the default encoder.

With a provider: one call per search, the query and the head's statements under short
ids ("S1".."S20"), answered in a strict JSON schema ``{"order": [ids]}``, bounded as a
whole (retries included) by the profile's reserved allowance (``reserved_rerank_ms``).
The answer can only reorder what it was shown: ids that were not in the head are
ignored, head items the model left out keep their fused order after the ones it placed.

Without one: each statement of a deeper head (the profile's ``maxsim_head``, 40 in
thorough) is scored by MaxSim (ColBERT's late interaction: the mean over the query's
word pieces of the best cosine to any of the statement's word pieces) with the
embedder's own token embeddings. It reads query and statement together, which the
pooled vectors of the first stage cannot. The head is then sorted (ties in fused order)
by a linear second stage over that MaxSim and each candidate's standing in the fused
order and in every strategy's list, its semantic score and how much of the question's
wording it carries (``cross_features``; weights ``CROSS_WEIGHTS`` fitted offline by
bench/rerank_fit.py): once thorough fused the source-turn lane (v4), MaxSim alone fell
below the fused order (LoCoMo dev recall@10 0.704 vs 0.712) while the second stage rose
above it (0.722 under leave-one-conversation-out; bench/README.md, "Rerank"). The
allowance is checked between encoder batches. The token embeddings are optional: an
embedder without ``embed_tokens`` (both shipped ones have it: the ONNX encoder's hidden
states before pooling, the sentence-transformers model's token embeddings) skips this
stage.

Either way the tail beyond the head is untouched. The head holds only candidates the
reader's strategies returned, and its statements are read again through the reader's
visibility filter before they are scored or sent, so a rerank never widens what a
reader sees nor shows the model a statement the reader could not.

Status, reported in the search response's ``rerank`` (``reranker`` = ``model`` or
``maxsim``):

* ``done``: the new order was applied (``moved`` = head positions that changed); MaxSim
  out of time part way orders the fused prefix it scored (``partial``: true, ``head`` =
  that prefix, ``of`` = the head it was given) and leaves the rest in fused order;
* ``timeout``: the provider did not answer, or MaxSim did not finish, within the
  allowance; the fused order stands;
* ``failed``: the provider failed otherwise (``reason`` = the ProviderError kind), or the
  encoder did (``reason`` = ``encoder_error``); the fused order stands;
* ``skipped``: ``no_provider`` (no provider and no token embeddings), ``short_head``
  (fewer than two statements to order) or ``deadline`` (the request's deadline left an
  allowance under MIN_ALLOWANCE_MS; nothing was reserved, retrieval.engine).

The provider meters its call itself (``memhouse.core.llm``), under the schema name
``search_rerank_v1``, billed to the request's credential or the metering block around it.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from knowledge.selectors import visible_knowledge
from memhouse.core.llm import ChatProvider, ProviderError, get_provider
from memhouse.core.principal import Reader
from retrieval.fusion import FusedCandidate
from retrieval.lexical import POSTGRES_ENGLISH_STOPWORDS

log = logging.getLogger(__name__)

SCHEMA_NAME = "search_rerank_v1"
# Below this an allowance cannot cover even the query's token encoding (about 5-15 ms on
# 2 loaded cores) plus one batch of statements, so the engine skips the rerank instead.
MIN_ALLOWANCE_MS = 25
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order": {"type": "array", "items": {"type": "string"}}},
    "required": ["order"],
    "additionalProperties": False,
}
SYSTEM = (
    "You rank memory statements for a search. The user message is JSON with a question "
    "and statements, each under a short id. Answer with the ids of the statements in "
    "order of how useful each is for answering the question, most useful first. Use only "
    "the ids given; you may leave out statements that do not help."
)


def rerank(*, reader: Reader, scope_ids: tuple[uuid.UUID, ...], now: datetime, query: str,
           fused: list[FusedCandidate], head: int, allowance_ms: int,
           provider: ChatProvider | None = None, maxsim_head: int | None = None,
           lists: dict[str, list[tuple[str, float]]] | None = None
           ) -> tuple[list[FusedCandidate], dict[str, Any]]:
    """`fused` with its first `head` items reordered by the provider (or its first
    `maxsim_head` by MaxSim when there is none), and the status."""
    provider = provider if provider is not None else get_provider()
    encode = None if provider is not None else token_encoder()
    if provider is None and encode is None:
        return fused, {"status": "skipped", "reason": "no_provider"}
    if encode is not None and maxsim_head is not None:
        head = maxsim_head
    top, tail = fused[:head], fused[head:]
    texts = {str(k): v for k, v in visible_knowledge(reader=reader, scope_ids=scope_ids, at=now)
             .filter(id__in=[c.id for c in top]).values_list("id", "statement")}
    shown = [c for c in top if c.id in texts]
    if len(shown) < 2:
        return fused, {"status": "skipped", "reason": "short_head"}
    started = time.monotonic()
    if encode is not None:
        try:
            scores = maxsim(encode, query, [texts[c.id] for c in shown],
                            ends=started + max(allowance_ms, 1) / 1000.0, partial=True)
        except TimeoutError:
            return fused, {"status": "timeout", "reranker": "maxsim", "head": len(shown),
                           "elapsed_ms": round((time.monotonic() - started) * 1000, 2)}
        except Exception:  # a broken encoder costs the rerank, never the search
            log.exception("rerank: token encoder failed")
            return fused, {"status": "failed", "reranker": "maxsim", "reason": "encoder_error"}
        # Out of time part way: the fused prefix that was scored is ordered (a shallower
        # head), the rest keeps its fused order; under two scored it is a timeout.
        ready = next((i for i, v in enumerate(scores) if v is None), len(scores))
        if ready < 2:
            return fused, {"status": "timeout", "reranker": "maxsim", "head": len(shown),
                           "elapsed_ms": round((time.monotonic() - started) * 1000, 2)}
        order = [float(v) for v in scores[:ready]]
        if lists is not None:  # the second stage over the strategies' lists and MaxSim
            order = list(cross_features(query, [c.id for c in shown[:ready]], texts, lists,
                                        order) @ CROSS_WEIGHTS)
        placed = [shown[i] for i in sorted(range(ready), key=lambda i: (-order[i], i))]
        ordered, status = _apply(top, tail, placed, "maxsim", started)
        return ordered, ({**status, "partial": True, "of": len(shown)} if ready < len(shown)
                         else status)
    assert provider is not None
    short = {f"S{n}": c for n, c in enumerate(shown, start=1)}
    user = json.dumps({"question": query,
                       "statements": [{"id": sid, "statement": texts[c.id]}
                                      for sid, c in short.items()]}, ensure_ascii=False)
    seconds = max(allowance_ms, 1) / 1000.0
    try:
        reply = provider.complete_json(system=SYSTEM, user=user, schema=SCHEMA,
                                       schema_name=SCHEMA_NAME, timeout=seconds,
                                       total_timeout=seconds)
    except ProviderError as exc:
        elapsed = round((time.monotonic() - started) * 1000, 2)
        log.warning("rerank: provider call failed (%s)", exc.kind)
        if exc.kind == "timeout":
            return fused, {"status": "timeout", "reranker": "model", "head": len(shown),
                           "elapsed_ms": elapsed}
        return fused, {"status": "failed", "reranker": "model", "reason": exc.kind,
                       "head": len(shown), "elapsed_ms": elapsed}
    chosen: dict[str, FusedCandidate] = {}
    for sid in reply["order"]:
        cand = short.get(sid.strip())
        if cand is not None:  # invented ids are ignored, a repeated one counts once
            chosen.setdefault(cand.id, cand)
    return _apply(top, tail, list(chosen.values()), "model", started, head=len(shown))


def _apply(top: list[FusedCandidate], tail: list[FusedCandidate],
           placed: list[FusedCandidate], reranker: str, started: float,
           head: int | None = None) -> tuple[list[FusedCandidate], dict[str, Any]]:
    """`placed` first, the rest of the head in fused order, then the tail."""
    ids = {c.id for c in placed}
    ordered = [*placed, *(c for c in top if c.id not in ids)]
    moved = sum(1 for a, b in zip(ordered, top, strict=True) if a.id != b.id)
    return ordered + tail, {"status": "done", "reranker": reranker,
                            "head": head if head is not None else len(placed), "moved": moved,
                            "elapsed_ms": round((time.monotonic() - started) * 1000, 2)}


Encoder = Callable[[Sequence[str]], list[Any]]
# Statements recur from search to search (a scope's head changes slowly), so their token
# matrices are kept, unit rows in float16: about 15 KB for a 20-token statement.
TOKEN_CACHE_ENTRIES = 4096
ENCODE_BATCH = 8  # statements per encoder call; the allowance is checked between calls


class _TokenCache:
    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._rows: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> Any:
        with self._lock:
            rows = self._rows.get(key)
            if rows is not None:
                self._rows.move_to_end(key)
            return rows

    def put(self, key: tuple[str, str], rows: Any) -> None:
        with self._lock:
            self._rows[key] = rows
            self._rows.move_to_end(key)
            while len(self._rows) > self.max_entries:
                self._rows.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()


token_cache = _TokenCache(TOKEN_CACHE_ENTRIES)


def token_encoder() -> tuple[str, Encoder] | None:
    """The default embedder's identity key and token embeddings (one row per word piece,
    special tokens left out), or None when it offers no `embed_tokens` (both shipped
    embedders do, from the model they already hold)."""
    from retrieval.embedding import get_embedder

    embedder = get_embedder()
    offered = getattr(embedder, "embed_tokens", None)
    if not callable(offered):
        return None
    return embedder.identity.key, offered


def _unit(matrix: Any) -> Any:
    rows = np.asarray(matrix, dtype=np.float32)
    rows = rows.reshape(-1, rows.shape[-1]) if rows.ndim else rows.reshape(0, 1)
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)


def maxsim(encoder: tuple[str, Encoder], query: str, statements: list[str],
           ends: float | None = None, partial: bool = False) -> list[Any]:
    """Per statement: the mean over the query's tokens of the best cosine to any of the
    statement's tokens. When `ends` (monotonic) passes between encoder calls: with
    `partial` the statements not encoded by then score None (the encoder takes them in
    the given order, so the scored ones are a prefix plus any cached; a batch expected
    to end past `ends`, as long as the one before, is not begun), else TimeoutError."""
    space, encode = encoder
    q = _unit(encode([query])[0])
    todo = [t for t in dict.fromkeys(statements) if token_cache.get((space, t)) is None]
    late: set[str] = set()
    last = 0.0  # the previous batch's time: a batch that would not end in time is not begun
    for start in range(0, len(todo), ENCODE_BATCH):
        began = time.monotonic()
        if ends is not None and began + (last if partial else 0.0) >= ends:
            if not partial:
                raise TimeoutError("the rerank allowance is spent")
            late = set(todo[start:])
            break
        batch = todo[start:start + ENCODE_BATCH]
        for text, rows in zip(batch, encode(batch), strict=True):
            token_cache.put((space, text), _unit(rows).astype(np.float16))
        last = time.monotonic() - began
    if not partial and ends is not None and time.monotonic() >= ends:
        raise TimeoutError("the rerank allowance is spent")
    out: list[Any] = []
    for text in statements:
        if text in late:
            out.append(None)
            continue
        d = token_cache.get((space, text))
        if d is None:  # evicted meanwhile by a concurrent search
            d = _unit(encode([text])[0])
        out.append(float((q @ d.T.astype(np.float32)).max(axis=1).mean())
                   if len(q) and len(d) else 0.0)
    return out


# Per head candidate: its standing in the fused order and in each strategy's own list,
# its MaxSim, and how much of the question's wording it carries.
FEATURE_STRATEGIES = ("semantic", "lexical", "entity_match", "relation_expand", "temporal",
                      "salience_recency", "semantic.source_turns", "semantic.said_when")
FEATURE_NAMES = ("fused_log_rank", "maxsim_z", "maxsim",
                 *(f"{s}_rr" for s in FEATURE_STRATEGIES), "semantic_score", "term_coverage",
                 "log_words")
_WORD = re.compile(r"[a-z0-9]+")


def _terms(text: str) -> set[str]:
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w
            for w in _WORD.findall(text.lower()) if w not in POSTGRES_ENGLISH_STOPWORDS}


def cross_features(query: str, head: Sequence[str], texts: dict[str, str],
                   lists: dict[str, list[tuple[str, float]]], sims: Sequence[float]
                   ) -> np.ndarray:
    """One row per id of `head` (fused order), columns FEATURE_NAMES."""
    n = len(head)
    out = np.zeros((n, len(FEATURE_NAMES)), dtype=np.float64)
    sim = np.asarray(sims, dtype=np.float64)
    sd = float(sim.std()) if n else 0.0
    out[:, 0] = -np.log1p(np.arange(n))
    out[:, 1] = (sim - sim.mean()) / sd if sd > 0 else 0.0
    out[:, 2] = sim
    ranks = {s: {cid: r for r, (cid, _) in enumerate(lists.get(s) or [])}
             for s in FEATURE_STRATEGIES}
    semantic = dict(lists.get("semantic") or [])
    q_terms = _terms(query)
    for i, cid in enumerate(head):
        for j, s in enumerate(FEATURE_STRATEGIES):
            r = ranks[s].get(cid)
            out[i, 3 + j] = 1.0 / (1.0 + r) if r is not None else 0.0
        out[i, 3 + len(FEATURE_STRATEGIES)] = float(semantic.get(cid, 0.0))
        words = _terms(texts.get(cid, ""))
        out[i, 4 + len(FEATURE_STRATEGIES)] = (len(q_terms & words) / len(q_terms)
                                                if q_terms else 0.0)
        out[i, 5 + len(FEATURE_STRATEGIES)] = np.log1p(len(_WORD.findall(
            texts.get(cid, "").lower())))
    return out


# The weights of the second stage: a pairwise logistic fit on LoCoMo dev, all five
# conversations (bench/rerank_fit.py --dump DUMP --head 40 --pairwise, the dump from
# bench/rerank_eval.py on thorough-v5; bench/results/rerank_fit_said_when.json).
# Leave-one-conversation-out recall@10 0.743 vs 0.734 fused and 0.709 MaxSim alone.
CROSS_WEIGHTS = np.asarray([
    0.8308, -0.2049, 10.9003,  # fused_log_rank, maxsim_z, maxsim
    -0.7885, 0.8999, 0.0817, -0.3813, 0.0, 0.0, 1.6298, 1.8301,  # the lists' reciprocal ranks
    -1.5973, -2.4185, -0.3291,  # semantic_score, term_coverage, log_words
])
