"""A claim's attribute ties two claims about one single-valued attribute of the same
holder with no shared word (issue 33 item 1, governance.intake.attributes): "Dev's car
is a beat-up Ford Fiesta" and "Dev got a secondhand Kia Picanto" are a contradiction
that reads settle (newer first, the older marked `possibly_outdated`). Statements as
the extractor writes them, the real default embedder; the intake over HTTP."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from governance.intake.attributes import attribute_conflict
from governance.intake.supersession import best_conflict, best_update
from knowledge.models import Relation
from memhouse.core.tenancy import account_context
from tests.governance.helpers import api
from tests.governance.test_intake_quality import SCOPE, T0, post, rows
from tests.governance.test_read_time_conflicts import assert_newer_first, contradiction

NAMES = frozenset({"rosa", "rosa linde", "linde"})

# (old, new, the new claim's message): no word of the values is shared.
CONFLICTS = [
    ("Rosa Linde's car is a beat-up Ford Fiesta.",
     "Rosa Linde got themself a secondhand Kia Picanto.",
     "RIP Fiesta, the gearbox died. Got myself a secondhand Kia Picanto."),
    ("Rosa Linde banks with Barclays.", "Rosa Linde moved all their accounts to Monzo.",
     "Moved all my accounts to Monzo over the weekend."),
    ("Rosa Linde is with Vodafone for Rosa Linde's phone.",
     "Rosa Linde ported their number over to giffgaff, way cheaper.",
     "Ported my number over to giffgaff, way cheaper."),
    ("Rosa Linde does pottery on Thursday evenings.",
     "Rosa Linde said: doing bouldering on Thursdays instead.",
     "Dropped the clay class. Doing bouldering on Thursdays instead."),
    ("Rosa Linde drives to the office every day.",
     "Rosa Linde said it's the 8:10 train for Rosa Linde now.",
     "Sold the car! It's the 8:10 train for me now."),
    ("Rosa Linde plays drums in a covers band.",
     "Rosa Linde is on bass now, and Kit from work took over the drum stool.",
     "I'm on bass now, and Kit from work took over the drum stool."),
    ("Rosa Linde's usual is a flat white.",
     "Rosa Linde said these days it's an oat cortado all the way.",
     "These days it's an oat cortado all the way."),
    ("Rosa Linde's current account is with Lloyds.",
     "Rosa Linde closed the Lloyds account and opened one with Starling.",
     "Closed the Lloyds account and opened one with Starling."),
    ("Rosa Linde said Book club meets on the first Tuesday of the month.",
     "Rosa Linde said Book club is moving to Wednesdays, Tuesdays kept clashing with netball.",
     "Book club is moving to Wednesdays, Tuesdays kept clashing with netball."),
    ("Rosa Linde is on the mobile team at work.",
     "Rosa Linde got moved over to the data platform squad in the reorg.",
     "Got moved over to the data platform squad in the reorg."),
]

NOT_CONFLICTS = [
    # another destination is no other commute; one sprint meeting is not another's network
    ("Rosa Linde takes the train to work.", "Rosa Linde takes the bus to the gym.",
     "I take the bus to the gym."),
    ("Rosa Linde said Sprint planning is on Mondays.",
     "Rosa Linde said Sprint review is on Fridays.",
     "Sprint review is on Fridays."),
    # an addition, someone else's attribute, a finished event with no change told
    ("Rosa Linde plays drums in a covers band.", "Rosa Linde also plays guitar now.",
     "I also play guitar now."),
    ("Rosa Linde drives a Toyota Yaris.", "Rosa Linde's sister drives a Kia Picanto.",
     "My sister drives a Kia Picanto."),
    ("Rosa Linde banks with Barclays.", "Rosa Linde went to a Monzo event.",
     "Went to a Monzo event."),
    # an instrument one holds several of, with no change said
    ("Rosa Linde plays the piano.", "Rosa Linde plays the violin in an orchestra.",
     "I play the violin in an orchestra."),
    # what a car did is not which car it is (LoCoMo dev)
    ("Rosa Linde's car broke down on Rosa Linde's way to work.",
     "Rosa Linde said it's been tough with car trouble and money problems.",
     "It's been tough with car trouble and money problems."),
    # "lives" the noun, "a living"
    ("Rosa Linde wants to help make their lives better.",
     "Rosa Linde is able to make a living at painting.", "I make a living at painting now."),
]


@pytest.mark.parametrize(("old", "new", "message"), CONFLICTS)
def test_one_attribute_with_another_value_is_a_contradiction(old: str, new: str,
                                                              message: str) -> None:
    assert best_update(new, [old], names=NAMES) is None  # not sure enough to supersede
    found = best_conflict(new, [old], names=NAMES, message=message)
    assert found is not None and found[0] == 0 and found[1].startswith("attr:")


@pytest.mark.parametrize(("old", "new", "message"), NOT_CONFLICTS)
def test_another_attribute_or_holder_or_an_addition_is_no_contradiction(
        old: str, new: str, message: str) -> None:
    assert best_conflict(new, [old], names=NAMES, message=message) is None


def test_the_older_claim_arriving_late_is_read_the_other_way_round() -> None:
    # the stored row (index 0) was said after the claim just placed
    found = best_conflict("Rosa Linde is with Vodafone for Rosa Linde's phone.",
                          ["Rosa Linde ported their number over to giffgaff."], names=NAMES,
                          said_later=frozenset({0}), told_later=frozenset({0}))
    assert found is not None and found[1] == "attr:phone_network"
    assert attribute_conflict("Rosa Linde banks with Barclays.",
                              "Rosa Linde moved all their accounts to Monzo.", names=NAMES,
                              old_event=True) is None  # a finished event is no state


@pytest.mark.django_db(transaction=True)
def test_a_new_bank_in_other_words_marks_the_old_one_over_http(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "I bank with Barclays.")
    post(live_server, keys.alice, "Moved all my accounts to Monzo over the weekend.",
         at=T0 + timedelta(days=1))
    old, new = contradiction(committed_world, "Barclays", "Monzo")
    assert (old.state, new.state) == ("active", "active")
    assert_newer_first(live_server, keys.alice, "Which bank is Alice with?", old, new)


@pytest.mark.django_db(transaction=True)
def test_a_read_that_finds_only_the_older_claim_shows_the_newer_one_before_it(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "I bank with Barclays.")
    post(live_server, keys.alice, "Moved all my accounts to Monzo over the weekend.",
         at=T0 + timedelta(days=1))
    old, new = rows(committed_world, "Barclays")[0], rows(committed_world, "Monzo")[0]
    r = api(live_server, keys.alice, "POST", "search",
            {"query": "Barclays", "scope": SCOPE, "limit": 1})
    assert r.status_code == 200, r.text
    # only the older claim names Barclays; the page of one shows the newer claim
    assert [c["id"] for c in r.json()["candidates"]] == [str(new.pk)]
    r = api(live_server, keys.alice, "POST", "search",
            {"query": "Barclays", "scope": SCOPE, "limit": 2})
    page = r.json()["candidates"]
    assert [c["id"] for c in page] == [str(new.pk), str(old.pk)]
    assert page[1]["possibly_outdated"] == str(new.pk)


@pytest.mark.django_db(transaction=True)
def test_an_older_car_arriving_late_is_marked_by_the_newer_one_over_http(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice,
         "RIP Fiesta, the gearbox died. Got myself a secondhand Kia Picanto.",
         at=T0 + timedelta(days=1))
    post(live_server, keys.alice, "My car's a beat-up Ford Fiesta.")
    contradiction(committed_world, "Ford Fiesta", "Picanto")


@pytest.mark.django_db(transaction=True)
def test_the_speakers_own_clause_after_someone_elses_updates_over_http(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    # item 4: "Geraint retired" is held as a claim about Geraint; "my new boss is
    # Yolanda" is the speaker's own and replaces "My boss is Geraint".
    post(live_server, keys.alice, "My boss is Geraint.")
    post(live_server, keys.alice,
         "Geraint retired last month, my new boss is Yolanda and she's great.",
         at=T0 + timedelta(days=1))
    old, new = rows(committed_world, "boss is Geraint")[0], rows(committed_world, "Yolanda")[0]
    assert new.subject_peer_id == old.subject_peer_id is not None
    assert new.state == "active"
    with account_context(committed_world.account.id):
        linked = Relation.objects.filter(source=new, target=old).exists()
    assert old.state == "superseded" or linked
