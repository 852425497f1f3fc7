"""Sensitivity reaches every clause of a sentence (issue 33, item 4): when one claim of a
sentence is personal or restricted, every other claim drawn from that sentence about the
same subject is at least as sensitive; claims from the message's other sentences, and
claims about someone else, keep their own level."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from knowledge.ingest.extraction import ExtractedClaim, ObservedMessage, validate_claim
from knowledge.ingest.rule_extractor import RuleBasedExtractor, sentence_spans
from knowledge.ingest.sensitivity import classify_sensitivity, share_within_sentences

WHEN = datetime(2026, 6, 10, 18, 0, tzinfo=UTC)  # Wednesday 10 June 2026
PEERS = {"sam": "sam", "lena": "lena", "omar": "omar"}
MESSAGE_ID = "7a0d1a4e-0000-4000-8000-000000000033"


def observed(text: str) -> ObservedMessage:
    """Sam speaks to Lena; Omar is a third party both know."""
    return ObservedMessage(message_id=MESSAGE_ID, text=text, speaker_key="sam",
                           speaker_name="Sam", occurred_at=WHEN, known_peers=PEERS,
                           addressee_key="lena")


def extract(text: str) -> list[tuple[str, str]]:
    message = observed(text)
    claims = RuleBasedExtractor().extract(message)
    for claim in claims:
        validate_claim(claim, message)
    return [(c.statement, c.sensitivity) for c in claims]


# --- the rule extractor: every claim of the sentence ---------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    # health: the case
    ("I was diagnosed with type 2 diabetes last year, so I'm watching my sugar.",
     [("Sam was diagnosed with type 2 diabetes.", "personal"),
      ("Sam is watching their sugar.", "personal")]),
    ("I started therapy in March and I finally feel like myself again.",
     [("Sam started therapy.", "personal"),
      ("Sam finally feels like themself again.", "personal")]),
    # finances
    ("My salary got cut by 20% so I moved back in with my parents.",
     [("Sam's salary got cut by 20%.", "personal"),
      ("Sam moved back in with their parents.", "personal")]),
    ("I'm behind on my mortgage, and I've started selling my furniture online.",
     [("Sam is behind on their mortgage.", "personal"),
      ("Sam has started selling their furniture online.", "personal")]),
    # beliefs
    ("I voted for the Greens and I'm volunteering for their campaign.",
     [("Sam voted for the Greens.", "personal"),
      ("Sam is volunteering for their campaign.", "personal")]),
    # three clauses, one of them with the subject only as a possessive ("my mom ... me")
    ("I got laid off last week, so I'm looking for a new job and my mom is helping me.",
     [("Sam got laid off.", "personal"), ("Sam is looking for a new job.", "personal"),
      ("Sam's mom is helping Sam.", "personal")]),
    # a third party: the pronoun left as said points back at them
    ("Omar told me he's in debt, so he's selling his car.",
     [("Omar told Sam he's in debt.", "personal"),
      ("Sam said he's selling his car.", "personal")]),
    # restricted stays restricted and reaches the rest of the sentence as restricted
    ("My PIN is 4821 and I use it for my bank app.",
     [("Sam's PIN is 4821.", "restricted"), ("Sam uses it for their bank app.", "restricted")]),
])
def test_a_personal_clause_makes_its_sentence_personal(
        text: str, expected: list[tuple[str, str]]) -> None:
    assert extract(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    # another sentence of the same message keeps its own level
    ("I was diagnosed with type 2 diabetes last year. I'm watching a lot of cooking shows "
     "these days.",
     [("Sam was diagnosed with type 2 diabetes.", "personal"),
      ("Sam is watching a lot of cooking shows these days.", "internal")]),
    ("My back surgery went well. I'm heading to the beach next week and I can't wait.",
     [("Sam's back surgery went well.", "personal"), ("Sam is heading to the beach.", "internal")]),
    ("I'm in a lot of debt, but I still bought a new car. My sister loves it.",
     [("Sam is in a lot of debt.", "personal"), ("Sam still bought a new car.", "personal"),
      ("Sam's sister loves it.", "internal")]),
    # a claim about someone else that only mentions the subject says what they did
    ("I had surgery on my knee last month and Omar drove me home.",
     [("Sam had surgery on their knee.", "personal"), ("Omar drove Sam home.", "internal")]),
    ("Omar got a new puppy and I'm in therapy.",
     [("Omar got a new puppy.", "internal"), ("Sam is in therapy.", "personal")]),
    ("I'm on antidepressants now and Omar has been checking in on me every day.",
     [("Sam is on antidepressants now.", "personal"),
      ("Omar has been checking in on Sam every day.", "internal")]),
    # nothing sensitive: nothing raised
    ("I love hiking and my favourite trail is in the Peak District.",
     [("Sam loves hiking.", "internal"),
      ("Sam's favourite trail is in the Peak District.", "internal")]),
])
def test_other_sentences_and_other_subjects_keep_their_level(
        text: str, expected: list[tuple[str, str]]) -> None:
    assert extract(text) == expected


# --- the rule itself --------------------------------------------------------------------------


def claim(span: tuple[int, int], sensitivity: str, subject: str | None = "sam",
          statement: str = "Sam did something.") -> ExtractedClaim:
    return ExtractedClaim(
        statement=statement, subject_peer_key=subject, kind="fact", confidence=0.8,
        sensitivity=sensitivity, relevant_from=None, relevant_until=None,
        self_observation=subject == "sam", source_message_id=MESSAGE_ID, evidence_span=span)


TWO_SENTENCES = "I take insulin and I run every day. I also play chess on Sundays."


def levels(claims: list[ExtractedClaim], text: str = TWO_SENTENCES) -> list[str]:
    return [c.sensitivity for c in share_within_sentences(claims, text, sentence_spans(text))]


def test_the_strictest_level_of_the_sentence_wins() -> None:
    assert levels([claim((0, 14), "personal"), claim((19, 34), "internal"),
                   claim((0, 5), "restricted")]) == ["restricted", "restricted", "restricted"]


def test_a_lower_level_never_lowers_a_claim() -> None:
    assert levels([claim((0, 14), "restricted"), claim((19, 34), "personal")]) == [
        "restricted", "restricted"]


def test_nothing_chains_across_subjects() -> None:
    # Sam's personal claim raises Sam's other claim, never Lena's, and the raised claim
    # raises nothing in turn
    assert levels([claim((0, 14), "personal"), claim((19, 34), "internal"),
                   claim((19, 34), "internal", subject="lena",
                         statement="Lena runs every day.")]) == [
        "personal", "personal", "internal"]


def test_a_claim_quoting_several_sentences_neither_raises_nor_is_raised() -> None:
    whole = (0, len(TWO_SENTENCES))
    assert levels([claim(whole, "personal"), claim((36, 65), "internal")]) == [
        "personal", "internal"]
    assert levels([claim((0, 14), "personal"), claim(whole, "internal")]) == [
        "personal", "internal"]


def test_order_and_other_fields_are_unchanged() -> None:
    claims = [claim((19, 34), "internal", statement="Sam runs every day."),
              claim((0, 14), "personal", statement="Sam takes insulin.")]
    raised = share_within_sentences(claims, TWO_SENTENCES, sentence_spans(TWO_SENTENCES))
    assert [c.statement for c in raised] == ["Sam runs every day.", "Sam takes insulin."]
    assert raised[0] == ExtractedClaim(**{**claims[0].__dict__, "sensitivity": "personal"})
    assert raised[1] is claims[1]


# --- the lexicon in everyday words (issue 33 item 4 on unseen wording) ------------------------


@pytest.mark.parametrize("text", [
    # money trouble without "debt", "loan" or "salary"
    "We're behind on rent again.", "I've been in arrears with the council tax since June.",
    "My overdraft is maxed out.", "I can't afford the dentist this month.",
    "We're on universal credit at the moment.", "Honestly I'm skint until payday.",
    "I'm completely broke after Christmas.", "I took out a payday loan to cover it.",
    "The landlord is threatening to evict us.", "We can barely make ends meet.",
    # health without "diagnosed" or "surgery"
    "I'm allergic to penicillin.", "Dad had a heart attack in May.",
    "I've been off sick with long covid.", "My physio says I need six more weeks.",
    "I had a stroke two years ago.", "I broke my wrist at roller derby.",
    "I've been burnt out since the reorg.", "I'm still in remission.",
    "I got hurt and had to take a break from pottery.", "My son got into an accident.",
    "I struggled with my mental health after uni.",
    # beliefs and status
    "I keep kosher at home.", "My work visa expires in March.",
    "We're celebrating Eid at my aunt's.", "I voted Leave in 2016.", "I'm a socialist.",
])
def test_everyday_words_for_money_health_and_belief_are_personal(text: str) -> None:
    assert classify_sensitivity(text) == "personal"


@pytest.mark.parametrize("text", [
    # the same words in their other senses
    "The shed is behind the garage.", "I read about the benefits of yoga.",
    "What a stroke of luck!", "We broke up in May.", "It broke down on the motorway.",
    "I'm sick of this rain.", "I'm researching the visa requirements for Japan.",
    "I volunteer at the food bank on Saturdays.", "That concert was sick.",
    "I afford myself one coffee a day.", "My dog hurt her paw on the beach.",
    "I'm looking into counseling as a career.", "I lent him a tenner.",
])
def test_their_other_senses_stay_internal(text: str) -> None:
    assert classify_sensitivity(text) == "internal"


def test_falling_behind_on_rent_makes_the_whole_sentence_personal() -> None:
    assert extract("We're behind on rent, so I'm selling my old guitar.") == [
        ("Sam and others are behind on rent.", "personal"),
        ("Sam is selling their old guitar.", "personal")]


@pytest.mark.parametrize("text", [
    "I'm on a waiting list for counselling, so I'm working from home for now.",
    "We had to use a food bank last month and I skipped my friend's birthday.",
    "My credit card's maxed out so I'm not coming to the stag do.",
    "We can't afford a holiday this year, so we're camping in the garden.",
    "My benefits got cut, so I'm looking for a second job.",
    "I'm on statins now and I've switched to oat milk.",
    "I was made redundant in March and I'm retraining as a plumber.",
    "I got a bill from the bailiffs, so I'm selling my car.",
])
def test_every_clause_of_an_everyday_personal_sentence_is_personal(text: str) -> None:
    claims = extract(text)
    assert len(claims) >= 2 and {level for _, level in claims} == {"personal"}, claims
