"""Updates told in everyday words (issue 33 item 1): giving something up with the thing
between verb and particle, the thing first ("... is over", "... wasn't for me"), an
inflected word for it ("left nursing" of "a nurse"), a birthday or a new home, and a
message that says something changed while its claim names no value. Statements as the
extractor writes them, the real default embedder."""

from __future__ import annotations

import pytest

from governance.intake.supersession import (
    abandoned_things,
    best_conflict,
    best_update,
    change_told,
)

NAMES = frozenset({"rosa", "rosa linde", "linde"})

SUPERSEDED = [
    ("Rosa Linde drives a Subaru Outback.", "Rosa Linde traded the Outback in."),
    ("Rosa Linde leads the billing team.", "Rosa Linde handed the billing team over to Omar."),
    ("Rosa Linde is a teacher at Hillside.", "Rosa Linde left teaching."),
    ("Rosa Linde studies at Bristol University.", "Bristol wasn't for Rosa Linde."),
    ("Rosa Linde is 41 years old.", "Rosa Linde just celebrated their 42nd birthday."),
    ("Rosa Linde lives in Porto.",
     "Rosa Linde finally got the keys to Rosa Linde's flat in Braga."),
    # a resignation, a withdrawal, a couple now, the way to the office
    ("Rosa Linde is a cashier at Marlow Foods.", "Rosa Linde handed in their notice at Marlow."),
    ("Rosa Linde's daughter goes to Brookside Primary.",
     "Rosa Linde took their daughter out of Brookside."),
    ("Rosa Linde is single.", "Rosa Linde and Theo made it official."),
    ("Rosa Linde cycles to the office.", "Rosa Linde takes the bus to the office now."),
]

NOT_UPDATES = [
    # a birthday of someone else, a home of someone else, a thing given up that the old
    # claim does not name, giving up refused
    ("Rosa Linde is 41 years old.", "Rosa Linde celebrated their son's 5th birthday."),
    ("Rosa Linde lives in Porto.", "Rosa Linde's sister Ana's flat in Braga is tiny."),
    ("Rosa Linde drives a Subaru Outback.", "Rosa Linde traded the old sofa in."),
    ("Rosa Linde is a teacher at Hillside.", "Rosa Linde would never leave teaching."),
    # "done" that ends no thing of the old claim's (LoCoMo dev)
    ("Rosa Linde knows Omar has found his peace in reading fantasy books.",
     "Rosa Linde will let Omar know once Rosa Linde is done reading it."),
]


@pytest.mark.parametrize(("old", "new"), SUPERSEDED)
def test_a_change_in_everyday_words_supersedes(old: str, new: str) -> None:
    found = best_update(new, [old], names=NAMES)
    assert found is not None and found[0] == 0


@pytest.mark.parametrize(("old", "new"), NOT_UPDATES)
def test_what_does_not_change_the_attribute_supersedes_nothing(old: str, new: str) -> None:
    assert best_update(new, [old], names=NAMES) is None


def test_the_thing_given_up_is_read_in_each_word_order() -> None:
    assert abandoned_things("Rosa Linde traded the Outback in.") == ["Outback"]
    assert abandoned_things("the gym phase is over.") == ["gym phase"]
    assert abandoned_things("Bristol wasn't for Rosa Linde.") == ["Bristol"]
    assert abandoned_things("Rosa Linde would never leave teaching.") == []


def test_a_message_that_tells_a_change_reaches_a_claim_that_names_no_value() -> None:
    old = "Rosa Linde is a vegetarian."
    new = "Rosa Linde ate their first burger."
    message = "Ate my first burger in years today. The vegetarian phase is over."
    assert best_update(new, [old], names=NAMES) is None  # the rule is not sure
    assert best_conflict(new, [old], names=NAMES) is None  # nor without the message
    assert change_told(message)
    found = best_conflict(new, [old], names=NAMES, message=message)
    assert found is not None and found[0] == 0


def test_a_told_change_never_reaches_a_described_attribute_or_far_claims() -> None:
    # "X's goal is ..." and "the store is open" are no one-value attributes of a person;
    # a claim far from the old one is about something else.
    message = "Started a new pottery class since we last talked!"
    for old, new in [
        ("Rosa Linde's goal is to give kids a loving home.",
         "Rosa Linde started a new pottery class."),
        ("Rosa Linde's online shop is open.", "Rosa Linde started a new pottery class."),
        ("Rosa Linde is married.", "Rosa Linde started a new pottery class."),
    ]:
        assert best_conflict(new, [old], names=NAMES, message=message) is None
