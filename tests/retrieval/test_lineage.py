"""POST /api/v1/lineage over real HTTP: a bounded evidence graph with opaque references."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import (
    Document,
    DocumentVersion,
    Knowledge,
    Message,
    Relation,
)
from memhouse.core.tenancy import account_context
from tests.retrieval.test_search import _add, corpus  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)


def _lineage(live_server, key, **body) -> httpx.Response:
    return httpx.post(f"{live_server.url}/api/v1/lineage", json=body,
                      headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _ok(r: httpx.Response) -> dict:
    assert r.status_code == 200, r.text
    return r.json()


def _by_id(body: dict) -> dict[str, dict]:
    return {n["id"]: n for n in body["nodes"] if "id" in n}


def _msg(w, text: str, peer=None) -> Message:
    return Message.objects.create(account=w.account, peer=peer or w.subject, scope=w.scope,
                                  text=text, occurred_at=datetime.now(UTC))


@pytest.fixture
def graph(corpus):  # noqa: F811
    """A deduction over two sourced contributors, plus relations to hidden rows."""
    w, ids = corpus
    with account_context(w.account.id):
        m1 = _msg(w, "I run a pottery class on Mondays.")
        m2 = _msg(w, "I sell my pots at the Sunday market.")
        ids["pottery"] = _add(w, "Alice runs a pottery class on Mondays.",
                              sources=[{"message": m1, "excerpt": "pottery class on Mondays"}])
        ids["market"] = _add(w, "Alice sells pots at the Sunday market.",
                             sources=[{"message": m2, "excerpt": "sell my pots"}])
        ids["deduced"] = _add(w, "Alice is a working potter.", extractor="deduction",
                              sources=[{"message": m1, "excerpt": ""},
                                       {"message": m2, "excerpt": ""}])
        for target in ("pottery", "market"):
            Relation.objects.create(account=w.account, source_id=ids["deduced"],
                                    target_id=ids[target], type="derived_from")
        # a relation to alice's personal row and to an expired one
        Relation.objects.create(account=w.account, source_id=ids["pottery"],
                                target_id=ids["asthma"], type="related")
        ids["expired"] = _add(w, "Alice taught a pottery workshop last spring.",
                              expires_at=datetime.now(UTC) + timedelta(hours=1))
        Knowledge.objects.filter(pk=ids["expired"]).update(
            expires_at=datetime.now(UTC) - timedelta(minutes=1))
        Relation.objects.create(account=w.account, source_id=ids["market"],
                                target_id=ids["expired"], type="supports")
        ids["m1"], ids["m2"] = str(m1.id), str(m2.id)
    return w, ids


def test_a_deduction_reports_reasoning_synthesis_and_its_provenance(live_server, graph):
    w, ids = graph
    body = _ok(_lineage(live_server, w.agent_key, knowledge_id=ids["deduced"],
                        peer_key="alice"))
    nodes = _by_id(body)
    root = body["nodes"][0]
    assert body["root"] == root["node"] == "n0" and root["id"] == ids["deduced"]
    assert root["operation"] == "reasoning_synthesis"
    assert nodes[ids["pottery"]]["operation"] == "extraction"
    assert nodes[ids["m1"]]["ref"] == "message" and nodes[ids["m1"]]["speaker_peer_key"] == "alice"
    key = {n["id"]: n["node"] for n in body["nodes"] if "id" in n}
    assert {"from": key[ids["deduced"]], "to": key[ids["pottery"]],
            "type": "derived_from"} in body["edges"]
    assert {"from": key[ids["deduced"]], "to": key[ids["m1"]], "type": "source"} in body["edges"]
    text = json.dumps(body)
    for private in ("extractor", "deduction", "prompt", "rationale", "version"):
        assert private not in text


def test_hidden_and_expired_endpoints_are_opaque(live_server, graph):
    w, ids = graph
    alice = _ok(_lineage(live_server, w.agent_key, knowledge_id=ids["pottery"],
                         peer_key="alice", depth=3))
    assert ids["asthma"] in _by_id(alice)  # her own row
    bob = _ok(_lineage(live_server, w.agent_key, knowledge_id=ids["pottery"], peer_key="bob",
                       depth=3))
    nodes = _by_id(bob)
    assert ids["asthma"] not in nodes and ids["expired"] not in nodes
    hidden = [n for n in bob["nodes"] if n["ref"] == "hidden"]
    assert hidden and all(set(n) == {"node", "ref"} for n in hidden)
    text = json.dumps(bob)
    assert "asthma" not in text and "workshop" not in text
    # the expired endpoint is hidden for alice too (lifecycle-hidden, never its content)
    assert ids["expired"] not in _by_id(alice)
    assert "workshop" not in json.dumps(alice)


def test_a_visible_statement_never_opens_a_hidden_source(live_server, graph):
    w, _ids = graph
    with account_context(w.account.id):
        m = _msg(w, "I love gardening, and my therapist says it helps my anxiety.")
        garden = _add(w, "Alice loves gardening.", sources=[{"message": m, "excerpt": "gardening"}])
        _add(w, "Alice sees a therapist for anxiety.", sensitivity="personal",
             sources=[{"message": m, "excerpt": "therapist"}])
    bob = _ok(_lineage(live_server, w.agent_key, knowledge_id=garden, peer_key="bob"))
    assert [n["ref"] for n in bob["nodes"]] == ["knowledge", "hidden"]
    assert "therapist" not in json.dumps(bob)
    alice = _ok(_lineage(live_server, w.agent_key, knowledge_id=garden, peer_key="alice"))
    assert _by_id(alice)[str(m.id)]["excerpt"] == "gardening"


def test_unavailable_roots_are_one_404(live_server, graph):
    w, ids = graph
    missing = _lineage(live_server, w.agent_key, knowledge_id=str(uuid.uuid4()))
    assert missing.status_code == 404
    for kid, peer in ((ids["expired"], "alice"), (ids["asthma"], "bob"),
                      (ids["bob_prov"], "alice")):
        r = _lineage(live_server, w.agent_key, knowledge_id=kid, peer_key=peer)
        assert (r.status_code, r.json()) == (404, missing.json())
    # a credential granted /marketing/social reads it and its ancestors, not a sibling
    with account_context(w.account.id):
        _, narrow = services.credential_create(account_id=w.account.id, peer=w.agent,
                                               scope_paths=["/marketing/social"])
    assert _lineage(live_server, narrow, knowledge_id=ids["team"]).status_code == 200
    r = _lineage(live_server, narrow, knowledge_id=ids["paid"])
    assert (r.status_code, r.json()) == (404, missing.json())
    with account_context(w.account.id):
        transition(Knowledge.objects.get(pk=ids["hiking"]), "redacted", actor="system:test",
                   reason="f4_subject_redacted")
    r = _lineage(live_server, w.agent_key, knowledge_id=ids["hiking"], peer_key="alice")
    assert (r.status_code, r.json()) == (404, missing.json())
    # another Account's credential: the same answer for a real id
    r = _lineage(live_server, w.outsider_key, knowledge_id=ids["public"])
    assert (r.status_code, r.json()) == (404, missing.json())


def test_budgets_cycles_and_stable_order(live_server, graph):
    w, ids = graph
    with account_context(w.account.id):  # a cycle: pottery -> market -> pottery
        Relation.objects.create(account=w.account, source_id=ids["pottery"],
                                target_id=ids["market"], type="related")
        Relation.objects.create(account=w.account, source_id=ids["market"],
                                target_id=ids["pottery"], type="supports")
    first = _ok(_lineage(live_server, w.agent_key, knowledge_id=ids["pottery"],
                         peer_key="alice", depth=4, max_nodes=200, fan_out=32))
    again = _ok(_lineage(live_server, w.agent_key, knowledge_id=ids["pottery"],
                         peer_key="alice", depth=4, max_nodes=200, fan_out=32))
    assert first == again  # reproducible
    keys = [(n["ref"], n.get("id")) for n in first["nodes"] if "id" in n]
    assert len(keys) == len(set(keys))  # each node once: the cycle terminated
    assert first["truncated"] == {"depth": False, "fan_out": False, "max_nodes": False}
    small = _ok(_lineage(live_server, w.agent_key, knowledge_id=ids["pottery"],
                         peer_key="alice", max_nodes=2))
    assert len(small["nodes"]) == 2 and small["truncated"]["max_nodes"]
    narrow = _ok(_lineage(live_server, w.agent_key, knowledge_id=ids["pottery"],
                          peer_key="alice", fan_out=1))
    assert narrow["truncated"]["fan_out"]
    assert len([e for e in narrow["edges"] if e["from"] == "n0" or e["to"] == "n0"]) == 1
    shallow = _ok(_lineage(live_server, w.agent_key, knowledge_id=ids["deduced"],
                           peer_key="alice", depth=1))
    assert shallow["truncated"]["depth"]
    assert max(n.get("depth", 0) for n in shallow["nodes"]) == 1
    assert shallow["limits"] == {"depth": 1, "fan_out": 8, "max_nodes": 50}


def test_document_provenance_and_missing_versions(live_server, corpus):  # noqa: F811
    w, _ = corpus
    with account_context(w.account.id):
        doc = Document.objects.create(account=w.account, scope=w.scope, title="Handbook")
        live, gone = (DocumentVersion.objects.create(
            account=w.account, document=doc, number=n, blob=t.encode(),
            sha256=hashlib.sha256(t.encode()).hexdigest(), text=t)
            for n, t in ((1, "The office opens at nine."), (2, "The office opens at ten.")))
        DocumentVersion.objects.filter(pk=gone.pk).update(tombstoned_at=datetime.now(UTC))
        kid = _add(w, "The office opens at nine.", subject=None, extractor="document/sentences-v1",
                   sources=[{"document_version": live, "excerpt": "opens at nine"},
                            {"document_version": gone, "excerpt": "opens at ten"}])
    body = _ok(_lineage(live_server, w.agent_key, knowledge_id=kid))
    assert body["nodes"][0]["operation"] == "document_extraction"
    refs = [n["ref"] for n in body["nodes"][1:]]
    assert refs == ["document_version", "missing"]
    assert body["nodes"][1]["title"] == "Handbook" and body["nodes"][1]["number"] == 1
    assert body["nodes"][1]["excerpt"] == "opens at nine"
    assert "opens at ten" not in json.dumps(body)


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"knowledge_id": "not-a-uuid"}, 400, "invalid_input"),
    ({}, 400, "invalid_input"),
    ({"depth": 5}, 400, "invalid_input"),
    ({"depth": 0}, 400, "invalid_input"),
    ({"fan_out": 0}, 400, "invalid_input"),
    ({"max_nodes": 10_000}, 400, "invalid_input"),
    ({"peer_key": "ghost"}, 400, "unknown_peer_key"),
])
def test_bad_lineage_input_is_a_clear_4xx(live_server, corpus, body, status, code):  # noqa: F811
    w, ids = corpus
    if body and "knowledge_id" not in body:
        body = {"knowledge_id": ids["public"], **body}
    r = _lineage(live_server, w.agent_key, **body)
    assert r.status_code == status and r.json()["error"]["code"] == code
