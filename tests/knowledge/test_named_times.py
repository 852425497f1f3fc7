"""knowledge.ingest.dates.named_times: the times a question names (no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from knowledge.ingest.dates import NAMED_DAY_SLACK, named_times

NOW = datetime(2026, 12, 4, 15, tzinfo=UTC)


def _d(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(("text", "windows", "months"), [
    ("When did Melanie go camping in July?", (), (7,)),
    ("What did she do in the summer?", (), (6, 7, 8)),
    ("Where did Joanna travel to in July 2022?", ((_d(2022, 7, 1), _d(2022, 8, 1)),), ()),
    ("What did John attend in June 2023?", ((_d(2023, 6, 1), _d(2023, 7, 1)),), ()),
    ("What state did she visit in summer 2021?", ((_d(2021, 6, 1), _d(2021, 9, 1)),), ()),
    ("What happened in 2022?", ((_d(2022, 1, 1), _d(2023, 1, 1)),), ()),
    ("What did X do at the end of August 2023?", ((_d(2023, 8, 21), _d(2023, 9, 1)),), ()),
    ("What did Gina find on 1 February, 2023?",
     ((_d(2023, 2, 1) - NAMED_DAY_SLACK, _d(2023, 2, 2) + NAMED_DAY_SLACK),), ()),
    ("What did we discuss last week?", ((_d(2026, 11, 23), _d(2026, 11, 30)),), ()),
    ("Who called yesterday?",
     ((_d(2026, 12, 3) - NAMED_DAY_SLACK, _d(2026, 12, 4) + NAMED_DAY_SLACK),), ()),
])
def test_named(text, windows, months):
    named = named_times(text, NOW)
    assert named.windows == windows
    assert named.months == months
    assert bool(named)


@pytest.mark.parametrize("text", [
    "Where did Melanie go camping?",
    "May I ask what Caroline painted?",  # a modal, not the month
    "Does she still drive the 2022 model?",  # a year without in/since/during
    "Did they watch Saturday Night Live?",  # a weekday without "on"
    "What has she been up to recently?",  # vague: no window
])
def test_nothing_named(text):
    assert not named_times(text, NOW)


def test_a_day_window_is_widened_by_the_slack_only():
    (start, end), = named_times("What happened on 5 May 2024?", NOW).windows
    assert end - start == timedelta(days=1) + 2 * NAMED_DAY_SLACK
    (start, end), = named_times("What happened in May 2024?", NOW).windows
    assert (start, end) == (_d(2024, 5, 1), _d(2024, 6, 1))


def test_needs_an_aware_now():
    with pytest.raises(ValueError):
        named_times("in July", datetime(2026, 12, 4))  # noqa: DTZ001 (naive on purpose)


def test_a_relative_time_beside_a_date_is_read_against_the_date():
    named = named_times("What did Maria do last weekend before April 10, 2023?", NOW)
    assert len(named.windows) == 2
    assert all(_d(2023, 3, 1) < start < end < _d(2023, 4, 15) for start, end in named.windows)
    (start, _end), = named_times("What did Maria do last weekend?", NOW).windows
    assert start > _d(2026, 11, 1)
