"""factory-boy factories that write through services (RLS needs the Account bound).

`KnowledgeFactory(world=w, reach="stale")` creates the statement as the pipeline does
(proposed) and then walks the lifecycle's own edges (`knowledge.lifecycle.EDGES`) to the
requested state, one `transition` per edge with the first reason code of each state, so
every row a test builds has the events, audit entries and refresh hooks a real one has.
`state=` is passed through to `knowledge_propose` unchanged (which refuses any state but
proposed: a test of that refusal uses it).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import factory

from knowledge import lifecycle, services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge

TEST_ACTOR = "system:test"
# The reason each edge's target takes when a state has several (the gate's own codes).
PREFERRED_REASON = {
    lifecycle.ACTIVE: "f4_gate_a_b_accepted",
    lifecycle.PROVISIONAL: "f4_gate_a_b_deferred",
    lifecycle.HELD: "f4_scope_hold",
    lifecycle.REJECTED: "f4_curator_rejected",
    lifecycle.SUPERSEDED: "f4_curator_edit",
    lifecycle.RETRACTED: "f4_source_erased",
}


def lifecycle_path(to: str, start: str = lifecycle.INITIAL_STATE) -> list[str]:
    """The shortest walk of allowed edges from `start` to `to` (states after `start`),
    preferring an edge through `active` when two walks are equally short."""
    if to not in lifecycle.STATES:
        raise ValueError(f"unknown state {to!r}")
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state == to:
            break
        exits = sorted(lifecycle.EDGES.get(state, frozenset()) - {state},
                       key=lambda s: (s != lifecycle.ACTIVE, s))
        for nxt in exits:
            if nxt not in previous:
                previous[nxt] = state
                queue.append(nxt)
    if to not in previous:
        raise ValueError(f"{to!r} cannot be reached from {start!r}")
    path: list[str] = []
    node: str | None = to
    while node is not None and node != start:
        path.append(node)
        node = previous[node]
    return list(reversed(path))


def walk_to(item: Knowledge, to: str, *, actor: Any = TEST_ACTOR) -> Knowledge:
    """Move `item` to `to` through allowed edges, as the workers and curators would."""
    for state in lifecycle_path(to, start=item.state):
        reason = PREFERRED_REASON.get(state, lifecycle.STATES[state].reasons[0])
        item = transition(item, state, actor=actor, reason=reason)
    return item


class KnowledgeFactory(factory.Factory):
    class Meta:
        model = Knowledge

    statement = factory.Sequence(lambda n: f"Alice enjoys trail number {n}")
    kind = Knowledge.Kind.PREFERENCE
    confidence = 0.8
    sensitivity = Knowledge.Sensitivity.INTERNAL

    @classmethod
    def _create(cls, model_class: Any, *args: Any, **kwargs: Any) -> Knowledge:
        world = kwargs.pop("world")
        reach = kwargs.pop("reach", None)
        kwargs.setdefault("scope", world.scope)
        kwargs.setdefault("subject_peer", world.subject)
        kwargs.setdefault("actor", "system:pipeline")
        item = services.knowledge_propose(account_id=world.account.id, **kwargs)
        return walk_to(item, reach) if reach else item


def active_statement(world: Any, statement: str, **kwargs: Any) -> Knowledge:
    """An accepted statement (proposed -> active): the most common test row."""
    return KnowledgeFactory(world=world, statement=statement, reach=lifecycle.ACTIVE,
                            **kwargs)
