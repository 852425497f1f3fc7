"""Listwise rerank of the fused head through the generation provider (reranking profiles).

One provider call per search: the query and the head's statements under short ids
("S1".."S20"), answered in a strict JSON schema ``{"order": [ids]}``, bounded as a whole
(retries included) by the profile's reserved allowance (``reserved_rerank_ms``).

The answer can only reorder what it was shown: ids that were not in the head are
ignored, head items the model left out keep their fused order after the ones it placed,
and the tail beyond the head is untouched. The head holds only candidates the reader's
strategies returned, and its statements are read again through the reader's visibility
filter before they go into the prompt, so a rerank never widens what a reader sees nor
shows the model a statement the reader could not.

Status, reported in the search response's ``rerank``:

* ``done``: the model's order was applied (``moved`` = head positions that changed);
* ``timeout``: no answer within the allowance; the fused order stands;
* ``failed``: the provider failed otherwise (``reason`` = the ProviderError kind);
* ``skipped``: ``no_provider`` (none configured) or ``short_head`` (fewer than two
  statements to order).

No model-free second stage is used: token-level MaxSim over the default encoder did not
raise thorough's LoCoMo dev recall@10 in-sample or cross-validated (bench/README.md,
"Model-free rerank").

The provider meters the call itself (``memhouse.llm``), under the schema name
``search_rerank_v1``, billed to the request's credential or the metering block around it.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from datetime import datetime
from typing import Any

from knowledge.selectors import visible_knowledge
from memhouse.llm import ChatProvider, ProviderError, get_provider
from memhouse.principal import Reader
from retrieval.fusion import FusedCandidate

log = logging.getLogger(__name__)

SCHEMA_NAME = "search_rerank_v1"
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
           provider: ChatProvider | None = None
           ) -> tuple[list[FusedCandidate], dict[str, Any]]:
    """`fused` with its first `head` items reordered by the provider, and the status."""
    provider = provider if provider is not None else get_provider()
    if provider is None:
        return fused, {"status": "skipped", "reason": "no_provider"}
    top, tail = fused[:head], fused[head:]
    texts = dict(visible_knowledge(reader=reader, scope_ids=scope_ids, at=now)
                 .filter(id__in=[c.id for c in top]).values_list("id", "statement"))
    shown = [c for c in top if uuid.UUID(c.id) in texts]
    if len(shown) < 2:
        return fused, {"status": "skipped", "reason": "short_head"}
    short = {f"S{n}": c for n, c in enumerate(shown, start=1)}
    user = json.dumps({"question": query,
                       "statements": [{"id": sid, "statement": texts[uuid.UUID(c.id)]}
                                      for sid, c in short.items()]}, ensure_ascii=False)
    started = time.monotonic()
    seconds = max(allowance_ms, 1) / 1000.0
    try:
        reply = provider.complete_json(system=SYSTEM, user=user, schema=SCHEMA,
                                       schema_name=SCHEMA_NAME, timeout=seconds,
                                       total_timeout=seconds)
    except ProviderError as exc:
        elapsed = round((time.monotonic() - started) * 1000, 2)
        log.warning("rerank: provider call failed (%s)", exc.kind)
        if exc.kind == "timeout":
            return fused, {"status": "timeout", "head": len(shown), "elapsed_ms": elapsed}
        return fused, {"status": "failed", "reason": exc.kind, "head": len(shown),
                       "elapsed_ms": elapsed}
    placed: dict[str, FusedCandidate] = {}
    for sid in reply["order"]:
        cand = short.get(sid.strip())
        if cand is not None:  # invented ids are ignored, a repeated one counts once
            placed.setdefault(cand.id, cand)
    ordered = [*placed.values(), *(c for c in top if c.id not in placed)]
    moved = sum(1 for a, b in zip(ordered, top, strict=True) if a.id != b.id)
    return ordered + tail, {"status": "done", "head": len(shown), "moved": moved,
                            "elapsed_ms": round((time.monotonic() - started) * 1000, 2)}
