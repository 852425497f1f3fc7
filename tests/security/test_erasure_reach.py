"""Erasure reach: after a message, a document and a peer are erased through the API, the
erased content is unreachable through every read API (search, ask with source recall,
context, lineage, stable-profile, me/knowledge, curator queue, documents), every
projection, the vector table, the FTS index, the entity mention index and in fact every
Account table; an archive export -> import round trip afterwards loses nothing (per-table
counts equal, audit chain verifies) and brings nothing erased back.

tests/governance/test_erasure.py covers the row-level deletes; this covers the reach.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from knowledge import audit
from knowledge import services as ks
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Message
from memhouse.core.principal import Principal, internal_reader
from memhouse.core.tenancy import account_context
from tests.security.corpus import api

pytestmark = pytest.mark.django_db(transaction=True)

SOCIAL = "/marketing/social"
MSG_TOKEN = "wombatwhistle"  # only in the erased message's text
MSG_STATEMENT = "kestrelford"  # in statements whose only source is that message
DOC_TOKEN = "ravenmoor"  # in the erased document (and statements sourced only from it)
PEER_TOKEN = "platypusglass"  # in statements about the erased peer
SURVIVOR = "lindenhall"


def _tables() -> list[str]:
    with connection.cursor() as cur:
        cur.execute(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'account_id'
               WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1""")
        return [r[0] for r in cur.fetchall()]


def _tables_holding(account_id: Any, token: str) -> dict[str, int]:
    """Every Account table whose row text contains `token` (vectors, FTS, entity index,
    projections, chunks, audit, usage, ledger included)."""
    out = {}
    with account_context(account_id), connection.cursor() as cur:
        for t in _tables():
            cur.execute(f"SELECT count(*) FROM {t} x WHERE x::text ILIKE %s", [f"%{token}%"])
            n = cur.fetchone()[0]
            if n:
                out[t] = n
    return out


def _source(w: Any, text: str, speaker: Any) -> Message:
    return Message.objects.create(account=w.account, peer=speaker, scope=w.scope, text=text,
                                  occurred_at=timezone.now())


def _fact(w: Any, statement: str, *, subject: Any, msg: Message | None = None,
          version: Any = None, level: str = "peer", state: str = "active",
          sensitivity: str = "internal") -> Knowledge:
    src = {"message": msg} if msg is not None else {"document_version": version}
    item = ks.knowledge_propose(
        account_id=w.account.id, statement=statement, scope=w.scope, subject_peer=subject,
        actor="system:test", kind="fact", level=level, sensitivity=sensitivity,
        sources=[{**src, "excerpt": msg.text if msg is not None else statement}])
    reason = {"active": "f4_gate_a_b_accepted", "held": "f4_scope_hold"}[state]
    transition(item, state, actor="system:test", reason=reason)
    return item


def _reads(client: APIClient, keys: dict[str, str], ids: list[str]) -> list[str]:
    """Every read surface, as text: for alice (her own key), a named reader on the agent
    key, a peerless key and the curator."""
    out = []
    q = f"{MSG_STATEMENT} {DOC_TOKEN} {PEER_TOKEN} {MSG_TOKEN} {SURVIVOR} plan"
    for key, extra in ((keys["alice"], {}), (keys["scribe"], {"peer_key": "alice"}),
                       (keys["peerless"], {})):
        for path, body in (("search", {"query": q, "scope": SOCIAL, "deadline_ms": 5000,
                                       "include_identity_profile": True}),
                           ("ask", {"query": q, "scope": SOCIAL, "effort": "high",
                                    "include_source_recall": True}),
                           ("context", {"query": q, "scope": SOCIAL}),
                           ("context", {"scope": SOCIAL}),
                           ("stable-profile", {})):
            r = api(client, key, "POST", path, {**body, **extra})
            assert r.status_code in (200, 400), r.content
            out.append(r.content.decode())
        for kid in ids:
            out.append(api(client, key, "POST", "lineage",
                           {"knowledge_id": kid, "depth": 4, **extra}).content.decode())
    out.append(api(client, keys["carol"], "GET", "curator/queue",
                   query={"limit": "200"}).content.decode())
    out.append(api(client, keys["alice"], "GET", "me/knowledge",
                   query={"limit": "200"}).content.decode())
    return out


def _counts(account_id: Any) -> dict[str, int]:
    from governance import archive

    with account_context(account_id):
        return {name: archive._queryset(name, model, account_id).count()
                for name, model in archive.tables()}


def test_erased_content_is_unreachable_everywhere_and_stays_so_after_a_round_trip(
        committed_world, settings, tmp_path, record_property):
    from knowledge.ingest.services import document_create
    from retrieval import engine
    from retrieval.entities import index_knowledge
    from retrieval.models import EntityMention, KnowledgeVector, Projection
    from retrieval.profiles import resolve_profile
    from retrieval.vectors import embed_knowledge
    from tests.governance import test_archive as archive_tests

    settings.MEMHOUSE_RATE_LIMIT_PER_MINUTE = 0
    w = committed_world
    with account_context(w.account.id):
        dave = ks.peer_create(account_id=w.account.id, key="dave", kind="human",
                              display_name="Dave", is_admin=True)
        keys = {"scribe": w.agent_key}
        for name, peer in (("alice", w.subject), ("carol", w.curator), ("dave", dave)):
            _, keys[name] = ks.credential_create(account_id=w.account.id, peer=peer)
        _, keys["peerless"] = ks.credential_create(account_id=w.account.id, peer=None)
        said = _source(w, f"Alice said the {MSG_TOKEN} plan is at Kestrelford.", w.subject)
        k_msg = _fact(w, "Alice plans a trip to Kestrelford.", subject=w.subject, msg=said,
                      sensitivity="public")
        k_held = _fact(w, "The team meets at Kestrelford on Fridays.", subject=None, msg=said,
                       level="scope", state="held")
        version = document_create(
            principal=Principal(account_id=w.account.id, peer=w.agent, via="api_key",
                      act_for_all=True),
            scope_path=SOCIAL, title="Ravenmoor plan",
            content=b"The Ravenmoor launch is in March. Ravenmoor is secret.")
        k_doc = _fact(w, "The Ravenmoor launch happens in March.", subject=None,
                      version=version, sensitivity="public")
        bob_said = _source(w, "I collect platypusglass marbles.", w.member)
        k_bob = _fact(w, "Bob collects platypusglass marbles.", subject=w.member, msg=bob_said,
                      sensitivity="public")
        k_live = _fact(w, "Alice sails at Lindenhall every summer.", subject=w.subject,
                       msg=_source(w, "I sail at Lindenhall.", w.subject), sensitivity="public")
    ids = [str(k.id) for k in (k_msg, k_held, k_doc, k_bob, k_live)]
    embed_knowledge(w.account.id, ids)
    index_knowledge(w.account.id, ids)
    client = APIClient()
    # Build and cache the projections, then check everything is reachable before.
    for _ in range(2):
        _reads(client, keys, ids)
    before = "\n".join(_reads(client, keys, ids)).lower()
    for token in (MSG_TOKEN, MSG_STATEMENT, DOC_TOKEN, PEER_TOKEN, SURVIVOR):
        assert token in before, f"{token} was never reachable: the test would prove nothing"
    with account_context(w.account.id):
        assert KnowledgeVector.objects.filter(knowledge_id__in=ids).count() == 5
        assert EntityMention.objects.filter(knowledge_id__in=ids).exists()
        assert Projection.objects.filter(payload__icontains="Kestrelford").exists() or \
            any("kestrelford" in json.dumps(p).lower()
                for p in Projection.objects.values_list("payload", flat=True))

    for body in ({"message_id": str(said.id)}, {"document_id": str(version.document_id)},
                 {"peer_key": "bob"}):
        r = api(client, keys["dave"], "POST", "erasure", body)
        assert r.status_code == 200, r.content

    # Every read surface, several times (projections rebuild, caches refresh).
    for _ in range(2):
        after = "\n".join(_reads(client, keys, ids)).lower()
    for token in (MSG_TOKEN, DOC_TOKEN, PEER_TOKEN):
        assert token not in after, f"erased {token} still reachable through the API"
    assert SURVIVOR in after
    # Statements whose only source was the erased message are retracted: only their
    # subject still sees them, as retracted history, in me/knowledge.
    mine = api(client, keys["alice"], "GET", "me/knowledge", query={"limit": "200"}).json()
    states = {i["id"]: i["state"] for i in mine["items"]}
    assert states[str(k_msg.id)] == "retracted" and states[str(k_live.id)] == "active"
    elsewhere = after.replace(json.dumps(mine).lower(), "")
    assert MSG_STATEMENT not in "\n".join(_reads(client, keys, [])[:-1]).lower()
    assert elsewhere
    assert api(client, keys["scribe"], "GET", f"documents/{version.document_id}").json() == {
        "error": {"code": "not_found", "message": "document not found"}}
    # Search as the server-side reader too.
    with account_context(w.account.id):
        scope = w.scope.__class__.objects.get(path=SOCIAL)
        prof = replace(resolve_profile(requested="thorough", scope=scope, default="thorough"),
                       deadline_ms=5000)
        res = engine.search(reader=internal_reader(w.account.id), scope=scope,
                            query=f"{MSG_STATEMENT} {DOC_TOKEN} {PEER_TOKEN}", profile=prof)
        assert {c["id"] for c in res.candidates} <= {str(k_live.id)}
        # Derived stores: no vectors, no FTS hit among usable rows, no mentions, no
        # projection entry for any erased or retracted statement.
        gone = [str(k_msg.id), str(k_held.id), str(k_doc.id), str(k_bob.id)]
        assert not KnowledgeVector.objects.filter(knowledge_id__in=gone).exists()
        assert not EntityMention.objects.filter(knowledge_id__in=gone).exists()
        with connection.cursor() as cur:
            for token in (MSG_STATEMENT, DOC_TOKEN, PEER_TOKEN):
                cur.execute("SELECT count(*) FROM memhouse_knowledge WHERE state <> 'retracted' "
                            "AND search_vector @@ to_tsquery('english', %s)", [token])
                assert cur.fetchone()[0] == 0, token
        for payload in Projection.objects.values_list("payload", flat=True):
            text = json.dumps(payload).lower()
            assert not any(t in text for t in (MSG_TOKEN, MSG_STATEMENT, DOC_TOKEN, PEER_TOKEN))
    # Every Account table: the erased message and peer leave no text anywhere; statements
    # retracted by the erasure keep their text only in the knowledge row itself.
    assert _tables_holding(w.account.id, MSG_TOKEN) == {}
    assert _tables_holding(w.account.id, PEER_TOKEN) == {}
    for token in (MSG_STATEMENT, DOC_TOKEN):
        assert set(_tables_holding(w.account.id, token)) <= {"memhouse_knowledge"}, token

    # Archive round trip after the erasures.
    path = tmp_path / "acme.tar.gz"
    before_counts = _counts(w.account.id)
    call_command("export_account", str(w.account.id), str(path), stdout=io.StringIO())
    with account_context(w.account.id):
        head = audit.verify(w.account.id)
        assert head.ok
    archive_tests._remove_account(w.account.id)
    out = io.StringIO()
    # A trusted restore: the keys come back too (the search below uses alice's).
    call_command("import_account", str(path), "--with-credentials", stdout=out)
    assert "audit chain verified against the manifest head" in out.getvalue()
    after_counts = _counts(w.account.id)
    assert after_counts == before_counts and sum(after_counts.values()) > 50
    with account_context(w.account.id):
        assert audit.verify(w.account.id).ok
    assert _tables_holding(w.account.id, MSG_TOKEN) == {}
    assert _tables_holding(w.account.id, PEER_TOKEN) == {}
    for token in (MSG_STATEMENT, DOC_TOKEN):
        assert set(_tables_holding(w.account.id, token)) <= {"memhouse_knowledge"}, token
    # Derived data was rebuilt from what survived: the live statement is searchable again.
    r = api(client, keys["alice"], "POST", "search",
            {"query": "Lindenhall sails", "scope": SOCIAL, "deadline_ms": 5000})
    assert str(k_live.id) in {c["id"] for c in r.json()["candidates"]}
    record_property("facts", f"erasure reach: message, document and peer erased; "
                             f"{len(_tables())} Account tables scanned; archive round trip "
                             f"{sum(after_counts.values())} durable rows, counts equal")
