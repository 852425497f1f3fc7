"""Smoke tests of the knowledge quality benchmark's pure parts (no database, no server):
the shipped fixture is valid and balanced, value matching, the ingest order of late
arrivals, the lifecycle judgement and the summary's rates on a 4-item slice."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from bench import knowledge_quality as kq

FIXTURE = kq.DEFAULT_DATASET


def _data() -> dict:
    return json.loads(Path(FIXTURE).read_text())


def test_shipped_fixture_is_valid_and_covers_the_brief():
    data = _data()
    assert kq.validate_dataset(data) == []
    counts = kq.dataset_counts(kq.load_dataset(FIXTURE))
    assert counts["messages"] >= 70 and counts["updates"] >= 30
    assert abs(counts["junk"] - counts["keep"]) <= 0.2 * counts["messages"]
    assert counts["updates_by_case"]["late_arrival"] >= 5
    assert counts["updates_by_case"]["third_party"] >= 5
    assert counts["updates_without_cue"] >= 3
    assert len(counts["junk_categories"]) >= 10
    assert len({u["attribute"] for u in data["updates"]}) >= 20


def test_validator_names_each_broken_rule():
    data = _data()
    bad = copy.deepcopy(data)
    u = bad["updates"][0]
    u["old"]["text"] += " " + u["new_value"]          # new value in the old text
    bad["messages"][0]["text"] += " " + u["old_value"]  # a value elsewhere in the fixture
    bad["messages"][1]["label"] = "maybe"
    bad["updates"][1]["new"]["occurred_at"] = bad["updates"][1]["old"]["occurred_at"]
    problems = "\n".join(kq.validate_dataset(bad))
    assert "also in the old text" in problems
    assert f"also occurs in message {bad['messages'][0]['id']}" in problems
    assert "label must be junk or keep" in problems
    assert "new.occurred_at must be after" in problems


def test_mentions_and_value_outcome():
    assert kq.mentions("Felix's number is 555 0142.", "555-0142")
    assert kq.mentions("Ravi Menon bikes to work.", "bike")
    assert not kq.mentions("a busy day", "bus")
    assert kq.mentions("vet is Paws & Claws", "paws & claws")
    out = kq.value_outcome(["Dana has a dentist appointment on Tuesday at 10am.",
                            "Dana's appointment is now Thursday at 4pm.",
                            "unrelated"], "Tuesday at 10am", "Thursday at 4pm")
    assert out["current_first"] is False and out["stale_hidden"] is False
    assert out["first_value_rank"] == 1 and out["new_ranks"] == [2]
    # a statement naming both values is the update ("no longer the bus; the bike")
    out = kq.value_outcome(["Ravi no longer takes the bus; he rides his bike."], "bus", "bike")
    assert out["current_first"] and out["stale_hidden"]
    out = kq.value_outcome(["nothing relevant"], "bus", "bike")
    assert not out["current_first"] and out["stale_hidden"] and out["first_value_rank"] is None


def test_slice_ingest_order_and_summary():
    data = kq.load_dataset(FIXTURE, limit_messages=1, limit_updates=1)
    assert [m["label"] for m in data["messages"]] == ["junk", "keep"]
    assert sorted(u["case"] for u in data["updates"]) == sorted(kq.CASES)
    plan = kq.ingest_plan(data)
    assert [p["client_id"] for p in plan[:2]] == [f"kq:{m['id']}" for m in data["messages"]]
    late = next(u for u in data["updates"] if u["case"] == "late_arrival")
    roles = [p["role"] for p in plan if p["item"] == late["id"]]
    assert roles == ["new", "old"]  # the newer fact arrives first
    third = next(u for u in data["updates"] if u["case"] == "third_party")
    said = {p["role"]: p["speaker"] for p in plan if p["item"] == third["id"]}
    assert said["old"] == third["speaker"] and said["new"] == third["new"]["speaker"]
    assert len({p["client_id"] for p in plan}) == len(plan)

    # lifecycle judgement from rows as the ORM read would return them
    def row(i, state, text, supersedes=None, validations=(), relations=()):
        return {"id": i, "statement": text, "state": state, "state_reason": "r",
                "subject": "x", "supersedes": supersedes,
                "open_validations": list(validations), "relations": list(relations)}

    same = next(u for u in data["updates"] if u["case"] == "same_speaker")
    rows = {f"kq:{same['id']}:old": [row("o", "superseded", same["old"]["text"])],
            f"kq:{same['id']}:new": [row("n", "active", same["new"]["text"], "o")]}
    lc = kq.judge_lifecycle(same, rows)
    assert lc["old_left_use"] and lc["new_usable"] and lc["supersedes_link"]
    rows = {f"kq:{third['id']}:old": [row("o", "superseded", third["old"]["text"])],
            f"kq:{third['id']}:new": [row("n", "provisional", third["new"]["text"],
                                          validations=["confirmation:x"])]}
    assert not kq.judge_lifecycle(third, rows)["not_silently_retired"]
    rows[f"kq:{third['id']}:old"][0]["relations"] = [("contradicts", "n")]
    assert kq.judge_lifecycle(third, rows)["not_silently_retired"]

    msgs = kq.judge_messages(data, {f"kq:{data['messages'][0]['id']}":
                                    [row("j", "rejected", "junk")]})
    assert [m["ok"] for m in msgs] == [True, False]  # junk rejected; keep produced nothing
    ok = {"current_first": True, "stale_hidden": True}
    bad = {"current_first": False, "stale_hidden": True}
    updates = []
    for u in data["updates"]:
        lc = kq.judge_lifecycle(u, {})
        updates.append({"id": u["id"], "case": u["case"], "cue": u.get("cue"),
                        "attribute": u["attribute"], "search": ok,
                        "ask": bad if u["case"] == "late_arrival" else ok,
                        "lifecycle": lc})
    s = kq.summarise(msgs, updates)
    assert s["junk_rejected_rate"] == 1.0 and s["valid_kept_rate"] == 0.0
    assert s["updates"]["n"] == 2 and s["updates"]["search"]["current_first_rate"] == 1.0
    assert s["updates"]["ask"]["current_first_rate"] == 0.5
    assert s["updates_by_case"]["third_party"]["lifecycle"]["not_silently_retired_rate"] == 0
    assert s["goals_met"] is False
    fails = kq.failures(msgs, updates)
    assert {f["id"] for f in fails} >= {data["messages"][1]["id"], late["id"]}


def test_a_line_of_the_update_message_that_tells_the_change_is_passed_over_apart() -> None:
    statements = ["Kwame cancelled their Iron Temple membership.",
                  "PureGym in town is where Kwame lifts.", "Kwame trains at Iron Temple gym."]
    strict = kq.value_outcome(statements, "Iron Temple", "PureGym", [False, False, True])
    assert not strict["current_first"] and not strict["stale_hidden_or_marked"]
    both = kq.value_outcome(statements, "Iron Temple", "PureGym", [False, False, True],
                            [True, True, False])
    assert not both["current_first"]  # the strict keys are unchanged
    assert both["current_first_telling_neutral"]
    assert both["stale_hidden_or_marked_telling_neutral"]
    # the old row itself is never passed over
    unmarked = kq.value_outcome(statements, "Iron Temple", "PureGym", None,
                                [True, True, False])
    assert not unmarked["stale_hidden_or_marked_telling_neutral"]


def test_placement_checks_judge_every_row_of_the_turn() -> None:
    data = {"messages": [
        {"id": "p1", "label": "about_other", "category": "x", "speaker": "sam"},
        {"id": "p2", "label": "about_other", "category": "x", "speaker": "sam"},
        {"id": "s1", "label": "personal", "category": "x", "speaker": "sam"},
        {"id": "s2", "label": "personal", "category": "x", "speaker": "sam"}]}

    def row(state: str, subject: str | None, sensitivity: str = "internal") -> dict:
        return {"id": "r", "statement": "x", "state": state, "state_reason": "",
                "subject": subject, "sensitivity": sensitivity, "named_entity": ""}

    rows = {"kq:p1": [row("held", None), row("provisional", "alex")],
            "kq:p2": [row("held", None), row("active", "sam")],
            "kq:s1": [row("active", "sam", "personal"), row("rejected", "sam")],
            "kq:s2": [row("active", "sam", "personal"), row("active", "sam")]}
    ok = {m["id"]: m["ok"] for m in kq.judge_messages(data, rows)}
    assert ok == {"p1": True, "p2": False, "s1": True, "s2": False}
