"""Source crowding (retrieval.crowding) over real HTTP: in balanced, a statement whose
source turn already backs a higher candidate waits behind statements from new turns and
says which one it repeats; documents' statements and other profiles keep fused order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from knowledge import services
from knowledge.models import Message, Peer
from memhouse.core.tenancy import account_context
from retrieval import crowding
from retrieval.fusion import FusedCandidate
from retrieval.vectors import embed_knowledge
from tests.factories import walk_to

pytestmark = pytest.mark.django_db(transaction=True)

SAID = datetime(2023, 7, 2, 12, 0, tzinfo=UTC)
TURN = ("I took my turtles to the beach in Tampa yesterday! The turtles loved the beach "
        "and the turtles ate strawberries at the beach.")
SECOND = "We went back to the beach in Tampa with the kids a week later."


def _search(live_server, key, **body) -> dict:
    body.setdefault("scope", "/marketing/social")
    body.setdefault("deadline_ms", 5000)
    r = httpx.post(f"{live_server.url}/api/v1/search", json=body,
                   headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def beach(committed_world):
    """Three statements from one turn about the beach, one from a second turn."""
    w = committed_world
    ids: dict[str, str] = {}
    with account_context(w.account.id):
        alice = Peer.objects.get(key="alice")

        def said(text, n):
            return Message.objects.create(account=w.account, peer=alice, scope=w.scope,
                                          text=text, occurred_at=SAID + timedelta(days=n))

        def add(name, statement, source):
            item = services.knowledge_propose(
                account_id=w.account.id, statement=statement, scope=w.scope,
                subject_peer=alice, actor="system:pipeline", proposed_by=alice,
                sources=[{"message": source, "excerpt": statement}])
            ids[name] = str(walk_to(item, "active").id)

        turn = said(TURN, 0)
        add("took", "Alice took their turtles to the beach in Tampa.", turn)
        add("loved", "Alice's turtles loved the beach in Tampa.", turn)
        add("ate", "Alice's turtles ate strawberries at the beach in Tampa.", turn)
        add("back", "Alice went back to the beach in Tampa with the kids.", said(SECOND, 7))
    embed_knowledge(w.account.id, list(ids.values()))
    return w, ids


def test_a_second_statement_of_a_turn_waits_behind_a_new_turn(live_server, beach):
    w, ids = beach
    q = "What did Alice do at the beach in Tampa with the turtles?"
    fused = _search(live_server, w.agent_key, query=q, peer_key="alice", profile="fast")
    order = [c["id"] for c in fused["candidates"]]
    # fast keeps fused order, where the turtles' turn holds the top: the premise
    assert order.index(ids["back"]) > 1
    assert all(c["deferred_after"] is None for c in fused["candidates"])

    body = _search(live_server, w.agent_key, query=q, peer_key="alice")
    got = [c["id"] for c in body["candidates"]]
    first = got[0]
    assert first in {ids["took"], ids["loved"], ids["ate"]}
    assert got[1] == ids["back"]  # the new turn comes before the repeats
    repeats = body["candidates"][2:]
    assert {c["id"] for c in repeats} == {ids["took"], ids["loved"], ids["ate"]} - {first}
    assert all(c["deferred_after"] == first for c in repeats)
    assert body["candidates"][1]["deferred_after"] is None
    # the repeats keep their fused order among themselves
    assert [c["id"] for c in repeats] == [i for i in order if i in {c["id"] for c in repeats}]


def test_a_repeat_returns_after_the_wait(beach):
    """Behind `wait` new-turn statements the repeat takes its place again; statements with
    no source message (a document's, a curator's) are never repeats."""
    w, ids = beach
    with account_context(w.account.id):
        alice = Peer.objects.get(key="alice")
        extra = []
        for n in range(3):
            m = Message.objects.create(account=w.account, peer=alice, scope=w.scope,
                                       text=f"turn {n}", occurred_at=SAID)
            extra.append(str(services.knowledge_propose(
                account_id=w.account.id, statement=f"Alice said thing {n}.", scope=w.scope,
                subject_peer=alice, actor="system:pipeline", proposed_by=alice,
                sources=[{"message": m, "excerpt": "x"}]).id))
        free = [str(services.knowledge_propose(
            account_id=w.account.id, statement=f"The team uses tool {n}.", scope=w.scope,
            subject_peer=None, actor="system:pipeline", proposed_by=alice).id)
            for n in range(2)]
        fused = [FusedCandidate(i, 1.0 - n / 10) for n, i in enumerate(
            [ids["took"], ids["loved"], *free, extra[0], extra[1], extra[2]])]
        order, moved = crowding.defer_repeats(fused, wait=2)
    got = [c.id for c in order]
    # two statements without a source turn are never repeats of each other
    assert got[:4] == [ids["took"], *free, ids["loved"]]
    assert moved == {ids["loved"]: ids["took"]}
    with account_context(w.account.id):
        same, none = crowding.defer_repeats(fused, wait=0)
    assert [c.id for c in same] == [c.id for c in fused] and none == {}
