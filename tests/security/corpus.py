"""The committed corpus the security matrices read.

Account A ("Acme") holds one statement for every cell of
audience x sensitivity x lifecycle state at the reader's scope `/marketing/social`, plus
active rows that are expired at read time and active rows in the sibling scope
`/marketing/paid`. Every statement has a message source (so stable-profile and lineage
have provenance to show), contains the word "zephyr" (one query matches them all) and the
marker "acmeonly" (so any leak of A's text into Account B's responses is found by a
substring check). Account B ("Other Co") holds a few rows of its own that match the same
query, so B's reads are never vacuously empty.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from knowledge import lifecycle
from knowledge import services as ks
from knowledge.lifecycle import transition
from knowledge.models import Message, Peer, Scope, Session
from memhouse.core.principal import Principal
from memhouse.core.tenancy import account_context
from tests.conftest import World, build_world

# Who a statement is about and at which level (the seed's "And sees" column distinguishes
# exactly these: the reader's own statements, another person's, promoted ones, and
# statements about the scope rather than a person).
AUDIENCES: dict[str, tuple[str | None, str]] = {
    "alice_peer": ("alice", "peer"),
    "bob_peer": ("bob", "peer"),
    "bob_scope": ("bob", "scope"),
    "bob_account": ("bob", "account"),
    "about_scope": (None, "peer"),
}
SENSITIVITIES = ("public", "internal", "personal", "restricted")
STATES = tuple(lifecycle.STATES)  # all twelve
# Extra "states" of active rows that must be hidden anyway.
EXTRAS = ("active_expired", "active_sibling_scope")

# Allowed edges (knowledge/lifecycle.py EDGES) from proposed to each state.
PATHS: dict[str, list[tuple[str, str]]] = {
    "proposed": [],
    "active": [("active", "f4_gate_a_b_accepted")],
    "provisional": [("provisional", "f4_gate_a_b_deferred")],
    "held": [("held", "f4_scope_hold")],
    "needs_revalidation": [("active", "f4_gate_a_b_accepted"),
                           ("needs_revalidation", "f4_revalidation_due")],
    "superseded": [("active", "f4_gate_a_b_accepted"), ("superseded", "f4_curator_edit")],
    "expired": [("active", "f4_gate_a_b_accepted"), ("expired", "f4_expiry_due")],
    "rejected": [("rejected", "f4_gate_a_noise")],
    "contested": [("contested", "f4_subject_contested")],
    "redacted": [("redacted", "f4_subject_redacted")],
    # Via active: a provisional row that goes stale stays its subject's alone (history
    # keeps the visibility a row had while it lived; tests/security/test_history_visibility).
    "stale": [("active", "f4_gate_a_b_accepted"), ("needs_revalidation", "f4_revalidation_due"),
              ("stale", "f4_revalidation_confidence_decay")],
    "retracted": [("retracted", "f4_source_erased")],
}

Cell = tuple[str, str, str]  # (audience, sensitivity, state)


@dataclass
class Corpus:
    world: World
    dave: Any  # Account A administrator (human)
    mel: Any  # Account B curator + administrator (human)
    keys: dict[str, str]  # persona -> API key / token
    cells: dict[Cell, str]  # cell -> knowledge id (Account A)
    sibling: Any  # the /marketing/paid scope
    a_ids: dict[str, str] = field(default_factory=dict)  # other Account A ids by name
    b_knowledge: list[str] = field(default_factory=list)

    @property
    def a_knowledge(self) -> set[str]:
        return set(self.cells.values()) | {v for k, v in self.a_ids.items()
                                           if k.startswith("k_")}


def _statement(n: int, audience: str, sensitivity: str, state: str) -> str:
    return f"Zephyr acmeonly note {n}: {audience} {sensitivity} {state.replace('_', ' ')}."


def _make(w: World, peers: dict[str, Peer], n: int, audience: str, sensitivity: str,
          state: str, scope: Scope) -> str:
    subject_key, level = AUDIENCES[audience]
    text = _statement(n, audience, sensitivity, state)
    msg = Message.objects.create(account=w.account, peer=w.agent, scope=scope,
                                 text=f"Source for note {n}: {text}",
                                 occurred_at=timezone.now())
    expires = timezone.now() - timedelta(minutes=5) if state == "active_expired" else None
    item = ks.knowledge_propose(
        account_id=w.account.id, statement=text, scope=scope,
        subject_peer=peers[subject_key] if subject_key else None, actor="system:test",
        kind="fact", level=level, sensitivity=sensitivity, confidence=0.8,
        expires_at=expires, proposed_by=w.agent,
        sources=[{"message": msg, "excerpt": text}])
    for to, reason in PATHS["active" if state in EXTRAS else state]:
        transition(item, to, actor="system:test", reason=reason)
    return str(item.id)


def build_corpus() -> Corpus:
    from knowledge.ingest.services import document_create
    from retrieval.vectors import embed_knowledge
    from tests.governance.helpers import held_scope_claim, provisional_about

    with transaction.atomic():
        w = build_world()
    keys = {"scribe": w.agent_key, "mallory": w.outsider_key}
    cells: dict[Cell, str] = {}
    a_ids: dict[str, str] = {}
    with account_context(w.account.id):
        dave = ks.peer_create(account_id=w.account.id, key="dave", kind="human",
                              display_name="Dave", password="dave-pass-1234", is_admin=True)
        for name, peer in (("alice", w.subject), ("bob", w.member), ("carol", w.curator),
                           ("dave", dave)):
            _, keys[name] = ks.credential_create(account_id=w.account.id, peer=peer)
        _, keys["peerless"] = ks.credential_create(account_id=w.account.id, peer=None,
                                                   name="etl", act_for_all=True)
        _, keys["bob_token"] = ks.token_issue(peer=w.member)
        sibling = ks.scope_ensure(account_id=w.account.id, path="/marketing/paid")
        peers = {p.key: p for p in Peer.objects.all()}
        n = 0
        for audience in AUDIENCES:
            for sensitivity in SENSITIVITIES:
                for state in (*STATES, *EXTRAS):
                    n += 1
                    scope = sibling if state == "active_sibling_scope" else w.scope
                    cells[(audience, sensitivity, state)] = _make(
                        w, peers, n, audience, sensitivity, state, scope)
        # Things other endpoints take ids of.
        session = Session.objects.create(account=w.account, scope=w.scope,
                                         external_id="acme-session-1",
                                         started_at=timezone.now())
        msg = Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                     session=session, occurred_at=timezone.now(),
                                     text="Alice said acmeonly zephyr things in a session.")
        principal = Principal(account_id=w.account.id, peer=w.agent, via="api_key",
                      act_for_all=True)
        version = document_create(principal=principal, scope_path="/marketing/social",
                                  title="Acme acmeonly plan", external_id="acme-doc-ext",
                                  content=b"Zephyr acmeonly launch plan for March.")
        prov = provisional_about(w, "Alice prefers acmeonly zephyr tea in the morning.")
        held = held_scope_claim(w, "The social team posts acmeonly zephyr news on Tuesdays.")
        from governance.models import PeerQuestion

        question = PeerQuestion.objects.filter(knowledge=prov).first()
        assert question is not None and held.state == "held" and prov.state == "provisional"
        a_ids.update({"session": session.external_id, "message": str(msg.id),
                      "document": str(version.document_id), "version": str(version.id),
                      "question": str(question.id), "k_provisional": str(prov.id),
                      "k_held": str(held.id), "scope_social": str(w.scope.id)})
    b_knowledge: list[str] = []
    with account_context(w.other_account.id):
        mel = ks.peer_create(account_id=w.other_account.id, key="mel", kind="human",
                             display_name="Mel", password="mel-pass-12345", is_curator=True,
                             is_admin=True)
        _, keys["mel"] = ks.credential_create(account_id=w.other_account.id, peer=mel)
        b_scope = Scope.objects.get(path="/marketing")
        for i in range(3):
            item = ks.knowledge_propose(
                account_id=w.other_account.id, statement=f"Zephyr otherco note {i}.",
                scope=b_scope, subject_peer=None, actor="system:test", sensitivity="public")
            transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
            b_knowledge.append(str(item.id))
    embed_knowledge(w.account.id, [*list(cells.values()), a_ids["k_provisional"], a_ids["k_held"]])
    embed_knowledge(w.other_account.id, b_knowledge)
    return Corpus(world=w, dave=dave, mel=mel, keys=keys, cells=cells, sibling=sibling,
                  a_ids=a_ids, b_knowledge=b_knowledge)


def random_id() -> str:
    return str(uuid.uuid4())


def api(client: Any, key: str | None, method: str, path: str, body: Any = None,
        query: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> Any:
    """One request through DRF's APIClient inside the test transaction.

    Each request binds its own Account (ATOMIC_REQUESTS is a savepoint here, and the
    transaction-local setting outlives a released savepoint), so the binding is cleared
    before and after, exactly as a new pooled transaction would start."""
    from memhouse.core.tenancy import rebind_account_for_tests

    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in (headers or {}).items()}
    if key:
        extra["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    url = f"/api/v1/{path}"
    rebind_account_for_tests(None)
    try:
        if method == "GET":
            return client.get(url, data=query, **extra)
        if query:
            from urllib.parse import urlencode

            url += "?" + urlencode(query)
        return client.generic(method, url, data=__import__("json").dumps(body or {}),
                              content_type="application/json", **extra)
    finally:
        rebind_account_for_tests(None)
