"""factory-boy factories that write through services (RLS needs the Account bound)."""

from __future__ import annotations

from typing import Any

import factory

from knowledge import services
from knowledge.models import Knowledge


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
        kwargs.setdefault("scope", world.scope)
        kwargs.setdefault("subject_peer", world.subject)
        kwargs.setdefault("actor", "system:pipeline")
        return services.knowledge_propose(account_id=world.account.id, **kwargs)
