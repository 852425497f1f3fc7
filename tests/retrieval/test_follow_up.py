"""POST /api/v1/ask over real HTTP without a provider: a line shows the speaker's
follow-up turn (retrieval.evidence.follow_up), the reply to the other side's question,
only where the reader may see that turn whole and only straight after the question."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from knowledge import services
from knowledge.models import Message, Peer, Session
from memhouse.core.tenancy import account_context
from retrieval.vectors import embed_knowledge
from tests.factories import walk_to

pytestmark = pytest.mark.django_db(transaction=True)

SAID = datetime(2023, 8, 14, 18, 0, tzinfo=UTC)
CONCERT = "We celebrated my daughter's birthday with a concert last night!"
WHO = "Oh fun! Who performed?"
PERFORMER = "It was Matt Patterson, he is so talented!"
GARDEN = "I planted tomatoes in the community garden this weekend."
WHAT = "Nice, which kind?"
OTHER = "Sorry, got distracted."
KIND = "Cherry tomatoes, the sweet ones from the farmers market."


def _ask(live_server, key, **body) -> dict:
    body.setdefault("scope", "/marketing/social")
    r = httpx.post(f"{live_server.url}/api/v1/ask", json=body,
                   headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
def chat(committed_world):
    """Two sessions of Alice and Bob taking turns; each of Alice's opening turns yields
    one statement that leaves the detail to her next turn."""
    w = committed_world
    ids: dict[str, str] = {}
    with account_context(w.account.id):
        alice, bob = Peer.objects.get(key="alice"), Peer.objects.get(key="bob")
        step = iter(range(100))

        def said(session, peer, text):
            # One session date for every turn, as chat exports give it: order is by
            # insertion, as the pipeline stores a batch.
            return Message.objects.create(account=w.account, peer=peer, scope=w.scope,
                                          session=session, text=text, occurred_at=SAID,
                                          inserted_at=SAID + timedelta(seconds=next(step)))

        def add(statement, source, **kw):
            item = services.knowledge_propose(
                account_id=w.account.id, statement=statement, scope=w.scope,
                subject_peer=alice, actor="system:pipeline", proposed_by=alice,
                sources=[{"message": source, "excerpt": statement}], **kw)
            return str(walk_to(item, "active").id)

        one = Session.objects.create(account=w.account, scope=w.scope, external_id="s1")
        concert = said(one, alice, CONCERT)
        said(one, bob, WHO)
        performer = said(one, alice, PERFORMER)
        ids["concert"] = add("Alice celebrated her daughter's birthday with a concert.",
                             concert)
        ids["performer"] = add("Alice thinks the performer is talented.", performer)
        two = Session.objects.create(account=w.account, scope=w.scope, external_id="s2")
        garden = said(two, alice, GARDEN)
        said(two, bob, WHAT)
        said(two, bob, OTHER)
        said(two, alice, KIND)  # three turns on: a later topic, not the reply
        ids["garden"] = add("Alice planted tomatoes in the community garden.", garden)
    embed_knowledge(w.account.id, list(ids.values()))
    return w, ids


def test_an_answer_line_shows_the_reply_to_the_follow_up_question(live_server, chat):
    w, ids = chat
    body = _ask(live_server, w.agent_key, peer_key="alice",
                query="Who performed at the concert for Alice's daughter's birthday?")
    assert body["model_called"] is False and not body["abstained"]
    first = body["answer"].split("\n")[0]
    assert first.startswith("[said 14 August 2023] Alice celebrated her daughter's "
                            "birthday with a concert.")
    assert f'then [14 August 2023] Alice: "{PERFORMER}"' in first
    cited = next(c for c in body["citations"] if c["id"] == ids["concert"])
    assert PERFORMER in cited["follow_up_turn"]
    assert WHO not in body["answer"]  # the other side's question is not evidence


def test_a_turn_three_turns_later_is_no_follow_up(live_server, chat):
    w, ids = chat
    body = _ask(live_server, w.agent_key, peer_key="alice",
                query="What did Alice plant in the community garden?")
    assert ids["garden"] in {c["id"] for c in body["citations"]}
    assert "Cherry" not in body["answer"]
    assert all("follow_up_turn" not in c for c in body["citations"])


def test_a_follow_up_the_reader_may_not_see_whole_is_left_out(live_server, chat):
    w, ids = chat
    with account_context(w.account.id):
        alice = Peer.objects.get(key="alice")
        performer = Message.objects.get(text=PERFORMER)
        services.knowledge_propose(
            account_id=w.account.id, statement="Alice's daughter has asthma.",
            scope=w.scope, subject_peer=alice, actor="system:pipeline",
            proposed_by=alice, sensitivity="personal",
            sources=[{"message": performer, "excerpt": PERFORMER}])
    q = "Who performed at the concert for Alice's daughter's birthday?"
    bob = _ask(live_server, w.agent_key, peer_key="bob", query=q)
    assert ids["concert"] in {c["id"] for c in bob["citations"]}
    assert "Matt Patterson" not in bob["answer"]
    # Alice spoke it: she still sees it.
    assert "Matt Patterson" in _ask(live_server, w.agent_key, peer_key="alice",
                                    query=q)["answer"]


def _refuse_from_performer_turn(w, statement: str, reason: str) -> None:
    """A second claim drawn from the follow-up turn, refused by the gates with `reason`."""
    from knowledge.lifecycle import transition

    with account_context(w.account.id):
        alice = Peer.objects.get(key="alice")
        performer = Message.objects.get(text=PERFORMER)
        item = services.knowledge_propose(
            account_id=w.account.id, statement=statement, scope=w.scope,
            subject_peer=alice, actor="system:pipeline", proposed_by=alice,
            sources=[{"message": performer, "excerpt": PERFORMER}])
        transition(item, "rejected", actor="system:pipeline", reason=reason)


def test_a_claim_refused_for_carrying_nothing_does_not_withdraw_its_turn(live_server, chat):
    # "he is so talented!" refused as a fragment takes nothing out of circulation: the
    # turn still answers who performed.
    w, _ids = chat
    _refuse_from_performer_turn(w, "Alice said he is so.", "f4_gate_a_fragment")
    body = _ask(live_server, w.agent_key, peer_key="alice",
                query="Who performed at the concert for Alice's daughter's birthday?")
    assert f'Alice: "{PERFORMER}"' in body["answer"]


def test_a_claim_refused_to_keep_it_out_still_withdraws_its_turn(live_server, chat):
    w, ids = chat
    _refuse_from_performer_turn(w, "Alice's PIN is 4321.", "f4_gate_b_restricted_unattended")
    body = _ask(live_server, w.agent_key, peer_key="alice",
                query="Who performed at the concert for Alice's daughter's birthday?")
    assert ids["concert"] in {c["id"] for c in body["citations"]}
    assert "Matt Patterson" not in body["answer"]
