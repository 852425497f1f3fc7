"""The answer-in-context benchmark's scorer and raw-turn packing (bench/answer_in_context.py)
on hand-made golds and texts whose verdicts were worked out by hand (no database, no
model)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from bench import common
from bench.answer_in_context import (
    STOP_WORDS,
    content_tokens,
    find_dates,
    found,
    gold_dates,
    judge,
    pack_lines,
    render_turn,
    sample_questions,
    stem,
    tokens,
    words,
)

# --- dates ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Caroline went to the support group on 7 May 2023.",
    "Caroline went to the support group on May 7, 2023.",
    "Caroline went there (2023-05-07).",
    "on the 7th of May, 2023",
    "[7 May 2023] Caroline: I went to a support group today",
    "on 7May, 2023",
])
def test_a_full_gold_date_is_met_in_any_format(text):
    for gold in ("7 May 2023", "May 7, 2023", "2023-05-07", "7 May, 2023"):
        assert found(gold, text), (gold, text)


@pytest.mark.parametrize("text", [
    "Caroline went to the support group on 8 May 2023.",  # another day
    "Caroline went to the support group in May 2023.",  # month and year only
    "Caroline went on 7 May 2022.",  # another year
    "On 7 May she went; in 2023 she moved.",  # day+month and year in two expressions
    "7 of the 12 people went in May 2023",  # the pieces, not a date
])
def test_a_full_gold_date_needs_that_whole_date(text):
    assert not found("7 May 2023", text)


def test_text_dates_add_iso_and_word_tokens():
    (d,) = find_dates("We met on May 7, 2023 at noon")
    assert (d.year, d.month, d.day) == (2023, 5, 7)
    assert {"7", "may", "2023", "2023-05", "2023-05-07"} <= d.tokens()
    (d,) = find_dates("the deadline 2023-05-07")
    assert "may" in d.tokens()


def test_month_year_gold_needs_month_and_year_together():
    assert found("May 2023", "She started painting on 20 May 2023.")
    assert found("May, 2023", "She started painting in May 2023.")
    assert not found("May 2023", "She may start painting in 2023.")
    assert not found("May 2023", "She started in June 2023 and finished on 3 May 2022.")


def test_year_gold_and_day_month_gold():
    assert found("2022", "Melanie painted the lake sunrise in 2022.")
    assert found("Since 2016", "[8 May 2023] Jon: we have been friends since 2016")
    assert not found("2022", "Melanie painted the lake sunrise in 2021.")
    assert found("13 August", "The concert was on 13 August 2023.")
    assert not found("13 August", "The concert was in August 2023.")


def test_the_week_before_gold():
    gold = "The week before 9 June 2023"
    reqs, rest = gold_dates(gold)
    assert [r.kind for r in reqs] == ["window"]
    assert min(reqs[0].window) == date(2023, 6, 2) and max(reqs[0].window) == date(2023, 6, 8)
    assert not rest.strip(" .")
    # the anchor date with the unit word in the same line
    assert found(gold, "[9 June 2023] Caroline: I went camping last week")
    # any full date in the 7 days before the anchor
    assert found(gold, "Caroline went camping on 4 June 2023.")
    # a week window in the text that overlaps it ("in the week of" a Monday)
    assert found(gold, "Caroline went camping in the week of 29 May 2023.")
    # the anchor without the unit word, or the unit word on another line
    assert not found(gold, "[9 June 2023] Caroline: I went camping yesterday")
    assert not found(gold, "[9 June 2023] Caroline: hi\n[1 June 2023] Mel: a week off")
    # a date outside the window
    assert not found(gold, "Caroline went camping on 9 June 2023.")
    assert not found(gold, "Caroline went camping on 1 June 2023.")


def test_the_weekday_before_gold():
    gold = "The sunday before 25 May 2023"  # 25 May 2023 is a Thursday
    (req,) = gold_dates(gold)[0]
    assert req.window == frozenset({date(2023, 5, 21)})
    assert found(gold, "Melanie ran a charity race on 21 May 2023.")
    assert found(gold, "[25 May 2023] Melanie: I ran a charity race last Sunday")
    assert not found(gold, "Melanie ran a charity race on 20 May 2023.")
    assert not found(gold, "[25 May 2023] Melanie: I ran a charity race last Saturday")


def test_other_relative_golds():
    (req,) = gold_dates("two weekends before 17 July 2023")[0]  # a Monday
    assert req.window == frozenset({date(2023, 7, 8), date(2023, 7, 9)})
    (req,) = gold_dates("first weekend of August 2023")[0]
    assert req.window == frozenset({date(2023, 8, 5), date(2023, 8, 6)})
    assert found("first weekend of August 2023", "They went on 6 August 2023.")
    assert found("first weekend of August 2023", "In August 2023 they went one weekend.")
    assert not found("first weekend of August 2023", "They went on 12 August 2023.")
    # misspelt month and missing space, as in LoCoMo's gold
    (req,) = gold_dates("the week before 21Janury, 2022")[0]
    assert req.anchor.month == 1 and req.anchor.day == 21


# --- words ------------------------------------------------------------------------------


def test_number_words_become_digits():
    assert found("two weeks", "Jon was away for 2 weeks.")
    assert found("2 weeks", "Jon was away for two weeks.")
    assert found("five years", "They have been married for 5 years.")
    assert not found("five years", "They have been married for 4 years.")
    assert words("the first time") == ["the", "1", "time"]
    assert words("her 13th birthday") == ["her", "13", "birthday"]


def test_possessives_and_punctuation_are_stripped():
    assert found("Melanie's kids", "The kids of Melanie love the beach.")
    assert found("In Melanie's slipper", "The cat slept in Melanie slippers.")
    assert found("J.K. Rowling", "Her favourite author is J.K. Rowling.")
    assert tokens("dogs' bowls") == ["dog", "bowl"]
    assert words("cook-off, ring-toss!") == ["cook", "off", "ring", "toss"]


def test_stemming_is_light_and_the_same_on_both_sides():
    assert stem("hiking") == stem("hike") == stem("hiked") == stem("hikes")
    assert stem("running") == "run"
    assert stem("cities") == stem("city")
    assert stem("movies") == stem("movie")
    assert stem("classes") == "class"
    assert stem("need") == "need" and stem("speed") == "speed"
    assert stem("bus") == "bus" and stem("his") == "his"
    assert found("painting", "Melanie paints landscapes.")


def test_two_thirds_of_the_content_tokens():
    gold = "Marley flooring, natural light, by the water"  # marley floor natural light water
    assert judge(gold, "").content == ["marley", "floor", "natural", "light", "water"]
    assert judge(gold, "").needed == 4
    assert found(gold, "a studio with Marley floors, natural light, water views")
    assert not found(gold, "a studio with Marley floors and natural stone")  # 3 of 5
    # 3 tokens: 2 are enough, 1 is not
    assert found("coconut ice cream", "She made a coconut cream pie.")
    assert not found("coconut ice cream", "She made a coconut cake.")


def test_one_token_answers_need_that_token():
    assert found("Galway", "Nate flew to Galway in July.")
    assert not found("Galway", "Nate flew to Ireland in July.")
    assert found("basketball", "Jon plays Basketball on Sundays.")


def test_stop_words_are_dropped_from_the_gold():
    assert {"the", "a", "of", "her", "and", "dont"} <= STOP_WORDS
    assert "won" not in STOP_WORDS  # "won a championship"
    assert content_tokens("The love of her family") == ["lov", "famili"]
    assert found("The love of her family", "Caroline's family gives love.")
    # an answer made only of stop words keeps them
    assert content_tokens("No") == ["no"]
    assert not found("No", "Yes, she did.")
    # a date answer's leftover stop words are not content ("In 2013")
    assert found("In 2013", "They got married in June 2013.")
    assert not found("", "anything")


def test_gold_with_text_and_date_needs_both():
    gold = "adopted a dog in May 2023"
    assert found(gold, "Audrey adopted a puppy dog on 3 May 2023.")
    assert not found(gold, "Audrey adopted a puppy dog on 3 June 2023.")
    assert not found(gold, "Audrey moved on 3 May 2023.")


# --- raw-turn packing --------------------------------------------------------------------


def _turn(dia: str, speaker: str, text: str, when: datetime) -> common.Turn:
    return common.Turn(dia, speaker, text, int(dia[1:].split(":")[0]), when)


def test_render_turn_has_the_session_date_and_speaker():
    when = common.parse_session_date("1:56 pm on 8 May, 2023")
    turn = _turn("D1:3", "Caroline", "I went to a LGBTQ support group yesterday.", when)
    assert render_turn(turn) == ("[8 May 2023] Caroline: I went to a LGBTQ support group "
                                 "yesterday.")
    turn = _turn("D2:1", "Jon", "Hi!", datetime(2023, 1, 20, 9, 0, tzinfo=UTC))
    assert render_turn(turn) == "[20 January 2023] Jon: Hi!"


def test_pack_lines_respects_the_budget_and_skips_what_does_not_fit():
    lines = ["a" * 10, "b" * 30, "c" * 5, "d" * 3]
    assert pack_lines(lines, 10) == "a" * 10
    # 10 + 1 + 5 = 16 fits; "b" (41) does not; "d" would make 20
    assert pack_lines(lines, 19) == "a" * 10 + "\n" + "c" * 5
    assert pack_lines(lines, 20) == "a" * 10 + "\n" + "c" * 5 + "\n" + "d" * 3
    assert pack_lines(lines, 4) == "d" * 3
    assert pack_lines([], 100) == ""
    for budget in (1, 7, 15, 42, 60):
        assert len(pack_lines(lines, budget)) <= budget
    # rank order is kept
    assert pack_lines(["z", "y", "x"], 100) == "z\ny\nx"


def test_a_question_sample_takes_the_same_share_of_every_conversation_in_order():
    scored = {"a": [{"q": i} for i in range(100)], "b": [{"q": i} for i in range(50)]}
    adversarial = {"a": [{"q": i} for i in range(20)], "b": [{"q": i} for i in range(10)]}
    s, adv = sample_questions(scored, adversarial, 30, seed=7)
    assert [len(s["a"]), len(s["b"]), len(adv["a"]), len(adv["b"])] == [20, 10, 4, 2]
    assert s["a"] == sorted(s["a"], key=lambda q: q["q"])  # asked in their own order
    assert sample_questions(scored, adversarial, 30, seed=7) == (s, adv)  # one sample per seed
    assert sample_questions(scored, adversarial, 30, seed=8)[0] != s
    assert sample_questions(scored, adversarial, 1000, seed=7) == (scored, adversarial)
