"""Statements read well: a possessive that points back at someone the statement already
named is "their", discourse fillers leave, and a shown picture or a fan of nothing named
is no claim (issue 36, item 7)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from knowledge.ingest.extraction import ExtractedClaim, ObservedMessage, validate_claim
from knowledge.ingest.rule_extractor import RuleBasedExtractor

WHEN = datetime(2026, 6, 10, 18, 0, tzinfo=UTC)  # Wednesday 10 June 2026
PEERS = {"sam": "sam", "lena": "lena", "omar": "omar"}


def extract(text: str, *recent: str, addressee: str | None = "lena") -> list[ExtractedClaim]:
    """Sam speaks to Lena; ``recent``: Lena's turns before, oldest first."""
    observed = ObservedMessage(
        message_id="7a0d1a4e-0000-4000-8000-000000000036", text=text, speaker_key="sam",
        speaker_name="Sam", occurred_at=WHEN, known_peers=PEERS, addressee_key=addressee,
        recent_turns=tuple(("lena", t) for t in recent))
    claims: list[ExtractedClaim] = RuleBasedExtractor().extract(observed)
    for claim in claims:
        validate_claim(claim, observed)
    return claims


def statements(text: str, *recent: str) -> list[str]:
    return [c.statement for c in extract(text, *recent)]


# --- a possessive that points back at the subject ------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("I was diagnosed with prediabetes, so I'm watching my sugar.",
     ["Sam was diagnosed with prediabetes.", "Sam is watching their sugar."]),
    ("I finally quit my job at the bakery.", ["Sam finally quit their job at the bakery."]),
    ("I spent my whole weekend fixing my bike.",
     ["Sam spent their whole weekend fixing their bike."]),
    # "our" after "Sam and others" is theirs together
    ("We finally painted our living room green.",
     ["Sam and others finally painted their living room green."]),
    # a later "we" is "they" once "Sam and others" is said
    ("We know it won't be easy, but it'll be worth it when we see the results.",
     ["Sam and others know it won't be easy, but it'll be worth it when they see the "
      "results."]),
    # the listener's "your" after the listener is named
    ("You found your true self.", ["Lena found their true self."]),
])
def test_a_possessive_of_the_subject_is_their(text, expected):
    assert statements(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    # the first mention stays the name
    ("My mom loves my cooking.", ["Sam's mom loves Sam's cooking."]),
    # someone else between: "their" could be Omar's
    ("I told Omar about my new job.", ["Sam told Omar about Sam's new job."]),
    # a plural between: "their" could be the kids'
    ("The kids loved my pottery class.", ["The kids loved Sam's pottery class."]),
    # an unresolved "they" in a report: "their" would read as theirs
    ("They've been my rock through the whole move.",
     ["Sam said they've been Sam's rock through the whole move."]),
    ("He's been a great addition to my life.",
     ["Sam said he's been a great addition to Sam's life."]),
    # "my family and I": the speaker is named right after
    ("When I was younger, my family and I went on a road trip to Oregon.",
     ["When Sam was younger, Sam's family and Sam went on a road trip to Oregon."]),
    # "my" is not "our": "Sam and others" did not own the parents
    ("We went to my parents' place.", ["Sam and others went to Sam's parents' place."]),
])
def test_the_name_stays_where_a_pronoun_could_mean_someone_else(text, expected):
    assert statements(text) == expected


def test_no_gender_is_guessed_from_a_name() -> None:
    # "he" in the turn before is about someone else, and a first name says nothing
    [claim] = extract("I'm watching my sugar now.", "Did he tell you about the new diet?")
    assert "their sugar" in claim.statement
    assert not any(f" {word} " in claim.statement for word in ("his", "her"))


# --- fillers and discourse markers ----------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("By the way, my sister just moved to Porto.", ["Sam's sister just moved to Porto."]),
    ("My yoga class moved to Thursdays, by the way.", ["Sam's yoga class moved to Thursdays."]),
    ("Anyway, I actually started learning Portuguese.", ["Sam started learning Portuguese."]),
    ("I mean, my knee is still sore from the marathon.",
     ["Sam's knee is still sore from the marathon."]),
    ("So, I'm actually thinking about selling my car.",
     ["Sam is thinking about selling their car."]),
    ("Honestly, I'm so done with my commute, lol.", ["Sam is so done with their commute."]),
    ("Speaking of trips, my parents just left for Rome.", ["Sam's parents just left for Rome."]),
    # set off by commas in the middle; a new clause after it keeps one comma
    ("We loved it, you know, the vibe was great.",
     ["Sam and others loved it, the vibe was great."]),
])
def test_fillers_leave_the_statement(text, expected):
    assert statements(text) == expected


@pytest.mark.parametrize(("text", "kept"), [
    # meaningful, not fillers
    ("I know the way to the station.", "the way to the station"),
    ("I showed Omar what I know.", "what Sam knows"),
    ("I actually liked the ending.", "liked the ending"),
])
def test_words_that_only_look_like_fillers_stay(text, kept):
    [statement] = statements(text)
    assert kept in statement


# --- content-free: a shown picture, a fan of nothing named ---------------------------------


@pytest.mark.parametrize("text", [
    "Here's a pic!",
    "Here's a pic of him.",
    "Check this out!",
    "Haha look at this, check it out!",
    "Here you go, here's a pic.",
    "Check out this pic I got a while back!",
    "I'm a huge fan.",
    "Honestly, I'm a fan too!",
    "Oops, sorry, wrong chat lol",
    "Mm, yum!",
])
def test_content_free_turns_give_no_statement(text):
    assert statements(text) == []


@pytest.mark.parametrize(("text", "expected"), [
    ("Here's a pic I snapped during one of our practices on the river.",
     ["Sam snapped a picture during one of their practices on the river."]),
    ("Here's a photo of my grandmother's garden in Seville.",
     ["Sam shared a photo of their grandmother's garden in Seville."]),
    ("Check out this photo from my trip to Kyoto!",
     ["Sam shared a photo from their trip to Kyoto."]),
    ("Here's the cake I made for my dad's birthday!",
     ["Sam made the cake for their dad's birthday."]),
    ("Here's my latest painting.", ["Sam showed their latest painting."]),
    ("Here's some good news - I got the job!", ["Sam got the job."]),
    # a fan of something named stays
    ("I'm a big fan of Studio Ghibli films.", ["Sam is a big fan of Studio Ghibli films."]),
])
def test_a_shown_thing_is_what_it_shows(text, expected):
    assert statements(text) == expected


def test_a_toast_and_a_what_are_not_shown_things() -> None:
    assert not any("showed" in s or "shared" in s
                   for s in statements("Here's to new beginnings at the studio."))
    assert not any("showed" in s or "shared" in s
                   for s in statements("There's a new bakery near my flat."))


def test_emoji_and_doubled_words_leave_the_statement() -> None:
    assert statements("I finished my first marathon \U0001F4AA") == [
        "Sam finished their first marathon."]
    assert statements("They offer a a bunch of classes, like yoga.") == [
        "Sam said they offer a bunch of classes, like yoga."]


def test_object_and_subject_names_that_meet_are_kept_apart() -> None:
    assert statements("It keeps reminding me I'm not alone.") == [
        "Sam said it keeps reminding Sam that Sam is not alone."]
