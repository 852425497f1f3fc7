"""Source crowding: the first results come from different source turns.

Extraction turns one chat message into several statements ("I took my turtles to the
beach in Tampa! They always bring me peace" gives two), and they rank together: in
LoCoMo dev one slot in six of balanced's top 10 held a statement whose every source
message already backed a statement ranked above it. Such a repeat says something new,
but the turn it points at is already in front of the agent (and its excerpt comes with
the first line in `context`), while the next turn down may hold the answer. So a repeat
waits until REPEAT_DEFERRAL statements that do bring a new turn have been placed, then
takes its place in fused order; it is not dropped. Statements with no source message
(documents, curators' statements: one document backs thousands) are never repeats.

This is the one step after fusion (and rerank) that moves a candidate, so the fused order
is kept everywhere else and a moved candidate says so (`deferred_after`, the id of the
statement from the same turn that ranks above it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from knowledge.models import KnowledgeSource
from retrieval.fusion import FusedCandidate

# How many new-turn statements a repeat waits behind. LoCoMo dev, balanced, recall@10 by
# the wait: 0.734 (none) -> 0.737 (1-2) -> 0.741 (5) -> 0.745 (8 and more), better or equal
# in each of the five conversations at every wait (bench/README.md, "Source crowding"):
# a page of ten is ten turns' worth of evidence where the fused list has them.
REPEAT_DEFERRAL = 10
# Only the head is read for its sources (one query); pages beyond it keep fused order.
WINDOW = 100


def defer_repeats(fused: Sequence[FusedCandidate], *, wait: int = REPEAT_DEFERRAL,
                  window: int = WINDOW) -> tuple[list[FusedCandidate], dict[str, str]]:
    """`fused` with each repeat (every source message of it already backs a candidate
    placed above) moved down behind the next `wait` candidates that are not repeats.
    Returns the new order and, per moved id, the id it repeats. Call inside the reader's
    Account (the source rows are read under RLS); no text is read."""
    head = list(fused[:window])
    if wait <= 0 or len(head) < 2:
        return list(fused), {}
    sources: dict[str, set[str]] = defaultdict(set)
    for kid, mid in (KnowledgeSource.objects
                     .filter(knowledge_id__in=[c.id for c in head], message__isnull=False)
                     .values_list("knowledge_id", "message_id")):
        sources[str(kid)].add(str(mid))
    placed: list[FusedCandidate] = []
    first_of: dict[str, str] = {}  # message id -> id of the first candidate it backs
    waiting: list[tuple[int, FusedCandidate]] = []  # (new-turn placements still to wait)
    repeats: dict[str, str] = {}
    for cand in head:
        mids = sources.get(cand.id, set())
        if mids and all(m in first_of for m in mids):
            repeats[cand.id] = first_of[min(mids)]
            waiting.append((wait, cand))
            continue
        placed.append(cand)
        for m in mids:
            first_of.setdefault(m, cand.id)
        waiting = [(left - 1, c) for left, c in waiting]
        while waiting and waiting[0][0] <= 0:
            placed.append(waiting.pop(0)[1])
    placed.extend(c for _, c in waiting)
    before = {c.id: n for n, c in enumerate(head)}
    moved = {c.id: repeats[c.id] for n, c in enumerate(placed)
             if c.id in repeats and n > before[c.id]}
    return placed + list(fused[window:]), moved
