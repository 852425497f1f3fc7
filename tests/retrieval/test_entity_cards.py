"""Entity cards in POST /api/v1/context over real HTTP: shareable statements of one scope
only, named and typed from their own wording, fresh on the next read after a lifecycle
change (cards are built on read, never stored)."""

from __future__ import annotations

import json

import httpx
import pytest

from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge
from memhouse.core.principal import Reader
from memhouse.core.tenancy import account_context
from retrieval.entities import index_knowledge
from retrieval.entity_cards import cards_for_query
from retrieval.entity_resolution import resolve_entities
from retrieval.models import Entity
from tests.memhouse.test_llm import ok
from tests.retrieval.test_search import _add

pytestmark = pytest.mark.django_db(transaction=True)


def _context(live_server, key, **body) -> dict:
    body.setdefault("scope", "/marketing/social")
    r = httpx.post(f"{live_server.url}/api/v1/context", json=body,
                   headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(autouse=True)
def _cards_alone(monkeypatch):
    """With a question the ranked head takes every statement of a corpus this small, and
    each statement appears once: an empty head leaves the cards to show what they hold."""
    from retrieval import context

    monkeypatch.setattr(context, "_head_limit", lambda budget: 0)


def _card_ids(body: dict) -> set[str]:
    return {e["id"] for c in body["entity_cards"] for e in c["entries"]}


@pytest.fixture
def dana(committed_world):
    w = committed_world
    ids = {}
    with account_context(w.account.id):
        sales = services.scope_ensure(account_id=w.account.id, path="/sales")
        ids["drafted"] = _add(w, "Dana R. drafted the launch copy.", subject=None)
        ids["approved"] = _add(w, "Yesterday Dana R. approved the tagline.", subject=None)
        # Personal and about Alice: no shared projection may carry it, whoever reads.
        ids["private"] = _add(w, "Alice told Dana R. about her diagnosis.",
                              sensitivity="personal")
        # Another scope, outside the read's chain.
        ids["sales"] = _add(w, "Dana R. runs the sales pipeline.", subject=None, scope=sales)
        # An ancestor scope with its own wording of the name.
        ids["root"] = _add(w, "Dana R. founded the company in Lisbon.", subject=None,
                           scope=w.root)
    index_knowledge(w.account.id, list(ids.values()))
    return w, ids


def test_a_card_holds_shareable_statements_of_its_own_scope(live_server, dana):
    w, ids = dana
    for peer in ("alice", "bob"):
        body = _context(live_server, w.agent_key, peer_key=peer, query="What did Dana R. do?")
        cards = {c["scope"]: c for c in body["entity_cards"]}
        assert list(cards) == ["/marketing/social", "/"]  # nearest first, no /sales
        social = {e["id"] for e in cards["/marketing/social"]["entries"]}
        assert social == {ids["drafted"], ids["approved"]}, peer
        assert {e["id"] for e in cards["/"]["entries"]} == {ids["root"]}
        # Never the private statement of a subject, even to that subject.
        assert ids["private"] not in _card_ids(body)
        assert ids["sales"] not in json.dumps(body)
        assert cards["/marketing/social"]["name"] == "Dana R."
        assert cards["/marketing/social"]["kind"] == "person"
        assert "## Dana R. (person) in /marketing/social\n" in body["context"]
        # Every statement appears once in the whole payload.
        listed = [e["id"] for e in body["knowledge"]] + [
            e["id"] for c in body["entity_cards"] for e in c["entries"]] + [
            e["id"] for c in body["scope_cards"] for e in c["entries"]]
        assert len(listed) == len(set(listed))


def test_name_and_kind_come_from_the_statements_not_the_entity_row(live_server, dana):
    w, _ = dana
    with account_context(w.account.id):
        Entity.objects.filter(canonical="dana r").update(kind="place")  # a wrong row
    body = _context(live_server, w.agent_key, peer_key="bob", query="Who is Dana R.?")
    assert {c["kind"] for c in body["entity_cards"]} == {"person"}
    # A query that names nobody gets no card.
    assert _context(live_server, w.agent_key, peer_key="bob",
                    query="what shipped last week?")["entity_cards"] == []


def test_a_peerless_reader_gets_public_statements_only(live_server, dana):
    w, _ = dana
    with account_context(w.account.id):
        public = _add(w, "Dana R. spoke at the launch event.", subject=None,
                      sensitivity="public")
    index_knowledge(w.account.id, [public])
    with account_context(w.account.id):
        _, key = services.credential_create(account_id=w.account.id, peer=None)
    body = _context(live_server, key, query="What did Dana R. do?")
    assert _card_ids(body) == {public}


def test_a_card_is_fresh_on_the_next_read_after_a_lifecycle_change(live_server, dana):
    w, ids = dana
    bob = Reader(account_id=w.account.id, posture="peer", peer_id=w.member.id)

    def card_ids() -> set[str]:
        with account_context(w.account.id):
            chain = [(w.scope.id, w.scope.path)]
            return {e["id"] for c in cards_for_query(reader=bob, chain=chain,
                                                     query="What did Dana R. do?")
                    for e in c.entries}

    assert card_ids() == {ids["drafted"], ids["approved"]}
    with account_context(w.account.id):
        transition(Knowledge.objects.get(pk=ids["drafted"]), "redacted",
                   actor="system:test", reason="f4_subject_redacted")
    # No rebuild in between: the next read no longer carries it, anywhere.
    assert card_ids() == {ids["approved"]}
    after = _context(live_server, w.agent_key, peer_key="bob", query="What did Dana R. do?")
    assert ids["drafted"] not in json.dumps(after)


def test_a_card_gathers_the_names_a_model_linked(live_server, dana, fake_openai):
    w, ids = dana
    with account_context(w.account.id):
        lead = _add(w, "Our copy lead wants shorter headlines.", subject=None)
    index_knowledge(w.account.id, [lead])
    # No stored vectors here: the only candidate is none by name, so nothing is asked
    # and the description stays its own card.
    resolve_entities(w.account.id, [w.scope.id])
    assert fake_openai.requests == []
    body = _context(live_server, w.agent_key, peer_key="bob", query="Who is our copy lead?")
    cards = [c for c in body["entity_cards"] if c["scope"] == "/marketing/social"]
    assert [(c["name"], [e["id"] for e in c["entries"]]) for c in cards] == [
        ("copy lead", [lead])]
    # With a vector context shared by both, the model confirms the link; the card then
    # holds both and is named by the name its statements use, not the description.
    from retrieval.embedding import get_embedder
    from retrieval.models import KnowledgeVector
    from retrieval.vectors import space_ensure

    with account_context(w.account.id):
        space = space_ensure(get_embedder().identity)
        for kid in (ids["drafted"], ids["approved"], lead):
            KnowledgeVector.objects.create(account=w.account, knowledge_id=kid, space=space,
                                           embedding=[1.0] + [0.0] * (space.dims - 1))
    fake_openai.script.append(ok({"verdicts": [{"pair": 1, "same_entity": True}]}))
    assert resolve_entities(w.account.id, [w.scope.id])["links"] == 1
    body = _context(live_server, w.agent_key, peer_key="bob", query="Who is our copy lead?")
    cards = [c for c in body["entity_cards"] if c["scope"] == "/marketing/social"]
    # The payload holds each statement once: the linked card is named "Dana R." or, when
    # the query-ranked head already holds all three statements, left out; the description
    # never stands alone again.
    assert [c["name"] for c in cards] in (["Dana R."], []), body
    shown = {e["id"] for e in body["knowledge"]} | {e["id"] for c in cards for e in c["entries"]}
    assert {ids["drafted"], ids["approved"], lead} <= shown, body
    bob = Reader(account_id=w.account.id, posture="peer", peer_id=w.member.id)
    with account_context(w.account.id):
        (card,) = cards_for_query(reader=bob, chain=[(w.scope.id, w.scope.path)],
                                  query="Who is our copy lead?")
    assert {e["id"] for e in card.entries} == {ids["drafted"], ids["approved"], lead}
    assert (card.name, card.kind) == ("Dana R.", "person")
