"""The extraction benchmark (bench/extraction.py): the shipped gold set is valid and
covers the brief; matching and metrics on tiny hand-made inputs whose answers were worked
out by hand; a smoke run of the command on five gold turns (real extractor, real
embedder, no LLM provider configured)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench import extraction as ex

FAILURE_CLASSES = ("pronoun_prev_turn", "here_there", "that_name", "two_claims",
                   "date_is_claim", "until", "employer_hospital", "health", "advice",
                   "reported_speech", "chitchat")


def _gold() -> dict[str, Any]:
    return json.loads(Path(ex.DEFAULT_DATASET).read_text())


def _claim(subject: str | None, statement: str, **extra: Any) -> dict[str, Any]:
    return {"subject": subject, "statement": statement, "kind": extra.pop("kind", "fact"),
            "sensitivity": extra.pop("sensitivity", "internal"),
            "valid_from": extra.pop("valid_from", None),
            "valid_until": extra.pop("valid_until", None), **extra}


def test_shipped_gold_set_is_valid_balanced_and_covers_the_failure_classes():
    data = _gold()
    assert ex.validate_gold(data) == []
    counts = ex.gold_counts(data)
    assert counts["turns"] >= 200
    for source in ex.SOURCES:
        assert counts["by_source"][source] >= 45, source
    assert abs(counts["by_split"]["a"] - counts["by_split"]["b"]) <= 2
    for cls in FAILURE_CLASSES:
        assert counts["by_class"].get(cls, 0) >= 3, cls
    assert counts["turns_without_claims"] >= 30
    assert counts["date_is_claim"] >= 15 and counts["with_valid_time"] >= 30
    # LoCoMo turns come from all five dev conversations and hold no copied text
    locomo = [t for t in data["turns"] if t["source"] == "locomo"]
    assert len({t["locomo"]["sample_id"] for t in locomo}) == 5
    assert all("text" not in t for t in locomo)


def test_validator_names_each_broken_rule():
    bad = copy.deepcopy(_gold())
    chat = next(t for t in bad["turns"] if t["source"] == "everyday" and t["claims"])
    chat["claims"][0]["subject"] = "nobody"
    chat["claims"][0]["kind"] = "opinion"
    chat["claims"][0]["valid_from"] = "2026-03-05"
    chat["claims"][0]["valid_until"] = "2026-03-04"
    chat["split"] = "z"
    doc = next(t for t in bad["turns"] if t["source"] == "document")
    doc["speaker"] = "dana"
    problems = "\n".join(ex.validate_gold(bad))
    assert "subject 'nobody' is not a peer of the group" in problems
    assert "kind must be one of" in problems
    assert "valid_from must be before valid_until" in problems
    assert f"turn {chat['id']}: split must be one of {', '.join(ex.SPLITS)}" in problems
    assert f"turn {doc['id']}: a document has no speaker" in problems


def test_date_forms_and_referents_are_whole_words_after_normalising():
    assert ex.contains_form("The launch slipped to March 23rd.", ["March 23"])
    assert ex.contains_form("Lena switched to the 7 am class.", ["7am"])
    assert not ex.contains_form("The launch slipped to.", ["March 23", "23 March"])
    assert not ex.contains_form("Room 230 is free.", ["23"])
    assert ex.mentions_all("Nate said he feeds his turtles.", ["turtle"])
    assert ex.mentions_all("Ana's cat hides.", ["Biscuit|cat"])
    assert not ex.mentions_all("Ana Ruiz said she hides.", ["Biscuit|cat"])
    assert not ex.mentions_all("Ana's bobcat hides.", ["cat"])  # a word prefix, not a substring


def test_greedy_matching_is_one_to_one_highest_cosine_first_and_checks_subjects():
    gold = [_claim("ana", "A"), _claim("ana", "B", alt_subjects=["ben"])]
    pred = [_claim("ana", "P"), _claim("ben", "Q")]
    sims = [[0.90, 0.80],
            [0.85, 0.65]]
    # (0,0) 0.90 first; (1,0) 0.85 and (0,1) 0.80 reuse a side; (1,1) 0.65 is free and
    # ben is an accepted subject of B
    assert ex.greedy_match(gold, pred, sims, 0.6) == [(0, 0, 0.9), (1, 1, 0.65)]
    assert ex.greedy_match(gold, pred, sims, 0.7) == [(0, 0, 0.9)]
    gold[1]["alt_subjects"] = []
    assert ex.greedy_match(gold, pred, sims, 0.6) == [(0, 0, 0.9)]
    assert ex.greedy_match(gold, pred, sims, 0.6, use_subject=False) == [(0, 0, 0.9),
                                                                          (1, 1, 0.65)]


def test_precision_recall_f1_by_hand():
    assert ex.prf(2, 4, 3) == {"precision": 0.6667, "recall": 0.5, "f1": 0.5714}
    assert ex.prf(0, 3, 2) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert ex.prf(0, 0, 0) == {"precision": None, "recall": None, "f1": None}


def test_valid_time_is_compared_by_utc_day():
    gold = _claim("ana", "x", valid_from="2026-03-05", valid_until="2026-03-06")
    same = {"valid_from": datetime(2026, 3, 5, tzinfo=UTC),
            "valid_until": datetime(2026, 3, 6, tzinfo=UTC)}
    tonight = {"valid_from": datetime(2026, 3, 5, 18, tzinfo=UTC),
               "valid_until": datetime(2026, 3, 7, 6, tzinfo=UTC)}
    assert ex.valid_time_equal(gold, same)
    assert not ex.valid_time_equal(gold, tonight)
    assert ex.valid_time_equal(_claim("ana", "x"), {"valid_from": None, "valid_until": None})
    assert not ex.valid_time_equal(_claim("ana", "x"), same)


def test_one_turn_scored_and_summarised_by_hand():
    turn = {"id": "t1", "source": "work", "split": "a", "classes": ["date_is_claim"],
            "claims": [
                _claim(None, "The launch slipped to March 23.", claim_date=["March 23"],
                       alt_subjects=["dana"]),
                _claim("dana", "Dana is out of the office.", valid_from="2026-03-04",
                       valid_until="2026-03-07", must_mention=["office"]),
                _claim("dana", "Dana was diagnosed with asthma.", sensitivity="personal"),
            ]}
    pred = [
        _claim("dana", "Dana said the launch slipped to.", valid_from="2026-03-23",
               valid_until="2026-03-24"),
        _claim("dana", "Dana is out.", valid_from="2026-03-04", valid_until="2026-03-07"),
        _claim("raj", "Raj was diagnosed with asthma.", sensitivity="internal"),
        _claim("dana", "Dana likes tea.", kind="preference"),
    ]
    sims = [[0.80, 0.10, 0.10, 0.00],
            [0.10, 0.75, 0.20, 0.10],
            [0.10, 0.20, 0.70, 0.10]]
    row = ex.score_turn(turn, pred, sims, 0.6)
    # the launch (speaker accepted) and the absence match; the asthma claim is on the
    # wrong subject, so it is missed and counted as a wrong subject
    assert [(g, p) for g, p, _ in row["pairs"]] == [(0, 0), (1, 1)]
    assert row["subject_pairs"] == 3 and row["subject_right"] == 2
    assert row["subject_exact"] == 1  # only "Dana is out" sits on the gold subject itself
    assert (row["date_claims"], row["date_matched"], row["date_kept"]) == (1, 1, 0)
    assert (row["mention_claims"], row["mention_kept"]) == (1, 0)
    assert (row["vt_pairs"], row["vt_right"]) == (2, 1)  # the launch got a window it lacks
    out = ex.summarise([row, {**row, "gold": 0, "pred": 0, "matched": 0, "pairs": [],
                              "subject_pairs": 0, "subject_right": 0, "subject_exact": 0,
                              "date_claims": 0, "date_matched": 0, "date_kept": 0,
                              "mention_claims": 0, "mention_kept": 0, "vt_pairs": 0,
                              "vt_right": 0, "vt_all_right": 0, "kind_right": 0,
                              "sensitivity": [], "kind": []}])
    assert (out["precision"], out["recall"], out["f1"]) == (0.5, 0.6667, 0.5714)
    assert out["subject_accuracy"] == 0.6667 and out["wrong_subject"] == 1
    assert out["subject_exact_rate"] == 0.3333
    assert out["date_is_claim"]["kept_rate"] == 0.0
    assert out["valid_time"]["accuracy"] == 0.5
    assert out["valid_time"]["accuracy_all_matched"] == 0.5
    assert out["sensitivity_confusion"]["internal"]["internal"] == 2
    assert sum(sum(r.values()) for r in out["sensitivity_confusion"].values()) == 2
    assert out["no_claim_turns"] == {"n": 1, "silent": 1, "silent_rate": 1.0}


def test_addressee_follows_the_pipeline_rule():
    turn = {"speaker": "ana", "context": [{"speaker": "ben"}, {"speaker": "ana"}]}
    assert ex.addressee(turn) == "ben"
    assert ex.addressee({"speaker": "ana", "context": []}) is None
    group = {"speaker": "ana", "context": [{"speaker": "ben"}, {"speaker": "lena"}]}
    assert ex.addressee(group) is None


@pytest.fixture
def five_turns(tmp_path: Path) -> Path:
    data = _gold()
    wanted = ["e1-04", "e4-04", "w1-01", "doc-01", "doc-29"]
    data["turns"] = [t for t in data["turns"] if t["id"] in wanted]
    assert len(data["turns"]) == 5
    path = tmp_path / "gold5.json"
    path.write_text(json.dumps(data))
    return path


def test_smoke_run_on_five_gold_turns(five_turns: Path, tmp_path: Path, settings: Any):
    settings.MEMHOUSE_LLM_BASE_URL = ""
    out_path = tmp_path / "out.json"
    assert ex.main(["--dataset", str(five_turns), "--out", str(out_path),
                    "--locomo", str(tmp_path / "absent.json")]) == 0
    out = json.loads(out_path.read_text())
    assert out["gold"]["turns"] == 5 and out["gold"]["claims"] == 5
    assert out["extractors"]["llm"] == {
        "skipped": "no model provider configured (MEMHOUSE_LLM_BASE_URL is empty)"}
    rules = out["extractors"]["rules"]
    assert rules["extractor"].startswith("rule-based/")
    overall = rules["overall"]
    assert overall["turns"] == 5 and overall["gold_claims"] == 5
    assert overall["matched"] <= min(overall["gold_claims"], overall["predicted_claims"])
    assert set(rules["by_source"]) == {"everyday", "work", "document"}
    assert set(rules["predictions"]) == {"e1-04", "e4-04", "w1-01", "doc-01", "doc-29"}
    assert overall["no_claim_turns"]["n"] == 1  # the copyright line


def test_gold_claims_as_predictions_score_perfectly():
    """The oracle: every metric is 1 when the prediction is the gold set itself (real
    embedder; identical statements have cosine 1)."""
    ex._setup()
    data = _gold()
    data["turns"] = [t for t in data["turns"] if t["source"] != "locomo"][:40]
    predicted = {t["id"]: [{k: c[k] for k in ("subject", "statement", "kind", "sensitivity",
                                              "valid_from", "valid_until")}
                           for c in t["claims"]] for t in data["turns"]}
    sims = ex.similarities(data, predicted)
    rows = [ex.score_turn(t, predicted[t["id"]], sims[t["id"]], ex.DEFAULT_THRESHOLD)
            for t in data["turns"]]
    out = ex.summarise(rows)
    assert out["gold_claims"] > 20
    assert (out["precision"], out["recall"], out["f1"]) == (1.0, 1.0, 1.0)
    assert out["subject_accuracy"] == 1.0 and out["kind_accuracy"] == 1.0
    assert out["date_is_claim"]["n"] == 0 or out["date_is_claim"]["kept_rate"] == 1.0
    assert out["valid_time"]["accuracy"] == 1.0 and out["sensitivity_accuracy"] == 1.0
