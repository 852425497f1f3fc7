"""The retrieval benchmark's metric functions on small hand-made rankings, each expected
value worked out by hand in the comment above it (no database, no model)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bench import common
from bench.retrieval import RecallTable, choose, question_scores

# log2(3) = 1.58496, log2(4) = 2, log2(5) = 2.32193
L3, L5 = math.log2(3), math.log2(5)


def test_sessions_of_items():
    assert common.session_of("D3:12") == 3
    assert common.session_of("D10:1") == 10
    assert common.item_sessions([{"D1:2", "D4:1"}, set(), {"D2:7"}]) == [{1, 4}, set(), {2}]


def test_session_recall_any_and_all():
    # evidence sessions {1, 3}; items' sessions: 2 | 1 | 1,4 | 3
    ranked = [{2}, {1}, {1, 4}, {3}]
    assert common.recall_any({1, 3}, ranked, 1) == 0.0
    assert common.recall_any({1, 3}, ranked, 2) == 1.0  # session 1 at item 2
    assert common.recall_all({1, 3}, ranked, 3) == 0.0  # session 3 only at item 4
    assert common.recall_all({1, 3}, ranked, 4) == 1.0
    assert common.recall_any({9}, ranked, 10) == 0.0
    # turn-level share: one of two evidence turns in the top 2
    assert common.recall_share({"D1:1", "D3:1"}, [{"D2:1"}, {"D1:1", "D1:2"}], 2) == 0.5


def test_sessions_dedup_keeps_first_seen_order_and_cuts_at_items():
    ranked = [{2}, {1, 4}, {1}, {3, 6}, {7}, {5}]
    assert common.sessions_dedup(ranked, 10) == [2, 1, 4, 3, 6, 7, 5]
    assert common.sessions_dedup(ranked, 2) == [2, 1, 4]


def test_headline_differs_from_item_level_any_at_5():
    # Evidence in session 5, held by the 5th item. By items: a hit at k=5. Deduplicated to
    # sessions, the top 10 items give 2,1,4,3,6,7,5: session 5 is 7th, a miss at 5.
    ranked = [{"D2:1"}, {"D1:1", "D4:1"}, {"D3:1"}, {"D6:1"}, {"D5:9"}, {"D7:1"}]
    s = question_scores(["D5:9"], ranked)
    assert s["session_recall_any_at_5"] == 1.0
    assert s["session_recall_any_at_5_dedup10"] == 0.0
    assert s["recall_at_5"] == 1.0


def test_ndcg_binary_first_hit():
    # relevant a, b found at ranks 2 and 4: DCG = 1/log2(3) + 1/log2(5) = 1.06160,
    # IDCG = 1 + 1/log2(3) = 1.63093 -> 0.65092
    assert common.ndcg({"a", "b"}, [{"x"}, {"a"}, {"y"}, {"b"}], 10) == pytest.approx(
        (1 / L3 + 1 / L5) / (1 + 1 / L3))
    assert common.ndcg({"a", "b"}, [{"x"}, {"a"}, {"y"}, {"b"}], 10) == pytest.approx(
        0.65092, abs=1e-5)
    # a repeated at rank 2 earns nothing again: DCG = 1 + 1/log2(4) = 1.5 -> 0.91972
    assert common.ndcg({"a", "b"}, [{"a"}, {"a"}, {"b"}], 10) == pytest.approx(0.91972,
                                                                            abs=1e-5)
    # perfect order, and one statement holding both evidence turns (DCG 2 > IDCG): 1
    assert common.ndcg({"a", "b"}, [{"a"}, {"b"}], 10) == 1.0
    assert common.ndcg({"a", "b"}, [{"a", "b"}], 10) == 1.0
    # a hit below k counts nothing
    assert common.ndcg({"a"}, [{"x"}] * 10 + [{"a"}], 10) == 0.0
    # more relevant units than k: IDCG over k ranks only, so a full top k scores 1
    assert common.ndcg(set("abc"), [{"a"}, {"b"}], 2) == 1.0
    with pytest.raises(ValueError):
        common.ndcg(set(), [{"a"}], 10)


def test_rrf_k60_by_hand():
    # a: 1/61 + 1/62 = 0.032522; c: 1/63 + 1/61 = 0.032266; b: 1/62; d: 1/63
    assert common.rrf([["a", "b", "c"], ["c", "a", "d"]], k=60) == ["a", "c", "b", "d"]
    # equal scores: best single rank, then first seen (x before z, both rank 1)
    assert common.rrf([["x", "y"], ["z"]], k=1) == ["x", "z", "y"]
    # a duplicate does not take a rank: with k=0, a = c = 1/1; b is rank 2 of the first
    # list (1/2), tying d (1/2), b seen first. Were b rank 3 (1/3) it would fall below d.
    assert common.rrf([["a", "a", "b"], ["c", "d"]], k=0) == ["a", "c", "b", "d"]
    assert common.rrf([], k=60) == []


def test_question_scores_and_table_by_hand():
    table = RecallTable()
    # q1: evidence D1:2 (session 1) and D3:1 (session 3); the statement at rank 2 holds D1:2,
    # the one at rank 6 holds D3:1.
    ranked = [{"D2:5"}, {"D1:2", "D1:3"}, set(), {"D2:1"}, {"D2:2"}, {"D3:1"}]
    s = question_scores(["D1:2", "D3:1"], ranked)
    assert s["recall_at_5"] == 0.5 and s["recall_at_10"] == 1.0
    assert s["session_recall_any_at_5"] == 1.0
    assert s["session_recall_all_at_5"] == 0.0 and s["session_recall_all_at_10"] == 1.0
    # turn NDCG: hits at ranks 2 and 6 -> (1/log2(3) + 1/log2(7)) / (1 + 1/log2(3))
    assert s["ndcg_at_10"] == pytest.approx((1 / L3 + 1 / math.log2(7)) / (1 + 1 / L3))
    # session NDCG: session 1 first at rank 2, session 3 at rank 6: the same value
    assert s["session_ndcg_at_10"] == pytest.approx(s["ndcg_at_10"])
    # dedup: sessions 2, 1, 3 -> session 1 is among the first 5
    assert s["session_recall_any_at_5_dedup10"] == 1.0
    table.add("1", ["D1:2", "D3:1"], ranked, "conv-a")
    table.add("4", ["D9:9"], ranked, "conv-b")  # nothing found
    out = table.summary()
    assert out["recall_at_5"] == {"overall": 0.25, "1": 0.5, "2": None, "3": None, "4": 0.0}
    assert out["session_recall_any_at_5"]["overall"] == 0.5
    assert out["questions"] == {"overall": 2, "1": 1, "2": 0, "3": 0, "4": 1}
    assert table.summary({"conv-b"})["recall_at_10"]["overall"] == 0.0


def test_choose_picks_on_the_training_mask_and_prefers_shipped_on_ties():
    # three questions: conv A, A, B. p1 is best on A, p2 on B; held-out B trains on A.
    p0, p1, p2 = "shipped", "p1", "p2"
    scores = {p0: np.array([0.5, 0.5, 0.5]), p1: np.array([1.0, 0.5, 0.0]),
              p2: np.array([0.0, 0.0, 1.0])}
    conv = np.array(["A", "A", "B"])
    points = [p0, p1, p2]
    assert choose(points, scores, conv != "B", p0) == p1  # mean on A: 0.5, 0.75, 0.0
    assert choose(points, scores, conv != "A", p0) == p2  # mean on B: 0.5, 0.0, 1.0
    # everything: 0.5, 0.5, 0.333 -> tie between shipped and p1 goes to shipped
    assert choose(points, scores, np.ones(3, dtype=bool), p0) == p0
    with pytest.raises(ValueError):
        choose(points, scores, np.zeros(3, dtype=bool), p0)


def test_a_shared_image_joins_its_turn_only_when_asked(tmp_path):
    sample = {"sample_id": "conv-x", "qa": [], "conversation": {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "Look at my new bike!",
             "blip_caption": "a photo of a red bicycle leaning on a fence"},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Nice one."},
            {"speaker": "Ben", "dia_id": "D1:3", "text": "", "blip_caption": "a photo of a cat"},
        ]}}
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    plain = [t.text for t in common.load_locomo(path)[0].turns]
    assert plain == ["Look at my new bike!", "Nice one.", ""]
    shown = [t.text for t in common.load_locomo(path, image_captions=True)[0].turns]
    assert shown == ["Look at my new bike! [Ana shares a photo of a red bicycle leaning on a "
                     "fence]", "Nice one.", "[Ben shares a photo of a cat]"]
