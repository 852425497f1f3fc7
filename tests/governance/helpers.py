"""Governance test helpers: statements made the way the pipeline makes them (a message as
provenance, then the gates), API keys for the personas, and real-HTTP calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from django.utils import timezone

from governance.intake.gates import gate_a, gate_b
from knowledge import services
from knowledge.models import Knowledge, Message, Peer


def message(world: Any, text: str, *, speaker: Peer | None = None, scope: Any = None) -> Message:
    return Message.objects.create(account=world.account, peer=speaker or world.agent,
                                  scope=scope or world.scope, text=text,
                                  occurred_at=timezone.now())


def propose(world: Any, statement: str, *, subject: Peer | None = None, speaker: Peer | None = None,
            scope: Any = None, level: str = "peer", source: Message | None = None,
            **kwargs: Any) -> Knowledge:
    """A proposed statement with one message as its source."""
    scope = scope or world.scope
    src = source or message(world, statement, speaker=speaker, scope=scope)
    return services.knowledge_propose(
        account_id=world.account.id, statement=statement, scope=scope, subject_peer=subject,
        actor="system:pipeline", level=level, proposed_by=src.peer,
        sources=[{"message": src, "excerpt": statement}], **kwargs)


def gated(world: Any, statement: str, *, subject: Peer | None = None,
          self_observation: bool = False, **kwargs: Any) -> Knowledge:
    """A statement through Gate A and Gate B, as the pipeline does it."""
    item = propose(world, statement, subject=subject, **kwargs)
    kept = gate_a(item)
    assert kept is not None and kept.pk == item.pk
    gate_b(item, self_observation=self_observation)
    item.refresh_from_db()
    return item


def active_about(world: Any, statement: str, subject: Peer | None = None,
                 **kwargs: Any) -> Knowledge:
    """An accepted direct self-observation (the automatic Gate A/B row)."""
    subject = subject or world.subject
    return gated(world, statement, subject=subject, speaker=subject, self_observation=True,
                 **kwargs)


def provisional_about(world: Any, statement: str, subject: Peer | None = None,
                      **kwargs: Any) -> Knowledge:
    """Someone else's observation about `subject`: deferred to them."""
    return gated(world, statement, subject=subject or world.subject, speaker=world.member,
                 **kwargs)


def held_scope_claim(world: Any, statement: str, **kwargs: Any) -> Knowledge:
    """A claim about the scope itself: held for a curator."""
    return gated(world, statement, subject=None, level="scope", **kwargs)


@dataclass
class Keys:
    alice: str
    bob: str
    carol: str
    dave: str  # account administrator
    scribe: str  # agent
    mallory: str  # another Account


def api(live_server: Any, key: str, method: str, path: str, body: Any = None,
        **params: Any) -> httpx.Response:
    return httpx.request(method, f"{live_server.url}/api/v1/{path}", json=body,
                         params=params or None, timeout=60,
                         headers={"Authorization": f"Bearer {key}"})
