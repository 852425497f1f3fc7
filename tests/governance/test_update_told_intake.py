"""Intake reads the whole message a claim came from (issue 33 item 1): a change the
message tells in one sentence reaches a claim of another sentence that names no value,
as a contradiction that reads settle (newer first, the older marked)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from knowledge.models import Relation
from memhouse.core.tenancy import account_context
from tests.governance.test_intake_quality import T0, post, rows
from tests.governance.test_read_time_conflicts import assert_newer_first, contradiction

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_change_told_across_two_sentences_marks_the_older_claim(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "I'm a vegetarian.")
    post(live_server, keys.alice, "Ate my first steak in years today. No more lentils every night!",
         at=T0 + timedelta(days=1))
    old, new = contradiction(committed_world, "vegetarian", "steak")
    assert (old.state, new.state) == ("active", "active")
    assert_newer_first(live_server, keys.alice, "Does Alice eat meat?", old, new)


def test_the_same_claim_without_a_change_told_links_nothing(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "I'm a vegetarian.")
    post(live_server, keys.alice, "Ate a steak at the barbecue today.",
         at=T0 + timedelta(days=1))
    assert rows(committed_world, "steak")
    with account_context(committed_world.account.id):
        assert not Relation.objects.filter(type="contradicts").exists()


def test_an_older_message_arriving_late_is_retired_by_the_newer_giving_it_up(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    # the newer message first, the older one (said a day earlier) after it
    post(live_server, keys.alice, "Cancelled my Harbor Climbing membership, way too pricey.",
         at=T0 + timedelta(days=1))
    post(live_server, keys.alice, "I climb at Harbor Climbing three times a week.")
    late = rows(committed_world, "three times a week")[0]
    assert (late.state, late.state_reason) == ("superseded", "f4_late_arrival")


def test_an_older_message_arriving_late_is_marked_by_the_newer_telling_a_change(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "Ate my first steak in years today. No more lentils!",
         at=T0 + timedelta(days=1))
    post(live_server, keys.alice, "I'm a vegetarian.")
    contradiction(committed_world, "vegetarian", "steak")
