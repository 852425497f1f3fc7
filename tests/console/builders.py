"""Builders for console tests: governed statements in each queue-relevant state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.test import Client

from governance import services as gov_services
from governance.intake.gates import gate_b
from knowledge import services
from knowledge.models import Knowledge, Message, Peer
from memhouse.core.tenancy import rebind_account_for_tests
from tests.factories import walk_to

HX = {"HTTP_HX_REQUEST": "true"}


def message(w: Any, text: str, *, peer: Peer | None = None, scope: Any = None) -> Message:
    return Message.objects.create(account_id=w.account.id, peer=peer or w.agent,
                                  scope=scope or w.scope, text=text,
                                  occurred_at=datetime(2024, 3, 1, 9, 30, tzinfo=UTC))


def propose(w: Any, statement: str, *, subject: Peer | None = None, level: str = "peer",
            scope: Any = None, excerpt: str = "", sensitivity: str = "internal",
            confidence: float = 0.7) -> Knowledge:
    scope = scope or w.scope
    msg = message(w, excerpt or statement, scope=scope)
    return services.knowledge_propose(
        account_id=w.account.id, statement=statement, scope=scope, subject_peer=subject,
        actor="system:test", level=level, sensitivity=sensitivity, confidence=confidence,
        sources=[{"message": msg, "excerpt": excerpt or statement}])


def held(w: Any, statement: str = "The social team posts every Tuesday.", **kw: Any
         ) -> Knowledge:
    """A scope-level proposal held for a curator, with its REVIEW validation (gate B)."""
    item = propose(w, statement, level=kw.pop("level", "scope"), **kw)
    return gate_b(item, self_observation=False)


def active(w: Any, statement: str, *, subject: Peer | None = None, **kw: Any) -> Knowledge:
    return walk_to(propose(w, statement, subject=subject, **kw), "active")


def provisional(w: Any, statement: str, *, subject: Peer) -> Knowledge:
    """A peer-level statement someone else said about `subject`: provisional, with a
    confirmation question to them (gate B)."""
    item = propose(w, statement, subject=subject)
    return gate_b(item, self_observation=False)


def contested(w: Any, statement: str = "Alice prefers tea to coffee.") -> Knowledge:
    item = active(w, statement, subject=w.subject)
    return gov_services.knowledge_contest(item=item, actor=w.subject,
                                          reason="I drink coffee, never tea.")



@dataclass
class Queue:
    held: Knowledge
    contested: Knowledge
    alice_provisional: Knowledge
    bob_provisional: Knowledge


def client_for(peer: Peer | None, **kw: Any) -> Client:
    client = Client(**kw)
    if peer is not None:
        client.force_login(peer.user)
    return client


def reread(w: Any, item: Knowledge) -> Knowledge:
    rebind_account_for_tests(w.account.id)
    return Knowledge.objects.get(pk=item.pk)


def contradicted(w: Any, statement: str, newer: Knowledge) -> Knowledge:
    """A current statement about `newer`'s subject, contradicted by `newer` (someone else's
    claim): a contradicts relation and an open contradiction review, as
    governance.intake.supersession.settle_update leaves them."""
    from governance.models import Validation
    from knowledge.models import Relation

    old = active(w, statement, subject=newer.subject_peer)
    Relation.objects.create(account_id=w.account.id, source=newer, target=old,
                            type=Relation.Type.CONTRADICTS, confidence=0.9)
    Validation.objects.create(account_id=w.account.id, knowledge=old,
                              kind=Validation.Kind.CONTRADICTION,
                              reason="f4_update_contradicted", target_scope=old.scope,
                              note=f"contradicted by {newer.pk}")
    return old
