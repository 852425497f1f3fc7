"""One reading of "who did it" (memhouse.core.principal.Actor, knowledge.lifecycle.as_actor)."""

from __future__ import annotations

import uuid

import pytest

from knowledge.lifecycle import TransitionError, as_actor
from knowledge.models import LifecycleEvent
from memhouse.core.principal import Actor, Principal
from tests.factories import KnowledgeFactory

pytestmark = pytest.mark.django_db


def test_actor_labels(world):
    assert Actor.system("expiry").label == "system:expiry"
    assert Actor.of_peer(world.subject) == Actor("peer:alice", world.subject)
    keyless = Principal(account_id=world.account.id, peer=None, via="api_key",
                        credential_id=uuid.UUID(int=7))
    assert Actor.of_principal(keyless).label == f"credential:{uuid.UUID(int=7)}"
    assert Actor.of_principal(Principal(account_id=world.account.id, peer=world.agent,
                                        via="api_key")).label == "peer:scribe"


def test_as_actor_accepts_peers_and_workers_only(world):
    assert as_actor(world.curator) == Actor("peer:carol", world.curator)
    assert as_actor("system:dream-time") == Actor.system("dream-time")
    assert as_actor(Actor.system("pipeline")) == Actor.system("pipeline")
    for bad in ("carol", "credential:x", Actor("credential:x"), None, 42):
        with pytest.raises(TransitionError):
            as_actor(bad)


def test_an_actor_value_is_recorded_like_its_label(world):
    item = KnowledgeFactory(world=world, actor=Actor.system("pipeline"))
    from knowledge.lifecycle import transition

    transition(item, "active", actor=Actor.of_peer(world.curator), reason="f4_curator_approved")
    events = LifecycleEvent.objects.filter(knowledge=item).order_by("created_at", "id")
    assert [(e.actor, e.actor_peer_id) for e in events] == [
        ("system:pipeline", None), ("peer:carol", world.curator.pk)]
