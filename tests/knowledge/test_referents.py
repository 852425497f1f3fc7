"""Referents from the conversation's recent turns (rule-v4): "he/she", "there/here",
"this place" and "that name" resolved when the turns before leave one candidate, and
otherwise kept as what the speaker said, never given to the wrong person."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from knowledge import services
from knowledge.ingest.extraction import ExtractedClaim, ObservedMessage, validate_claim
from knowledge.ingest.rule_extractor import RuleBasedExtractor
from knowledge.models import Knowledge, Message
from memhouse.core.tenancy import account_context

WHEN = datetime(2026, 3, 4, 18, 0, tzinfo=UTC)  # a Wednesday
PEERS = {"ana": "ana", "ben": "ben", "mei": "mei", "kofi": "kofi", "marco": "marco"}


def extract(text: str, recent: tuple[tuple[str, str], ...] = (), *, speaker: str = "ana",
            addressee: str | None = "ben") -> list[ExtractedClaim]:
    observed = ObservedMessage(
        message_id="7a0d1a4e-0000-4000-8000-000000000002", text=text, speaker_key=speaker,
        speaker_name=speaker.title(), occurred_at=WHEN, known_peers=PEERS,
        addressee_key=addressee, recent_turns=recent)
    claims = RuleBasedExtractor().extract(observed)
    for claim in claims:
        validate_claim(claim, observed)
    return claims


def statements(claims: list[ExtractedClaim]) -> list[tuple[str | None, str]]:
    return [(c.subject_peer_key, c.statement) for c in claims]


def test_she_is_the_one_peer_the_previous_turn_named():
    claims = extract("Well deserved, she carried the migration.",
                     (("ben", "Mei got promoted to staff engineer!"),))
    assert statements(claims) == [("mei", "Mei carried the migration.")]
    assert not claims[0].self_observation


def test_he_with_a_contraction_and_an_earlier_sentence_of_the_same_message():
    assert statements(extract("He can't, he's in Berlin for work.",
                              (("ben", "Is Marco coming?"),))) == [
        ("marco", "Marco is in Berlin for work.")]
    assert statements(extract("Kofi is leaving in March. He built half of the billing system."))[
        -1] == ("kofi", "Kofi built half of the billing system.")


@pytest.mark.parametrize("previous", [
    "Did Mei tell you her mom is in hospital?",  # a person noun: "she" may be the mom
    "Mei and Kofi both got promoted!",  # two peers
    "Our cat hid all day.",  # no peer at all
])
def test_she_stays_what_the_speaker_said_when_the_turn_before_leaves_doubt(previous):
    claims = extract("She carried the migration.", (("ben", previous),))
    assert statements(claims) == [("ana", "Ana said she carried the migration.")]


def test_without_recent_turns_nothing_is_resolved():
    assert statements(extract("She carried the migration.")) == [
        ("ana", "Ana said she carried the migration.")]


def test_the_speaker_and_the_listener_are_not_he_or_she():
    # "Ana" (the speaker) and "Ben" (the listener) are named, but neither is "she"
    claims = extract("She carried the migration.", (("ben", "Ana, Ben here."),))
    assert statements(claims) == [("ana", "Ana said she carried the migration.")]


def test_there_is_the_place_named_just_before():
    assert statements(extract("I lived there for two years.",
                              (("ben", "I'm moving to Lisbon in May."),))) == [
        ("ana", "Ana lived in Lisbon for two years.")]
    assert statements(extract("I went there last spring.",
                              (("ben", "I'm moving to Lisbon in May."),)))[0][1].startswith(
        "Ana went to Lisbon")


def test_existential_there_and_two_places_are_left_alone():
    said = extract("There is a great market near the river.",
                   (("ben", "I'm moving to Lisbon in May."),))
    assert all("Lisbon" not in s for _, s in statements(said))
    two = extract("I lived there for two years.",
                  (("ben", "Moving to Lisbon or to Porto, we'll see."),))
    assert statements(two) == [("ana", "Ana lived there for two years.")]


def test_here_and_this_place_are_where_the_speaker_said_they_are():
    own = extract("I'm staying in Galway. This place has such a vibrant atmosphere.")
    assert ("ana", "Ana said Galway has such a vibrant atmosphere.") in statements(own)
    # the listener's city is not the speaker's "here"
    theirs = extract("The rent here is crazy.", (("ben", "I just moved to Denver."),))
    assert all("Denver" not in s for _, s in statements(theirs))


def test_that_name_is_the_name_given_just_before():
    claims = extract("I love that name!", (("ben", "We named the puppy Biscuit."),))
    assert statements(claims) == [("ana", "Ana loves the name Biscuit.")]
    lone = extract("I love that name!", (("ben", "What's her name?"), ("ben", "Biscuit.")))
    assert statements(lone) == [("ana", "Ana loves the name Biscuit.")]


def test_a_possessive_day_date_is_kept_after_its_noun():
    claims = extract("Can't wait for tomorrow's grand opening!")
    assert statements(claims) == [
        ("ana", "Ana can't wait for the grand opening on 5 March 2026.")]
    # a vaguer possessive is only a frame: "during the game"
    week = extract("I scored twice during last week's game.")
    assert "during the game" in week[0].statement


# --- through the pipeline: the session's previous messages reach the extractor ---------

pytestmark_db = pytest.mark.django_db(transaction=True)


@pytestmark_db
def test_ingest_resolves_she_from_the_sessions_previous_message(live_server,
                                                                committed_world):
    w = committed_world
    with account_context(w.account.id):
        for key, name in (("ana", "Ana"), ("ben", "Ben"), ("mei", "Mei")):
            services.peer_create(account_id=w.account.id, key=key, kind="human",
                                 display_name=name)
    body = {"scope": "/marketing/social", "session": "s1", "messages": [
        {"id": "t1", "peer_key": "ben", "text": "Mei got promoted to staff engineer!",
         "occurred_at": "2026-03-04T18:00:00Z"},
        {"id": "t2", "peer_key": "ana", "text": "Well deserved, she carried the migration.",
         "occurred_at": "2026-03-04T18:00:00Z"}]}
    r = httpx.post(f"{live_server.url}/api/v1/messages", json=body,
                   headers={"Authorization": f"Bearer {w.agent_key}"}, timeout=60)
    assert r.status_code == 202, r.text
    with account_context(w.account.id):
        rows = {k.statement: k for k in Knowledge.objects.select_related("subject_peer")}
        mei = rows["Mei carried the migration."]
        assert mei.subject_peer.key == "mei" and mei.extractor == "rule-based/rule-v5"
        from governance.intake.pipeline import recent_turns

        by_id = {m.client_message_id: m for m in Message.objects.select_related("peer")}
        # same occurred_at: arrival orders them, and a turn never sees the one after it
        assert recent_turns(by_id["t2"]) == (("ben", "Mei got promoted to staff engineer!"),)
        assert recent_turns(by_id["t1"]) == ()


def test_someone_addressed_by_name_or_taking_part_is_never_he_or_she():
    # the first turn of a session: no listener known yet, but "Hey Mei" addresses her
    claims = extract("Hey Mei! He was such an important part of our family.", addressee=None)
    assert all(subject == "ana" for subject, _ in statements(claims))
    # whoever spoke just before is the listener, not "she"
    claims = extract("She carried the migration.", (("mei", "I got promoted!"),),
                     addressee=None)
    assert statements(claims) == [("ana", "Ana said she carried the migration.")]


def test_to_names_a_place_only_after_a_verb_of_going():
    claims = extract("It's hard to think he's not there anymore.",
                     (("ben", "We said goodbye to Max last week."),))
    assert all("Max" not in s for _, s in statements(claims))
    assert statements(extract("I'm planning a trip there.",
                              (("ben", "We moved to Portland."),))) == [
        ("ana", "Ana is planning a trip to Portland.")]


def test_been_to_names_a_place():
    assert statements(extract("I had a blast there last month.",
                              (("ben", "Have you been to Italy?"),), speaker="ana")) == [
        ("ana", "Ana had a blast in Italy.")]


def test_a_long_message_reads_each_sentence_once_for_its_referents(monkeypatch):
    """What each unit offers is read once, when it is added: searching every earlier
    sentence again for each new one made a 20,000-character message quadratic."""
    from knowledge.ingest import referents

    read: list[str] = []
    real = referents._thing_of
    monkeypatch.setattr(referents, "_thing_of", lambda unit: read.append(unit) or real(unit))
    text = " ".join(f"I painted fence number {n} today." for n in range(200))
    claims = extract(text, (("ben", "How was your weekend?"),))
    assert len(claims) == 200
    assert len(read) == 201  # the recent turn and each sentence, once
