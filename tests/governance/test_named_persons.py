"""Claims about people who are not the speaker, through the real HTTP API and the real
pipeline: never an active fact about the speaker; a registered person's claim is
provisional for them; an unregistered person's is held for a curator with their name
recorded, and registering them (POST /peers, the people API) links it to them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from governance import workers
from governance.models import PeerQuestion, Validation
from knowledge.models import Knowledge
from memhouse.core.tenancy import account_context
from tests.governance.helpers import api
from tests.governance.test_intake_quality import SCOPE, post, search

pytestmark = pytest.mark.django_db(transaction=True)


def only_row(world: Any, contains: str) -> Knowledge:
    with account_context(world.account.id):
        rows = list(Knowledge.objects.filter(statement__icontains=contains)
                    .select_related("subject_peer").exclude(state="rejected"))
    assert len(rows) == 1, [(k.statement, k.state) for k in rows]
    return rows[0]


def test_a_claim_about_an_unregistered_person_is_held_with_their_name(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "Jordan told me he is quitting Google.",
         "My friend Priya just got engaged.")
    jordan = only_row(committed_world, "quitting Google")
    priya = only_row(committed_world, "engaged")
    for row, name in ((jordan, "Jordan"), (priya, "Priya")):
        assert (row.state, row.state_reason) == ("held", "f4_named_person_hold")
        assert row.subject_peer_id is None and row.named_entity == name
    # Nobody reads it as a fact, and least of all as one about Alice.
    for key in (keys.alice, keys.bob):
        assert not any("Google" in s for s in search(live_server, key, "Who is quitting Google?"))
    # The curator's queue shows it with the name and an open review.
    r = api(live_server, keys.carol, "GET", "curator/queue", state="held")
    assert r.status_code == 200, r.text
    items = {i["id"]: i for i in r.json()["items"]}
    assert items[str(jordan.id)]["named_entity"] == "Jordan"
    assert [v["kind"] for v in items[str(jordan.id)]["validations"]] == ["review"]
    # It waits for Jordan to be registered: review aging never rejects it.
    assert items[str(jordan.id)]["validations"][0]["due_at"] is None
    assert workers.age_overdue_reviews(committed_world.account.id,
                                       now=timezone.now() + timedelta(days=400)) == 0
    assert only_row(committed_world, "quitting Google").state == "held"


def test_registering_the_person_later_links_the_held_claim_to_them(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "Jordan told me he is quitting Google.")
    held = only_row(committed_world, "quitting Google")
    r = api(live_server, keys.dave, "POST", "peers",
            {"key": "jordan", "kind": "human", "display_name": "Jordan"})
    assert r.status_code == 201, r.text
    row = only_row(committed_world, "quitting Google")
    assert row.pk == held.pk
    assert (row.state, row.state_reason, row.level) == ("provisional", "f4_named_person_linked",
                                                        "peer")
    assert row.subject_peer is not None and row.subject_peer.key == "jordan"
    with account_context(committed_world.account.id):
        review = Validation.objects.get(knowledge=row, kind=Validation.Kind.REVIEW)
        assert (review.status, review.resolution) == ("resolved", "linked")
        question = PeerQuestion.objects.get(knowledge=row, status=PeerQuestion.Status.OPEN)
        assert question.peer.key == "jordan"
    # Another name is not linked: registering "Jordana" changes nothing else.
    post(live_server, keys.alice, "Marco moved to Berlin last month.")
    api(live_server, keys.dave, "POST", "peers", {"key": "jordana", "kind": "human"})
    assert only_row(committed_world, "Berlin").state == "held"


def test_a_claim_about_a_registered_person_is_provisional_for_them(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "Apparently Bob was diagnosed with asthma.")
    row = only_row(committed_world, "asthma")
    assert row.state == "provisional"
    assert row.subject_peer is not None and row.subject_peer.key == "bob"
    assert not any("asthma" in s for s in search(live_server, keys.alice, "asthma"))


def test_the_speakers_own_claims_and_joint_ones_stay_theirs(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "Jordan and I went hiking in the Alps.",
         "I work with Jordan at Acme.", "Austin is hot in July.")
    for text in ("hiking", "Acme", "Austin"):
        row = only_row(committed_world, text)
        assert row.state == "active" and row.named_entity == "", (row.statement, row.state)
        assert row.subject_peer is not None and row.subject_peer.key == "alice"


def test_a_he_left_as_said_goes_to_the_person_the_message_named(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    # issue 33 item 3 on unseen wording: the second clause's "he" is Ignatius, not Alice
    post(live_server, keys.alice,
         "I bumped into Ignatius at the market, he's running a cheese stall now.")
    stall = only_row(committed_world, "cheese stall")
    assert stall.statement == "Alice said Ignatius is running a cheese stall now."
    assert (stall.state, stall.state_reason) == ("held", "f4_named_person_hold")
    assert stall.subject_peer_id is None and stall.named_entity == "Ignatius"
    # meeting him is Alice's own evening
    met = only_row(committed_world, "bumped into")
    assert met.state == "active" and met.subject_peer is not None
    assert met.subject_peer.key == "alice"
    # registering Ignatius later makes the claim his
    r = api(live_server, keys.dave, "POST", "peers",
            {"key": "ignatius", "kind": "human", "display_name": "Ignatius"})
    assert r.status_code == 201, r.text
    stall = only_row(committed_world, "cheese stall")
    assert stall.state == "provisional" and stall.subject_peer is not None
    assert stall.subject_peer.key == "ignatius"


def test_news_passed_on_about_a_titled_relative_is_held_for_them(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "Mum says Auntie Brenda had a fall last week.",
         "Anouk's training to be a midwife.")
    for text, name in (("had a fall", "Brenda"), ("midwife", "Anouk")):
        row = only_row(committed_world, text)
        assert (row.state, row.subject_peer_id, row.named_entity) == ("held", None, name)


def test_a_he_answering_the_turn_before_goes_to_the_person_it_named(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    # the name is in the session's turn before (Bob's question), the "he" in Alice's reply
    r = api(live_server, keys.scribe, "POST", "messages", {
        "scope": SCOPE, "session": "market", "messages": [
            {"peer_key": "bob", "text": "Have you heard from Ignatius lately?",
             "occurred_at": "2026-03-02T09:10:00Z"},
            {"peer_key": "alice", "text": "He's running a cheese stall now.",
             "occurred_at": "2026-03-02T09:11:00Z"}]})
    assert r.status_code in (200, 201, 202), r.text
    stall = only_row(committed_world, "cheese stall")
    assert "Ignatius" in stall.statement
    assert (stall.state, stall.subject_peer_id, stall.named_entity) == (
        "held", None, "Ignatius")


def test_a_name_no_list_knows_is_typed_by_the_encoder(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    # neither name is in the given-name lexicon: the name typer reads the word itself
    post(live_server, keys.alice, "I heard Isambard won the pub quiz again.",
         "Did I tell you Brangwen got engaged?", "Pottery's a great way to relax.")
    for contains, name in (("pub quiz", "Isambard"), ("engaged", "Brangwen")):
        row = only_row(committed_world, contains)
        assert (row.state, row.named_entity, row.subject_peer_id) == ("held", name, None)
    own = only_row(committed_world, "relax")
    assert own.state == "active" and own.subject_peer.key == "alice" and not own.named_entity
