"""rule-v4 behaviour besides referents: reactions and encouragement give no claim, a
noun subject is not an imperative, a spouse implies a marriage, schedule verbs keep the
date that is the claim."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from knowledge.ingest.extraction import ExtractedClaim, ObservedMessage, validate_claim
from knowledge.ingest.rule_extractor import RuleBasedExtractor

WHEN = datetime(2026, 3, 4, 18, 0, tzinfo=UTC)  # Wednesday 4 March 2026


def extract(text: str) -> list[tuple[str | None, str]]:
    observed = ObservedMessage(
        message_id="7a0d1a4e-0000-4000-8000-000000000003", text=text, speaker_key="jon",
        speaker_name="Jon", occurred_at=WHEN, known_peers={"jon": "jon", "gina": "gina"},
        addressee_key="gina")
    claims: list[ExtractedClaim] = RuleBasedExtractor().extract(observed)
    for claim in claims:
        validate_claim(claim, observed)
    return [(c.subject_peer_key, c.statement) for c in claims]


@pytest.mark.parametrize("text", [
    "Doing research first makes sense.",
    "Your support means so much.",
    "That means a lot.",
    "Even small steps will make a difference.",
    "It'll be worth it in the end.",
    "Sure, after lunch.",
])
def test_agreement_thanks_encouragement_and_bare_replies_give_no_claim(text):
    assert extract(text) == []


def test_a_gerund_or_noun_subject_is_not_an_imperative():
    assert extract("Dance is my passion.") == [("jon", "Dance is Jon's passion.")]
    assert extract("Cooking makes me happy.") == [("jon", "Cooking makes Jon happy.")]
    assert extract("Dance with me!") == []  # an imperative still is one


def test_speaking_of_a_wife_or_husband_says_one_is_married():
    assert ("jon", "Jon is married.") in extract("My wife is vegan so we checked.")
    assert extract("Zanzibar with my wife, our tenth anniversary.") == [
        ("jon", "Jon is married.")]
    for text in ("My ex-wife lives in Ohio.", "My late husband loved jazz.",
                 "Have you met my wife?"):
        assert ("jon", "Jon is married.") not in extract(text), text


@pytest.mark.parametrize(("text", "kept"), [
    ("The meetup takes place on Friday.", "6 March 2026"),
    ("The launch happens tomorrow.", "5 March 2026"),
    ("The album comes out on May 5.", "May 5"),
])
def test_a_schedule_verb_keeps_its_date_in_the_statement(text, kept):
    [(_, statement)] = extract(text)
    assert kept in statement


def test_a_verbless_aside_after_so_is_not_part_of_the_claim():
    assert extract("I've been diagnosed with asthma, so no more night runs for me.") == [
        ("jon", "Jon has been diagnosed with asthma.")]
    # a clause after "so" with its own subject and verb is a claim of its own
    assert extract("I moved to Berlin, so I'm learning German.") == [
        ("jon", "Jon moved to Berlin."), ("jon", "Jon is learning German.")]


def test_an_opinion_that_something_can_make_a_difference_is_kept():
    assert extract("Blogging can really make a difference.") == [
        ("jon", "Jon said blogging can really make a difference.")]


def test_tomorrows_going_to_is_no_possessive():
    [(_, statement)] = extract("I think tomorrow's going to be a blast at the studio.")
    assert "on 5 March" not in statement
