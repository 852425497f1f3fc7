"""The test factories reach every lifecycle state the way production does: one
`transition` per allowed edge, each leaving its LifecycleEvent."""

from __future__ import annotations

import pytest

from knowledge import lifecycle
from knowledge.models import Knowledge, LifecycleEvent
from tests.factories import KnowledgeFactory, lifecycle_path

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("state", sorted(lifecycle.STATES))
def test_factory_walks_allowed_edges_to_every_state(world, state):
    item = KnowledgeFactory(world=world, reach=state)
    assert Knowledge.objects.get(pk=item.pk).state == state
    events = list(LifecycleEvent.objects.filter(knowledge=item).order_by("created_at", "id")
                  .values_list("from_state", "to_state", "reason"))
    walk = [lifecycle.PROPOSED, *lifecycle_path(state)]
    assert [(f, t) for f, t, _ in events] == list(zip([None, *walk], walk, strict=False))
    for _, to, reason in events:
        assert reason in lifecycle.STATES[to].reasons


def test_lifecycle_path_refuses_an_unreachable_state():
    with pytest.raises(ValueError):
        lifecycle_path(lifecycle.ACTIVE, start=lifecycle.RETRACTED)
