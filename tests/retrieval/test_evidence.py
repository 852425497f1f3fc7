"""retrieval.evidence: time in words and source-turn excerpts (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from retrieval import evidence


def _d(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(("start", "end", "said", "label"), [
    (_d(2023, 5, 7), _d(2023, 5, 8), None, "7 May 2023"),  # a day
    (_d(2023, 5, 7), None, _d(2023, 5, 8), "since 7 May 2023"),
    (None, _d(2026, 6, 12), None, "until 12 June 2026"),
    (_d(2023, 5, 1), _d(2023, 6, 1), None, "May 2023"),  # a calendar month
    (_d(2022, 1, 1), _d(2023, 1, 1), None, "2022"),  # a calendar year
    (_d(2023, 5, 29), _d(2023, 6, 5), None, "29 May - 4 June 2023"),  # last week
    (_d(2023, 6, 3), _d(2023, 6, 5), None, "3 - 4 June 2023"),  # a weekend
    (_d(2022, 12, 30), _d(2023, 1, 2), None, "30 December 2022 - 1 January 2023"),
    (_d(2023, 3, 1), _d(2023, 6, 1), None, "1 March - 31 May 2023"),  # a season
    (None, None, _d(2023, 5, 8, 13, 56), "said 8 May 2023"),
    (None, None, None, None),
])
def test_when_label_renders_the_precision_stored(start, end, said, label):
    assert evidence.when_label(start, end, said) == label


def test_valid_time_wins_over_the_said_date_and_that_over_the_recorded_one():
    recorded = _d(2026, 12, 5)
    assert evidence.when_label(_d(2023, 5, 7), _d(2023, 5, 8), _d(2023, 5, 8),
                               recorded) == "7 May 2023"
    assert evidence.when_label(None, None, _d(2023, 5, 8), recorded) == "said 8 May 2023"
    assert evidence.when_label(None, None, None, recorded) == "recorded 5 December 2026"


def test_a_day_in_another_time_zone_is_the_same_instant_in_utc():
    tz = timezone(timedelta(hours=-5))
    start = datetime(2023, 5, 7, tzinfo=tz)  # 05:00 UTC
    assert evidence.when_label(start, start + timedelta(days=1)) == "7 May 2023"


def test_lost_detail_sees_names_objects_and_numbers_the_statement_dropped():
    turn = "I went to the Pride parade in Boston with 3 friends last Sunday!"
    assert evidence.lost_detail("Caroline went to a parade.", turn)
    assert not evidence.lost_detail("Caroline went to the Pride parade in Boston with 3 "
                                    "friends.", "I went to the Pride parade in Boston "
                                    "with 3 friends!")
    # chat filler and function words are no detail
    assert not evidence.lost_detail("Caroline went to a parade.",
                                    "Wow, yeah, I really went to a parade!")
    # A context line wants enough of it to be worth the characters.
    assert evidence.lost_detail("Caroline went to a parade.", turn, min_words=5)
    assert not evidence.lost_detail("Caroline went to a parade.",
                                    "I went to a parade in Boston!", min_words=5)


def test_an_excerpt_keeps_the_sentences_around_the_one_nearest_the_question():
    turn = ("Thanks so much for asking, it has been a long week with lots going on at "
            "work and at home. I finally adopted a puppy named Oscar from the shelter. "
            "He chews everything, but the kids adore him and we walk him twice a day. "
            "Anyway, how have you been lately? Anything new with the garden this spring?")
    cut = evidence.excerpt(turn, anchor="Melanie adopted a puppy.",
                           query="What is the name of Melanie's puppy?", limit=120)
    assert cut == "... I finally adopted a puppy named Oscar from the shelter. ..."
    assert len(cut) <= 120
    # Room for more: the sentence after it first, where the detail usually is.
    wider = evidence.excerpt(turn, anchor="Melanie adopted a puppy.",
                             query="What is the name of Melanie's puppy?", limit=160)
    assert wider == ("... I finally adopted a puppy named Oscar from the shelter. He chews "
                     "everything, but the kids adore him and we walk him twice a day. ...")
    assert evidence.excerpt("Short turn.", anchor="x") == "Short turn."


def test_an_excerpt_of_one_long_sentence_is_cut_at_a_word():
    turn = "word " * 100
    cut = evidence.excerpt(turn, anchor="nothing in common", limit=50)
    assert len(cut) <= 50 and cut.endswith(" ...") and "wor ..." not in cut
