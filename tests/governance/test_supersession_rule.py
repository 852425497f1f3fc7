"""The model-free update rule on statements as the extractor writes them (the real
default embedder decides closeness): pairs that are updates, and pairs that must coexist."""

from __future__ import annotations

import pytest

from governance.intake.supersession import best_update, is_candidate, single_slots

NAMES = frozenset({"sam"})

UPDATES = [
    ("Sam's dentist appointment is on Tuesday at 10.",
     "The dentist moved Sam's appointment to Thursday at 4."),
    ("Sam lives in Denver.", "Sam moved to Austin."),
    ("Sam works at Google.", "Sam started a new job at Stripe."),
    ("Sam is vegetarian.", "Sam went vegan."),
    ("Sam's favorite band is Radiohead.", "Sam's favorite band is now Arcade Fire."),
    ("Sam's phone number is 555-123-4567.", "Sam's new number is 555-987-6543."),
    ("Sam drives a Honda Civic.", "Sam drives a Tesla now."),
    ("Sam is single.", "Sam is engaged."),
    ("Sam's flight to Paris is on Friday.", "Sam's flight got pushed to Saturday."),
    ("Sam's therapist is Dr. Nguyen.", "Sam's therapist is Dr. Patel now."),
    ("Sam's car insurance is with Geico.", "Sam switched Sam's car insurance to Progressive."),
    ("Sam is allergic to cats.", "Turns out Sam is not allergic to cats."),
    ("Sam has two cats.", "Sam has three cats now."),
    ("Sam's rent is $1,800 a month.", "Sam's rent went up to $1,950 a month."),
    ("Sam said the deadline for the grant is May 1.",
     "Sam said the grant deadline was extended to May 15."),
    # Giving something up retires what named it.
    ("Sam rides a Vespa to work.", "Sam sold the Vespa."),
    ("Sam uses Notion for notes.", "Sam switched from Notion to Obsidian."),
    ("Sam keeps recipes in Evernote.", "Sam moved all Sam's recipes from Evernote to Paprika."),
    ("Sam sings in the Harbor Choir.", "Sam quit the Harbor Choir last month."),
    # A change stated by what it changed to, or with "now".
    ("Sam's team uses Python 3.9.", "Sam's team upgraded to Python 3.12."),
    ("Sam is on the basic tier.", "Sam moved up to the pro tier."),
    ("Sam said the kickoff venue is Hall B.", "Sam said the kickoff venue moved to Hall D."),
    ("Sam said the hiring budget is $90k.", "Sam said the hiring budget was cut to $60k."),
    # A polarity change inside a longer sentence.
    ("Sam is lactose intolerant.",
     "The new test came back and Sam is not lactose intolerant."),
]

COEXIST = [
    ("Sam likes hiking.", "Sam likes painting."),
    ("Sam has a meeting with Bob on Tuesday.", "Sam has a meeting with Ann on Friday."),
    ("Sam went to a support group.", "Sam joined a new activist group."),
    ("Sam's dog is old.", "Sam's dog is cute."),
    ("Sam lives in Denver.", "Sam lives in Denver, Colorado."),
    ("Sam's family is Sam's motivation.", "Sam's family is awesome - Sam, the missus, the kids."),
    ("Sam loves creating art.", "Sam is game for trying new art."),
    # Someone else's attribute is not Sam's.
    ("Sam lives in Denver.", "Sam's brother lives in Austin."),
    ("Sam's manager is Ana Ruiz.", "Ana Ruiz's manager is Joe Kim."),
    ("Sam's favorite color is green.", "Sam's wife's favorite color is blue."),
    ("Sam's home airport is SFO.", "Sam's parents' home airport is Boston Logan."),
    ("Sam is on the night shift.", "Sam's roommate is on the day shift."),
    # Abstaining from one thing says nothing about a diet.
    ("Sam is vegan.", "Sam doesn't drink coffee."),
    # An indefinite place names no new home.
    ("Sam moved to Denver.", "Sam moved into a bigger apartment."),
    # Additions and finished events are not replaced.
    ("Sam leads the data team.", "Sam is now also mentoring two interns."),
    ("Sam visited Chicago in May.", "Sam is training for the Boston marathon instead."),
    ("Sam moved the standup to Monday.", "Sam moved the dentist visit to Friday."),
    ("Sam won't quit the band.", "Sam won't quit the band."),
    ("Sam is going to keep the old car.", "Sam won't sell the old car."),
]


@pytest.mark.parametrize(("old", "new"), UPDATES)
def test_an_update_replaces_the_older_statement(old: str, new: str) -> None:
    assert is_candidate(new)
    assert best_update(new, [old], names=NAMES) is not None


@pytest.mark.parametrize(("old", "new"), COEXIST)
def test_different_facts_coexist(old: str, new: str) -> None:
    assert best_update(new, [old], names=NAMES) is None


def test_the_rule_works_both_ways_for_a_late_arrival() -> None:
    # The stored row carries the change wording; the late claim is the older one.
    assert best_update("Sam's flight to Paris is on Friday.",
                       ["Sam's flight got pushed to Saturday."], names=NAMES) is not None


def test_a_commute_read_with_the_pronoun_the_extractor_writes() -> None:
    # The extractor writes "their" for a possessive that points back at the subject.
    old = "Sam commutes by bus, the 38 line."
    assert single_slots("Sam rides their bike to work.") == {"commute": "rides their bike"}
    assert best_update("Sam rides their bike to work.", [old], names=NAMES) is not None


def test_values_are_read_from_attribute_frames() -> None:
    assert single_slots("Omar Haddad's son goes to Lincoln Elementary.") == {
        "school": "lincoln elementary"}
    assert single_slots("Sam is seeing Dr. Okonkwo as Sam's GP going forward.") == {
        "has:gp": "dr okonkwo"}
    assert single_slots("Sam said as of Monday the Atlas migration lead is Kofi.") == {
        "lead:atlas migration": "kofi"}
