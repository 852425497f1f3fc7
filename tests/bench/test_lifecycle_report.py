"""The bench lifecycle report: the final state distribution and the transition counts
(from -> to with reason), as a pure summary and as read from a real Account."""

from __future__ import annotations

import pytest

from bench import common
from knowledge.lifecycle import STATES, transition
from knowledge.models import Knowledge
from memhouse.core.tenancy import account_context
from tests.factories import KnowledgeFactory


def test_summary_counts_states_and_transitions():
    out = common.lifecycle_summary(
        ["active", "active", "rejected", "provisional"],
        [(None, "proposed", "f4_pipeline_proposed")] * 4
        + [("proposed", "active", "f4_gate_a_b_accepted")] * 2
        + [("proposed", "rejected", "f4_gate_a_duplicate"),
           ("proposed", "provisional", "f4_gate_a_b_deferred")])
    assert out["statements"] == 4
    assert list(out["final_state_distribution"]) == list(STATES)  # every state, in order
    assert out["final_state_distribution"]["active"] == 2
    assert out["final_state_distribution"]["rejected"] == 1
    assert out["final_state_distribution"]["superseded"] == 0
    assert out["final_state_share"]["active"] == 0.5
    assert out["transition_total"] == 8
    assert out["transitions"][0] == {"from": None, "to": "proposed",
                                     "reason": "f4_pipeline_proposed", "count": 4}
    assert out["transitions"][1] == {"from": "proposed", "to": "active",
                                     "reason": "f4_gate_a_b_accepted", "count": 2}
    assert {(t["to"], t["count"]) for t in out["transitions"][2:]} == {
        ("rejected", 1), ("provisional", 1)}


def test_summary_of_nothing_is_zeroes():
    out = common.lifecycle_summary([], [])
    assert out["statements"] == 0 and out["transition_total"] == 0
    assert set(out["final_state_share"].values()) == {0.0}


@pytest.mark.django_db
def test_report_reads_the_accounts_states_and_events(world):
    with account_context(world.account.id):
        a = KnowledgeFactory(world=world)
        b = KnowledgeFactory(world=world)
        KnowledgeFactory(world=world)
        transition(a, "active", actor="system:test", reason="f4_gate_a_b_accepted")
        transition(b, "provisional", actor="system:test", reason="f4_gate_a_b_deferred")
        transition(b, "stale", actor="system:test",
                   reason="f4_revalidation_confidence_decay", confidence=0.3)
        assert Knowledge.objects.count() == 3
    out = common.lifecycle_report(world.account.id)
    assert out["statements"] == 3
    dist = out["final_state_distribution"]
    assert (dist["proposed"], dist["active"], dist["stale"]) == (1, 1, 1)
    edges = {(t["from"], t["to"], t["reason"]): t["count"] for t in out["transitions"]}
    assert edges == {(None, "proposed", "f4_pipeline_proposed"): 3,
                     ("proposed", "active", "f4_gate_a_b_accepted"): 1,
                     ("proposed", "provisional", "f4_gate_a_b_deferred"): 1,
                     ("provisional", "stale", "f4_revalidation_confidence_decay"): 1}
    # The other Account's statements are not counted.
    world.enter(world.other_account)
    assert common.lifecycle_report(world.other_account.id)["statements"] == 0
