"""rule-v5: "it" stands for the one thing another speaker just asked about, and a date
that is the object of "to/at/for" or a part of a month ("the end of August") is kept or
read whatever the verb."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from knowledge.ingest.extraction import ExtractedClaim, ObservedMessage, validate_claim
from knowledge.ingest.rule_extractor import RuleBasedExtractor

WHEN = datetime(2026, 5, 12, 10, 0, tzinfo=UTC)  # Tuesday 12 May 2026
PEERS = {"zoe": "zoe", "max": "max"}


def extract(text: str, *recent: str) -> list[ExtractedClaim]:
    """``recent``: the turns before, oldest first, alternating so that max speaks last."""
    turns = tuple(("max" if (len(recent) - n) % 2 else "zoe", t) for n, t in enumerate(recent))
    observed = ObservedMessage(
        message_id="7a0d1a4e-0000-4000-8000-000000000005", text=text, speaker_key="zoe",
        speaker_name="Zoe", occurred_at=WHEN, known_peers=PEERS, addressee_key="max",
        recent_turns=turns)
    claims: list[ExtractedClaim] = RuleBasedExtractor().extract(observed)
    for claim in claims:
        validate_claim(claim, observed)
    return claims


def statement(text: str, *recent: str) -> str:
    claims = extract(text, *recent)
    assert len(claims) == 1, [c.statement for c in claims]
    return claims[0].statement


@pytest.mark.parametrize(("recent", "text", "thing"), [
    ("Why, is it the migration again?", "Yes, it failed on staging last night.",
     "the migration failed"),
    ("Did you finish the report?", "Yes, I sent it to Max yesterday.", "sent the report"),
    ("Have you tried the new ramen place?", "Yes, it closes at 9 though.",
     "the new ramen place closes"),
])
def test_it_is_the_one_thing_the_question_before_asked_about(recent, text, thing):
    assert thing in statement(text, recent)


@pytest.mark.parametrize(("recent", "text"), [
    # a statement came in between: "it" may be the laptop as well as the logo
    (("Did you see the new logo?", "Yes. My laptop broke though."), "I'll fix it tomorrow."),
    # two things asked about
    (("Did the vendor send the new contract?",), "Yes, it expires on 30 June 2027."),
    # "it" that stands for nothing, or an idiom
    (("How was the concert?",), "It was amazing, it made my week."),
    (("Are you coming to the party?",), "No, I can't make it."),
    # someone else's thing cannot be said from the speaker's mouth ("your dog")
    (("How is your dog?",), "I took it to the vet."),
    # "that" is no determiner here
    (("Great pic! Is that recent?",), "Yes, the kids loved it."),
    # no question before at all
    ((), "Mei wrote most of it."),
])
def test_it_stays_as_said_when_the_turns_before_leave_doubt(recent, text):
    for claim in extract(text, *recent):
        assert re.search(r"\bit\b", claim.statement, re.I), claim.statement
        for word in ("logo", "contract", "vendor", "concert", "party", "dog", "recent"):
            assert word not in claim.statement.lower()


def test_a_date_after_to_at_or_for_is_what_the_clause_says():
    assert "May 28th" in statement("The release is moving to May 28th.")
    claims = extract("Kofi is leaving the company at the end of March.")
    assert any("the end of March" in c.statement for c in claims)


def test_the_second_date_of_a_range_is_not_kept_as_a_value():
    claims = extract("I'm taking parental leave from April 1st to June 30th.")
    assert [c.statement for c in claims] == ["Zoe is taking parental leave."]
    assert claims[0].relevant_from == datetime(2027, 4, 1, tzinfo=UTC)
    assert claims[0].relevant_until == datetime(2027, 7, 1, tzinfo=UTC)


def test_the_end_of_a_month_bounds_valid_time():
    claims = extract("I'm on parental leave from June 15 until the end of August.")
    assert [c.statement for c in claims] == ["Zoe is on parental leave."]
    assert claims[0].relevant_from == datetime(2026, 6, 15, tzinfo=UTC)
    assert claims[0].relevant_until == datetime(2026, 9, 1, tzinfo=UTC)


@pytest.mark.parametrize(("text", "said"), [
    ("Makes sense. Kofi is leaving the company at the end of March, did you know?",
     "Kofi is leaving the company at the end of March"),
    ("Did you hear Kofi quit his job at the bank?", "Kofi quit his job at the bank"),
])
def test_news_told_as_a_question_is_a_statement(text, said):
    assert any(said in c.statement for c in extract(text))


@pytest.mark.parametrize("text", ["Did you know him?", "Did you hear that?",
                                  "Have you heard the news?", "Did you hear about it?"])
def test_a_real_question_about_knowing_gives_no_claim(text):
    assert extract(text) == []


def test_a_verbless_fragment_keeps_its_date():
    assert statement("Three years in June.") == "Zoe said: Three years in June."
    assert extract("Yesterday.") == []  # a date alone says nothing


@pytest.mark.parametrize(("text", "until"), [
    ("I'm out on Thursday and Friday.", datetime(2026, 5, 16, tzinfo=UTC)),
    ("I'm out from Wednesday to Friday.", datetime(2026, 5, 16, tzinfo=UTC)),
])
def test_two_days_in_a_row_or_a_weekday_range_is_one_window(text, until):
    claims = extract(text)
    assert [c.statement for c in claims] == ["Zoe is out."]
    assert claims[0].relevant_until == until


def test_two_days_apart_are_not_one_window():
    claims = extract("I'm busy on Monday and Wednesday.")
    assert all(c.relevant_until != datetime(2026, 5, 21, tzinfo=UTC) for c in claims)
    assert extract("I watched Saturday Night Live.")[0].statement == (
        "Zoe watched Saturday Night Live.")


@pytest.mark.parametrize(("text", "kept", "dropped"), [
    # a relative clause ends with its preposition: the date is a frame, not its object
    ("I donated my old car to a shelter I volunteer at yesterday.", "shelter", "May 2026"),
    ("This was the parade I went to a few weeks ago.", "parade", "2026"),
    # a verb makes it no fragment: the date stays valid time
    ("Gonna volunteer at shelters next month.", "shelters", "June 2026"),
    ("Next month, I'm off to Ireland for a semester.", "Ireland", "June 2026"),
])
def test_a_date_that_frames_the_clause_still_leaves_the_text(text, kept, dropped):
    statements = [c.statement for c in extract(text)]
    assert any(kept in s for s in statements), statements
    assert not any(dropped in s for s in statements), statements


def test_you_know_is_a_filler_not_news():
    assert extract("It's like a reset button, you know?") == []


def test_a_pronoun_inside_an_address_is_left_as_written() -> None:
    # "me" of an e-mail address or a domain is no first person (knowledge_fresh4 f18)
    said = statement("Please stop using my outlook address, I'm on marta@kowalczyk.me now.")
    assert "marta@kowalczyk.me" in said
    assert "me-time" in statement("I need some me-time.")
