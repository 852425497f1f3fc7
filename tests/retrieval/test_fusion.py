from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.fusion import FusedCandidate, disagreement, fuse

# Worked example, rrf_k = 15, so the rank term is 16 / (15 + rank):
#   rank 1 -> 1, rank 2 -> 16/17, rank 3 -> 16/18.
#
# semantic (w=1.0): a 0.9, b 0.5, c 0.1 -> normalised 1, 0.5, 0
#   a: 0.95*1   + 0.05*1     = 1.0
#   b: 0.95*0.5 + 0.05*16/17 = 0.475 + 0.047058823529... = 0.522058823529...
#   c: 0.95*0   + 0.05*16/18 = 0.044444444444...
# lexical (w=0.5): b 0.3, d 0.1 -> normalised 1, 0
#   b: 1.0
#   d: 0.05*16/17 = 0.047058823529...
# entity_match (w=0.5): configured, returned nothing.
# Denominator 2.0:
#   b = (1.0*0.522058823529 + 0.5*1.0) / 2 = 0.511029411764...
#   a = 1.0 / 2                            = 0.5
#   c = 0.044444444444 / 2                 = 0.022222222222...
#   d = 0.5*0.047058823529 / 2             = 0.011764705882...
LISTS = {
    "semantic": [("a", 0.9), ("b", 0.5), ("c", 0.1)],
    "lexical": [("b", 0.3), ("d", 0.1)],
}
WEIGHTS = {"semantic": 1.0, "lexical": 0.5, "entity_match": 0.5}


def by_id(result: list[FusedCandidate]) -> dict[str, FusedCandidate]:
    return {c.id: c for c in result}


def test_worked_example_scores_and_order() -> None:
    result = fuse(LISTS, WEIGHTS)
    assert [c.id for c in result] == ["b", "a", "c", "d"]
    scores = {c.id: c.fusion_score for c in result}
    assert scores["b"] == pytest.approx(0.5110294117647059, abs=1e-12)
    assert scores["a"] == pytest.approx(0.5, abs=1e-12)
    assert scores["c"] == pytest.approx(0.0222222222222222, abs=1e-12)
    assert scores["d"] == pytest.approx(0.0117647058823529, abs=1e-12)


def test_worked_example_per_strategy_details() -> None:
    b = by_id(fuse(LISTS, WEIGHTS))["b"]
    assert set(b.strategies) == {"semantic", "lexical"}
    sem = b.strategies["semantic"]
    assert sem["raw"] == 0.5
    assert sem["normalized"] == pytest.approx(0.5, abs=1e-12)
    assert sem["rank"] == 2
    assert sem["contribution"] == pytest.approx(0.5220588235294118, abs=1e-12)
    lex = b.strategies["lexical"]
    assert lex == {"raw": 0.3, "normalized": 1.0, "rank": 1, "contribution": 1.0}


def test_default_rrf_k_is_15_and_k_changes_the_rank_term() -> None:
    default = by_id(fuse(LISTS, WEIGHTS))
    explicit = by_id(fuse(LISTS, WEIGHTS, rrf_k=15))
    assert default["c"].fusion_score == explicit["c"].fusion_score
    # rrf_k = 0: rank 3 gives 1/3, so c = 0.05/3 / 2.
    zero = by_id(fuse(LISTS, WEIGHTS, rrf_k=0))
    assert zero["c"].fusion_score == pytest.approx(0.05 / 3 / 2, abs=1e-12)


def test_absent_configured_strategy_counts_in_the_denominator() -> None:
    with_entity = by_id(fuse(LISTS, WEIGHTS))
    without_entity = by_id(fuse(LISTS, {"semantic": 1.0, "lexical": 0.5}))
    assert with_entity["a"].fusion_score == pytest.approx(0.5, abs=1e-12)
    assert without_entity["a"].fusion_score == pytest.approx(1.0 / 1.5, abs=1e-12)
    # An empty list is the same as an absent one.
    empty_list = by_id(fuse({**LISTS, "entity_match": []}, WEIGHTS))
    assert empty_list["a"].fusion_score == with_entity["a"].fusion_score
    assert "entity_match" not in empty_list["a"].strategies


def test_singleton_list_maps_to_one() -> None:
    result = fuse({"semantic": [("only", 0.0123)]}, {"semantic": 2.0})
    (candidate,) = result
    assert candidate.strategies["semantic"]["normalized"] == 1.0
    assert candidate.strategies["semantic"]["contribution"] == 1.0
    assert candidate.fusion_score == 1.0


def test_tied_list_maps_every_item_to_one() -> None:
    result = by_id(fuse({"salience": [("x", 0.3), ("y", 0.3), ("z", 0.3)]}, {"salience": 1.0}))
    assert [result[i].strategies["salience"]["normalized"] for i in "xyz"] == [1.0, 1.0, 1.0]
    # Only the rank term separates them: 0.95 + 0.05 * 16/17 for rank 2.
    assert result["y"].fusion_score == pytest.approx(0.95 + 0.05 * 16 / 17, abs=1e-12)
    assert result["x"].fusion_score > result["y"].fusion_score > result["z"].fusion_score


def test_negative_and_distance_like_scores_normalise_by_range() -> None:
    # Callers pass higher-is-better; negated distances are fine.
    result = by_id(fuse({"semantic": [("p", -0.1), ("q", -0.3), ("r", -0.5)]}, {"semantic": 1}))
    assert result["q"].strategies["semantic"]["normalized"] == pytest.approx(0.5, abs=1e-12)
    assert result["r"].strategies["semantic"]["normalized"] == 0.0


def test_rank_is_list_position_not_score_order() -> None:
    # Interleaved lanes can be non-monotone in score; position is still the rank.
    result = by_id(fuse({"semantic": [("p", 0.2), ("q", 0.8)]}, {"semantic": 1.0}))
    assert result["p"].strategies["semantic"]["rank"] == 1
    assert result["p"].strategies["semantic"]["normalized"] == 0.0
    assert result["q"].strategies["semantic"]["rank"] == 2


def test_duplicate_id_keeps_first_occurrence() -> None:
    result = by_id(fuse({"semantic": [("p", 0.9), ("q", 0.5), ("p", 0.1)]}, {"semantic": 1.0}))
    assert result["p"].strategies["semantic"]["rank"] == 1
    assert result["p"].strategies["semantic"]["raw"] == 0.9
    assert result["q"].strategies["semantic"]["normalized"] == 0.0  # range is 0.5 .. 0.9


def test_equal_scores_tie_break_on_id_regardless_of_input_order() -> None:
    # a and b mirror each other, so their scores are exactly equal.
    lists_1 = {"semantic": [("a", 1.0), ("b", 0.0)], "lexical": [("b", 1.0), ("a", 0.0)]}
    lists_2 = {"lexical": [("b", 1.0), ("a", 0.0)], "semantic": [("a", 1.0), ("b", 0.0)]}
    weights = {"semantic": 1.0, "lexical": 1.0}
    first, second = fuse(lists_1, weights), fuse(lists_2, weights)
    assert first[0].fusion_score == first[1].fusion_score
    assert [c.id for c in first] == ["a", "b"]
    assert first == second


def test_equal_scores_tie_break_on_best_rank_before_id() -> None:
    # Zero-weight strategies give exactly equal fusion scores (0) but different ranks.
    lists = {
        "semantic": [("m", 1.0)],
        "entity_match": [("z", 3.0), ("p", 2.0)],
        "temporal": [("q", 1.0)],
    }
    weights = {"semantic": 1.0, "entity_match": 0.0, "temporal": 0.0}
    result = fuse(lists, weights)
    # p sorts before q by id, but q and z are rank 1 somewhere and p only rank 2.
    assert [c.id for c in result] == ["m", "q", "z", "p"]
    assert {c.fusion_score for c in result[1:]} == {0.0}


def test_fusion_emits_a_ranked_list_even_from_bad_lists() -> None:
    result = fuse({"lexical": [("x", 1e-9), ("y", 0.0)]}, {"lexical": 1.0, "semantic": 1.0})
    assert [c.id for c in result] == ["x", "y"]


def test_weights_scale_contributions() -> None:
    lists = {"semantic": [("s", 1.0)], "lexical": [("l", 1.0)]}
    result = by_id(fuse(lists, {"semantic": 3.0, "lexical": 1.0}))
    assert result["s"].fusion_score == pytest.approx(0.75, abs=1e-12)
    assert result["l"].fusion_score == pytest.approx(0.25, abs=1e-12)


@pytest.mark.parametrize(
    ("lists", "weights", "rrf_k"),
    [
        ({"other": [("a", 1.0)]}, {"semantic": 1.0}, 15),  # list for an unconfigured strategy
        ({"semantic": [("a", 1.0)]}, {"semantic": -1.0}, 15),
        ({"semantic": [("a", 1.0)]}, {"semantic": 0.0}, 15),
        ({"semantic": [("a", 1.0)]}, {}, 15),
        ({"semantic": [("a", math.nan)]}, {"semantic": 1.0}, 15),
        ({"semantic": [("a", math.inf)]}, {"semantic": 1.0}, 15),
        ({"semantic": [("a", 1.0)]}, {"semantic": 1.0}, -1),
    ],
)
def test_invalid_input_is_rejected(
    lists: dict[str, list[tuple[str, float]]], weights: dict[str, float], rrf_k: int
) -> None:
    with pytest.raises(ValueError):
        fuse(lists, weights, rrf_k=rrf_k)


_ids = st.sampled_from([f"k{i}" for i in range(12)])
_score = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
_list = st.lists(st.tuples(_ids, _score), max_size=10)


@given(
    lists=st.dictionaries(st.sampled_from(["semantic", "lexical", "temporal"]), _list),
    weights=st.fixed_dictionaries(
        {
            "semantic": st.floats(min_value=0.01, max_value=10),
            "lexical": st.floats(min_value=0, max_value=10),
            "temporal": st.floats(min_value=0, max_value=10),
        }
    ),
    rrf_k=st.integers(min_value=0, max_value=100),
)
def test_weighted_mean_stays_in_unit_interval_and_order_is_sorted(
    lists: dict[str, list[tuple[str, float]]], weights: dict[str, float], rrf_k: int
) -> None:
    result = fuse(lists, weights, rrf_k=rrf_k)
    assert len(result) == len({cid for items in lists.values() for cid, _ in items})
    for candidate in result:
        assert 0.0 <= candidate.fusion_score <= 1.0
        for detail in candidate.strategies.values():
            assert 0.0 <= detail["normalized"] <= 1.0
            assert 0.0 < detail["contribution"] <= 1.0
    keys = [(-c.fusion_score, c.best_rank, c.id) for c in result]
    assert keys == sorted(keys)


# --- disagreement -------------------------------------------------------------------------

QUERY_DEPENDENT = {"semantic", "lexical", "entity_match", "temporal"}


def test_pairwise_overlap_is_jaccard_of_top_k() -> None:
    lists = {
        "semantic": [("a", 0.9), ("b", 0.8), ("c", 0.7)],
        "lexical": [("b", 3.0), ("c", 2.0), ("d", 1.0)],
        "salience_recency": [("z", 1.0)],
    }
    result = disagreement(lists, query_dependent=QUERY_DEPENDENT)
    assert result["pairwise_top_k_overlap"] == {
        "lexical|salience_recency": 0.0,
        "lexical|semantic": pytest.approx(2 / 4),
        "salience_recency|semantic": 0.0,
    }
    assert list(result["pairwise_top_k_overlap"]) == sorted(result["pairwise_top_k_overlap"])
    assert result["mean_overlap"] == pytest.approx((0.0 + 0.5 + 0.0) / 3)
    assert result["query_dependent_empty"] is False


def test_overlap_only_looks_at_top_k() -> None:
    lists = {
        "semantic": [("a", 3.0), ("b", 2.0), ("c", 1.0)],
        "lexical": [("a", 3.0), ("x", 2.0), ("b", 1.0)],
    }
    assert disagreement(lists, query_dependent=QUERY_DEPENDENT, k=1)["mean_overlap"] == 1.0
    assert disagreement(lists, query_dependent=QUERY_DEPENDENT, k=2)["mean_overlap"] == 1 / 3
    assert disagreement(lists, query_dependent=QUERY_DEPENDENT, k=3)["mean_overlap"] == 2 / 4


def test_single_strategy_has_no_overlap() -> None:
    result = disagreement({"semantic": [("a", 1.0)]}, query_dependent=QUERY_DEPENDENT)
    assert result["pairwise_top_k_overlap"] == {}
    assert result["mean_overlap"] is None


def test_two_empty_lists_have_undefined_overlap() -> None:
    lists: dict[str, list[tuple[str, float]]] = {
        "lexical": [],
        "entity_match": [],
        "salience_recency": [("r", 1.0)],
    }
    result = disagreement(lists, query_dependent=QUERY_DEPENDENT)
    assert result["pairwise_top_k_overlap"]["entity_match|lexical"] is None
    assert result["pairwise_top_k_overlap"]["lexical|salience_recency"] == 0.0
    assert result["mean_overlap"] == 0.0


def test_query_dependent_empty_when_every_query_dependent_strategy_found_nothing() -> None:
    lists: dict[str, list[tuple[str, float]]] = {
        "lexical": [],
        "entity_match": [],
        "salience_recency": [("r1", 0.9), ("r2", 0.5)],
    }
    assert disagreement(lists, query_dependent=QUERY_DEPENDENT)["query_dependent_empty"] is True


def test_query_dependent_empty_is_false_when_one_query_dependent_strategy_found_something() -> None:
    lists: dict[str, list[tuple[str, float]]] = {
        "lexical": [],
        "entity_match": [("e", 0.4)],
        "salience_recency": [("r1", 0.9)],
    }
    assert disagreement(lists, query_dependent=QUERY_DEPENDENT)["query_dependent_empty"] is False


def test_query_dependent_empty_is_false_when_no_query_dependent_strategy_ran() -> None:
    lists = {"salience_recency": [("r1", 0.9)]}
    assert disagreement(lists, query_dependent=QUERY_DEPENDENT)["query_dependent_empty"] is False
    assert disagreement({}, query_dependent=QUERY_DEPENDENT)["query_dependent_empty"] is False


def test_query_dependent_set_is_the_callers() -> None:
    lists: dict[str, list[tuple[str, float]]] = {"lexical": [], "semantic": [("s", 0.1)]}
    with_semantic = disagreement(lists, query_dependent={"lexical", "semantic"})
    without_semantic = disagreement(lists, query_dependent={"lexical"})
    assert with_semantic["query_dependent_empty"] is False
    assert without_semantic["query_dependent_empty"] is True


def test_disagreement_rejects_k_below_one() -> None:
    with pytest.raises(ValueError):
        disagreement({}, query_dependent=set(), k=0)
