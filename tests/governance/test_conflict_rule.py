"""The contradiction rule (governance.intake.supersession.best_conflict) on statements as
the extractor writes them, with the real default embedder: a new value for a one-value
attribute named in words no frame knows is a contradiction for read time to settle; what
repeats, refines or adds to the old value, or is someone else's attribute, is not."""

from __future__ import annotations

import pytest

from governance.intake.supersession import best_conflict, best_update

NAMES = frozenset({"sam", "sam okafor", "okafor"})

CONFLICTS = [
    ("Sam Okafor's manager is Helen Cho.", "Tom Reyes is Sam Okafor's boss."),
    ("Sam Okafor's dentist is Dr. Patel.", "Sam Okafor has been seeing Dr. Okoye since."),
    ("Sam Okafor's favourite band is Radiohead.", "Wet Leg has taken over Sam Okafor's "
                                                  "playlists."),
    ("Sam Okafor's standup is at 9am.", "Sam Okafor said the team voted and standup slides "
                                        "to 9:30."),
    # a car named by its make: the attribute ties the pair with no shared word
    # (governance.intake.attributes)
    ("Sam Okafor drives a Honda Civic.", "Sam Okafor picked up a Mazda 3."),
]

NOT_CONFLICTS = [
    # the same value again, or a detail of it
    ("Sam Okafor works at Acme.", "Sam Okafor has been at Acme for three years."),
    ("Sam Okafor lives in Leeds.", "The farmers market in Leeds is Sam Okafor's ritual."),
    ("Sam Okafor's manager is Helen Cho.", "Helen Cho gave Sam Okafor great feedback."),
    # someone else's attribute, another attribute, an addition
    ("Sam Okafor's sister lives in Madrid.", "Sam Okafor went to Lisbon in May."),
    ("Sam Okafor works at Stripe.", "Sam Okafor's husband works at Google."),
    ("Sam Okafor's favorite restaurant is Nopa.", "Sam Okafor's favorite movie is Heat."),
    ("Sam Okafor drives a Honda Civic.", "Sam Okafor also bought a Vespa."),
    ("Sam Okafor drives a Honda Civic.", "Sam Okafor needs new tyres before winter."),
    # a description is no named value ("married"), a sentence's first word no name
    ("Sam Okafor is married.", "Sam Okafor said Family moments make life awesome."),
    # something that happened is no new value of the attribute
    ("Sam Okafor lives in Leeds.", "Sam Okafor went to Lisbon in May."),
    ("Sam Okafor drives a Honda Civic.", "Sam Okafor rented a Toyota for the trip to Spain."),
    ("Sam Okafor's favourite band is Radiohead.", "Sam Okafor saw Coldplay live last night."),
    ("Sam Okafor is 34 years old.", "Sam Okafor ran 5 miles this morning."),
    ("Sam Okafor's manager is Helen Cho.", "Sam Okafor had lunch with Tom Reyes."),
]


@pytest.mark.parametrize(("old", "new"), CONFLICTS)
def test_a_new_value_in_unfamiliar_words_is_a_contradiction(old: str, new: str) -> None:
    assert best_update(new, [old], names=NAMES) is None  # the rule is not sure
    found = best_conflict(new, [old], names=NAMES)
    assert found is not None and found[0] == 0


@pytest.mark.parametrize(("old", "new"), NOT_CONFLICTS)
def test_what_repeats_adds_to_or_is_not_the_same_attribute_is_no_contradiction(
        old: str, new: str) -> None:
    assert best_conflict(new, [old], names=NAMES) is None


def test_a_framed_claim_arriving_late_contradicts_only_rows_said_after_it() -> None:
    stored, late = "Tom Reyes is Sam Okafor's boss.", "Sam Okafor's manager is Helen Cho."
    assert best_conflict(late, [stored], names=NAMES) is None
    assert best_conflict(late, [stored], names=NAMES, said_later=frozenset({0})) is not None
