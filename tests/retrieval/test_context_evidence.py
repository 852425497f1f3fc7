"""POST /api/v1/context over real HTTP: dated lines, source-turn excerpts and who may see
them, repeats left out (retrieval.evidence)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from knowledge import services
from knowledge.models import Message, Peer
from memhouse.core.tenancy import account_context
from retrieval.vectors import embed_knowledge
from tests.factories import walk_to

pytestmark = pytest.mark.django_db(transaction=True)

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
PARADE = "I went to the Pride parade in Boston with 3 friends yesterday!"
SISTER = "My sister Jo moved to Lisbon last month, and I got a new inhaler for my asthma."
DOG = "We adopted a beagle named Rex from the shelter on Main Street."


def _context(live_server, key, **body) -> dict:
    body.setdefault("scope", "/marketing/social")
    r = httpx.post(f"{live_server.url}/api/v1/context", json=body,
                   headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def turns(committed_world):
    w = committed_world
    ids = {}
    with account_context(w.account.id):
        alice = Peer.objects.get(key="alice")

        def said(text):
            return Message.objects.create(account=w.account, peer=alice, scope=w.scope,
                                          text=text, occurred_at=SAID)

        def add(statement, source, state="active", **kw):
            item = services.knowledge_propose(
                account_id=w.account.id, statement=statement, scope=w.scope,
                subject_peer=alice, actor="system:pipeline", proposed_by=alice,
                sources=[{"message": source, "excerpt": statement}], **kw)
            return str(walk_to(item, state).id)

        parade, sister, dog = said(PARADE), said(SISTER), said(DOG)
        ids["parade"] = add("Alice went to a parade.", parade,
                            relevant_from=datetime(2023, 5, 7, tzinfo=UTC),
                            relevant_until=datetime(2023, 5, 8, tzinfo=UTC))
        ids["boston"] = add("Alice went to Boston.", parade)
        ids["sister"] = add("Alice's sister moved.", sister)
        # Her own personal row from the same turn: another member may not see the turn.
        ids["asthma"] = add("Alice has asthma.", sister, sensitivity="personal")
        ids["dog"] = add("Alice adopted a dog.", dog)
        # A withdrawn statement from the third turn keeps that turn out of every excerpt.
        ids["shelter"] = add("Alice volunteers at the shelter.", dog, state="superseded")
    embed_knowledge(w.account.id, list(ids.values()))
    return w, ids


def test_a_line_carries_its_date_and_the_turn_it_lost_detail_from(live_server, turns):
    w, ids = turns
    body = _context(live_server, w.agent_key, peer_key="alice",
                    query="Which parade did Alice go to, and with how many friends?")
    text = body["context"]
    assert ('- [7 May 2023] Alice went to a parade.\n'
            f'  > [8 May 2023] Alice: "{PARADE}"\n') in text
    entry = next(e for e in body["knowledge"] if e["id"] == ids["parade"])
    assert entry["when"] == "7 May 2023"
    assert entry["source"]["excerpt"] == PARADE and entry["source"]["speaker"] == "Alice"
    # Once per message: its other statement is said by the excerpt already, or goes alone.
    assert text.count(PARADE) == 1
    if ids["boston"] not in {e["id"] for e in body["knowledge"]}:
        assert body["left_out"]["duplicates"] >= 1
    assert body["excerpts"] >= 1 and body["used_chars"] == len(text)


def test_a_turn_is_quoted_only_to_readers_who_may_see_all_it_yielded(live_server, turns):
    w, ids = turns
    q = "Where did Alice's sister move to?"
    alice = _context(live_server, w.agent_key, peer_key="alice", query=q)
    assert ids["sister"] in {e["id"] for e in alice["knowledge"]}
    assert "Lisbon" in alice["context"]  # she said it
    bob = _context(live_server, w.agent_key, peer_key="bob", query=q)
    assert ids["sister"] in {e["id"] for e in bob["knowledge"]}
    # The turn also yielded her personal row, which Bob may not read: no excerpt.
    assert "Lisbon" not in bob["context"] and "inhaler" not in bob["context"]
    sister = next(e for e in bob["knowledge"] if e["id"] == ids["sister"])
    assert "source" not in sister


def test_no_excerpt_from_a_turn_whose_statement_was_withdrawn(live_server, turns):
    w, ids = turns
    body = _context(live_server, w.agent_key, peer_key="alice",
                    query="What is the name of the dog Alice adopted?")
    assert ids["dog"] in {e["id"] for e in body["knowledge"]}
    assert ids["shelter"] not in {e["id"] for e in body["knowledge"]}
    assert "Rex" not in body["context"] and "Main Street" not in body["context"]


def test_a_line_without_valid_time_is_dated_by_when_it_was_said(live_server, turns):
    w, ids = turns
    body = _context(live_server, w.agent_key, peer_key="alice", query="Alice's sister")
    entry = next(e for e in body["knowledge"] if e["id"] == ids["sister"])
    assert entry["when"] == "said 8 May 2023"
    assert "- [said 8 May 2023] Alice's sister moved.\n" in body["context"]
