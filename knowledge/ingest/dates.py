"""Valid time: relative and absolute dates resolved against the observation time, shared by
the rule-based and the LLM extractor (moved out of ``rule_extractor``; the rules are in its
docstring, step 5)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import Any

from knowledge.ingest.lexicon import (
    _ED_ADJECTIVES,
    _IRREGULAR_PAST,
    _VERB_BASES,
    _WORD_SPLIT,
    _is_regular_past,
    _tidy,
)
from memhouse.core.needles import lowered, may_match, needles

__all__ = ["RELATIVE_DATE_EXPRESSIONS", "NamedTimes", "named_times", "resolve_relative_date",
           "strip_relative_dates"]

@dataclass(frozen=True)
class _Window:
    start: datetime | None
    end: datetime | None
    unit: str  # day | part | week | weekend | month | year | season | span | none


_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Chat abbreviates weekdays after last/this/next ("joined a group last Tues", "my car broke
# down last Fri"); capitalised only, since "sat", "sun" and "wed" are words ("when I last
# sat down").
_WEEKDAY_ABBREVIATIONS = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3,
                          "thurs": 3, "fri": 4, "sat": 5, "sun": 6}
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}
_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8,
    "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}

_NUM = (
    r"(?:a\s+couple\s+of|a\s+couple|couple\s+of|a\s+few|few|several|an|a|one|two|three|four|"
    r"five|six|seven|eight|nine|ten|eleven|twelve|\d{1,3})"
)
_UNIT = r"(?:day|weekend|week|month|year)s?"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_SEASON = r"(?:spring|summer|fall|autumn|winter)"
_WEEKDAY_SHORT = r"(?-i:Mon|Tues?|Wed|Thu(?:rs?)?|Fri|Sat|Sun)"

_REL_BODY = rf"""
(?:(?P<prefix>since|until|till|through|from|starting(?:\s+from)?|beginning|effective|as\s+of)\s+)?
(?:
  (?P<fixed>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|tonight
     |tomorrow|this\s+(?:morning|afternoon|evening)|last\s+night|(?:earlier|later)\s+today
     |over\s+the\s+weekend)
 |(?:(?:earlier|later|all)\s+)?(?P<rel>last|this\s+past|the\s+past|this|next)\s+
     (?P<relunit>weekend|week|month|year|{_SEASON}|{_WEEKDAY}|{_WEEKDAY_SHORT})
 |(?P<agonum>{_NUM})\s+(?P<agounit>{_UNIT})\s+(?:ago|back|earlier)
 |in\s+(?P<innum>{_NUM})\s+(?P<inunit>{_UNIT})(?:'?\s*time)?
 |(?P<vague>recently|lately|the\s+other\s+day|a\s+while\s+(?:ago|back)|some\s+time\s+ago
     |not\s+(?:too\s+|that\s+)?long\s+ago)
 |(?P<wdon>on\s+)?(?P<wd>{_WEEKDAY})(?!s|\s+(?:mornings|afternoons|evenings|nights)\b)
 |(?P<ordon>on\s+)?the\s+(?P<ord>3[01]|[12]\d|[1-9])(?:st|nd|rd|th)
     (?=\s*(?:[,.;:!?)]|$)|\s+(?:for|and|at|to|in|with|so|but|because|when|or|then|instead)\b)
)
"""
_REL = re.compile(rf"\b{_REL_BODY}(?:(?P<poss>'s)\b|\b(?!'))", re.I | re.X)
_REL_FULL = re.compile(rf"\s*{_REL_BODY}\s*", re.I | re.X)

_MONTH_TOKEN = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
)
# "the end of August", "the beginning of 2027": a part of a month or year, as early/mid/late
_PART_OF = r"(?:end|beginning|start|middle)\s+of"
_PART_OF_MODIFIER = {"end": "late", "beginning": "early", "start": "early", "middle": "mid"}
_ABS = re.compile(
    rf"""
(?:\b(?P<aprefix>[Ii]n|[Oo]n|[Ss]ince|[Uu]ntil|[Tt]ill|[Dd]uring|[Bb]y|[Ff]rom|[Bb]ack\s+in
    |[Aa]round|[Oo]f)\s+)?(?:the\s+)?
(?:
  (?P<isoy>\d{{4}})-(?P<isom>\d{{2}})-(?P<isod>\d{{2}})
 |(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{_MONTH_TOKEN})(?:,?\s+(?P<y1>(?:19|20)\d{{2}}))?
 |(?P<m2>{_MONTH_TOKEN})\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?(?![\d:])(?:,?\s+(?P<y2>(?:19|20)\d{{2}}))?
 |(?:(?P<mod>early|late|mid-?|{_PART_OF})\s*)?(?P<m3>{_MONTH_TOKEN})(?:\s+(?:of\s+)?(?P<y3>(?:19|20)\d{{2}}))?
 |(?:(?P<mody>early|late|mid-?|{_PART_OF})\s*)?(?P<y4>(?:19|20)\d{{2}})
)\b(?!')
""",
    re.X,
)
_ABS_PREFIX_REQUIRED = {"in", "since", "until", "till", "during", "by", "from", "back in",
                        "around", "of"}

_CLAIM_DATE_CONTEXT = re.compile(
    r"(?:\b(?:born|birthday|b-?day|died|passed\s+away|anniversary|founded|established|deadline"
    r"|due|expires?|expired|expiry|dated)\b(?:\W+\w+){0,3}\W*"
    r"|\b(?:is|was|are|were|'s|be|been)\s*)$",
    re.I,
)
# A date that is the value of a schedule: "is now on May 5", "got pushed to March 21",
# "leaves on May 3", "extended her stay until Wednesday". Without it the claim says
# nothing ("...got pushed to."), so the words stay; the date still bounds valid time.
# Tested on the text before the date plus the date's own preposition.
_VALUE_DATE_CONTEXT = re.compile(
    r"(?:\b(?:is|was|are|were|'s|be|been)\s+(?:(?:now|still|actually)\s+)?(?:on|at|for"
    r"|until|till)\s*"
    r"|\b(?:is|are|'s)\s+(?:now|still|actually)\s*"
    r"|\b(?:moved|pushed(?:\s+(?:back|out))?|postponed|rescheduled|delayed|slipped|slid"
    r"|extended|brought\s+forward|changed|switched|bumped|scheduled|set|booked|due)\b"
    r"(?:\W+\w+){0,4}?\W+(?:to|for|until|till|on)\s*"
    r"|\b(?:leaves|departs|lands|arrives|starts|begins|ends|opens|closes|launches|ships"
    r"|goes\s+live)\s+(?:on\s+|at\s+)?"
    # "the meetup takes place on Friday", "the album comes out on May 5", "is held on"
    r"|\b(?:happens|happen|takes\s+place|take\s+place|falls|fall|comes\s+out|come\s+out"
    r"|premieres|releases|(?:is|are|will\s+be)\s+held|kicks\s+off|wraps\s+up)\s+"
    r"(?:(?:on|at|in)\s*)?)$",
    re.I,
)
# An absolute date with no preposition of its own right after "to", "at", "for": it is the
# object of the words before ("the release is moving to May 28th", "leaving at the end of
# March"); removing it would leave "...moving to.", so it is a value, whatever the verb.
# Not for relative dates: "the shelter I volunteer at yesterday", "the parade I went to a
# few weeks ago" end a relative clause with its preposition, and the date is a frame.
# Not the second date of a range ("from April 1st to June 30th").
_DANGLING_BEFORE = re.compile(r"(?P<word>[\w']+)\s+(?:to|at|for)\s+$", re.I)
_DATE_WORD = re.compile(rf"\d+(?:st|nd|rd|th)?|{_WEEKDAY}|today|tomorrow|tonight", re.I)


def _dangling(text: str, start: int) -> bool:
    match = _DANGLING_BEFORE.search(text, 0, start)
    return match is not None and _DATE_WORD.fullmatch(match.group("word")) is None

_ENDS_WITH_PREPOSITION = re.compile(r"\b(?:on|in|at|for|to|until|till)\s*$", re.I)
_FUTURE = re.compile(
    r"\b(?:will|'ll|shall|gonna|going\s+to|plan(?:s|ning|ned)?\s+(?:to|on)|hop(?:e|es|ing)\s+to"
    r"|about\s+to|intend(?:s|ing)?\s+to|looking\s+forward|can'?t\s+wait|cannot\s+wait|upcoming"
    r"|scheduled|next|tomorrow|soon"
    # what one trains or prepares for lies ahead: "training for the half marathon in May"
    r"|(?:training|preparing|prepping|getting\s+ready)\s+for)\b",
    re.I,
)

_PROGRESSIVE = re.compile(r"'m\s+\w+ing\b|\bam\s+\w+ing\b|'re\s+\w+ing\b|\bis\s+\w+ing\b")


def _at(d: date, tz: tzinfo | None, hour: int = 0) -> datetime:
    return datetime(d.year, d.month, d.day, hour, tzinfo=tz)


def _shift_month(year: int, month: int, n: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + n
    return index // 12, index % 12 + 1


def _month_window(year: int, month: int, tz: tzinfo | None, months: int = 1) -> _Window:
    ny, nm = _shift_month(year, month, months)
    return _Window(datetime(year, month, 1, tzinfo=tz), datetime(ny, nm, 1, tzinfo=tz), "month")


def _year_window(year: int, tz: tzinfo | None, years: int = 1) -> _Window:
    return _Window(datetime(year, 1, 1, tzinfo=tz), datetime(year + years, 1, 1, tzinfo=tz),
                   "year")


def _day_window(d: date, tz: tzinfo | None, days: int = 1) -> _Window:
    return _Window(_at(d, tz), _at(d + timedelta(days=days), tz), "day" if days == 1 else "span")


def _week_window(monday: date, tz: tzinfo | None, weeks: int = 1) -> _Window:
    return _Window(_at(monday, tz), _at(monday + timedelta(weeks=weeks), tz),
                   "week" if weeks == 1 else "span")


def _weekend_window(monday: date, tz: tzinfo | None) -> _Window:
    return _Window(_at(monday + timedelta(days=5), tz), _at(monday + timedelta(days=7), tz),
                   "weekend")


def _season_window(season: str, start_year: int, tz: tzinfo | None) -> _Window:
    month = _SEASON_START[season]
    ey, em = _shift_month(start_year, month, 3)
    return _Window(datetime(start_year, month, 1, tzinfo=tz), datetime(ey, em, 1, tzinfo=tz),
                   "season")


def _count(word: str) -> int | None:
    """A number word; ``None`` means "a few/several"."""
    word = " ".join(word.lower().split())
    if word in ("a few", "few", "several"):
        return None
    if "couple" in word:
        return 2
    if word.isdigit():
        return int(word)
    return _NUMBER_WORDS[word]


def _shift_unit(local: datetime, unit: str, n: int, span: int = 1) -> _Window:
    """The calendar unit ``n`` units from the one containing ``local`` (negative = past)."""
    tz = local.tzinfo
    today = local.date()
    unit = unit.lower().rstrip("s")
    if unit == "weekend":
        monday = today - timedelta(days=today.weekday())
        start = _weekend_window(monday + timedelta(weeks=n), tz)
        if span == 1:
            return start
        last = _weekend_window(monday + timedelta(weeks=n + span - 1), tz)
        return _Window(start.start, last.end, "span")
    if unit == "day":
        return _day_window(today + timedelta(days=n), tz, span)
    if unit == "week":
        monday = today - timedelta(days=today.weekday())
        return _week_window(monday + timedelta(weeks=n), tz, span)
    if unit == "month":
        y, m = _shift_month(today.year, today.month, n)
        window = _month_window(y, m, tz, span)
        return window if span == 1 else _Window(window.start, window.end, "span")
    window = _year_window(today.year + n, tz, span)
    return window if span == 1 else _Window(window.start, window.end, "span")


def _relative_window(match: re.Match[str], local: datetime, future: bool = False) -> _Window:
    """The window of one relative expression; ``future`` says which way a bare weekday or
    day of the month points ("on Saturday" in "we adopted a cat on Saturday" is the last
    one, in "the party is on Saturday" the next one)."""
    tz = local.tzinfo
    today = local.date()
    weekday = match.group("wd")
    if weekday:
        wd = _WEEKDAYS.index(weekday.lower())
        if future:
            return _day_window(today + timedelta(days=(wd - today.weekday()) % 7 or 7), tz)
        return _day_window(today - timedelta(days=(today.weekday() - wd) % 7 or 7), tz)
    ordinal = match.group("ord")
    if ordinal:  # "on the 21st": this month's, else the next (or last) month's
        day = int(ordinal)
        for step in ((0, 1, 2) if future else (0, -1, -2)):
            y, m = _shift_month(today.year, today.month, step)
            if day > _days_in_month(y, m):
                continue
            candidate = date(y, m, day)
            if (future and candidate >= today) or (not future and candidate <= today):
                return _day_window(candidate, tz)
        return _Window(None, None, "none")
    monday = today - timedelta(days=today.weekday())
    fixed = match.group("fixed")
    if fixed:
        key = " ".join(fixed.lower().split())
        if key in ("today", "earlier today", "later today"):
            return _day_window(today, tz)
        if key == "yesterday":
            return _day_window(today - timedelta(days=1), tz)
        if key == "the day before yesterday":
            return _day_window(today - timedelta(days=2), tz)
        if key == "tomorrow":
            return _day_window(today + timedelta(days=1), tz)
        if key == "the day after tomorrow":
            return _day_window(today + timedelta(days=2), tz)
        if key == "tonight":
            return _Window(_at(today, tz, 18), _at(today + timedelta(days=1), tz, 6), "part")
        if key == "last night":
            return _Window(_at(today - timedelta(days=1), tz, 18), _at(today, tz, 6), "part")
        if key == "this morning":
            return _Window(_at(today, tz, 6), _at(today, tz, 12), "part")
        if key == "this afternoon":
            return _Window(_at(today, tz, 12), _at(today, tz, 18), "part")
        if key == "this evening":
            return _Window(_at(today, tz, 18), _at(today + timedelta(days=1), tz), "part")
        # over the weekend: Monday-Wednesday look back, Thursday-Sunday mean this one
        if today.weekday() <= 2:
            return _weekend_window(monday - timedelta(weeks=1), tz)
        return _weekend_window(monday, tz)

    rel = match.group("rel")
    if rel:
        rel = " ".join(rel.lower().split())
        unit = match.group("relunit").lower()
        if unit in _WEEKDAYS or unit in _WEEKDAY_ABBREVIATIONS:
            wd = (_WEEKDAYS.index(unit) if unit in _WEEKDAYS
                  else _WEEKDAY_ABBREVIATIONS[unit])
            if rel == "next":
                delta = (wd - today.weekday()) % 7 or 7
                return _day_window(today + timedelta(days=delta), tz)
            if rel == "this":
                return _day_window(monday + timedelta(days=wd), tz)
            delta = (today.weekday() - wd) % 7 or 7
            return _day_window(today - timedelta(days=delta), tz)
        if unit in _SEASON_START:
            return _season(rel, unit, local)
        if rel in ("the past", "this past"):
            if unit == "weekend":
                return _weekend_window(monday - timedelta(weeks=1), tz)
            end = _at(today + timedelta(days=1), tz)
            if unit == "week":
                return _Window(_at(today - timedelta(days=7), tz), end, "span")
            if unit == "month":
                y, m = _shift_month(today.year, today.month, -1)
                day = min(today.day, _days_in_month(y, m))
                return _Window(_at(date(y, m, day), tz), end, "span")
            day = min(today.day, _days_in_month(today.year - 1, today.month))
            return _Window(_at(date(today.year - 1, today.month, day), tz), end, "span")
        offset = {"last": -1, "this": 0, "next": 1}[rel]
        if unit == "weekend":
            return _weekend_window(monday + timedelta(weeks=offset), tz)
        return _shift_unit(local, unit, offset)

    agonum = match.group("agonum")
    if agonum:
        n = _count(agonum)
        unit = match.group("agounit")
        if n is None:  # a few = 2..4 units ago
            return _shift_unit(local, unit, -4, span=3)
        return _shift_unit(local, unit, -n)

    innum = match.group("innum")
    if innum:
        n = _count(innum)
        unit = match.group("inunit")
        if n is None:
            return _shift_unit(local, unit, 2, span=3)
        return _shift_unit(local, unit, n)

    return _Window(None, None, "none")  # vague


def _days_in_month(year: int, month: int) -> int:
    ny, nm = _shift_month(year, month, 1)
    return (date(ny, nm, 1) - date(year, month, 1)).days


def _season(rel: str, season: str, local: datetime) -> _Window:
    tz = local.tzinfo
    year = local.year
    if rel == "this":
        if season == "winter" and local.month <= 2:
            return _season_window(season, year - 1, tz)
        return _season_window(season, year, tz)
    if rel == "next":
        y = year - 1
        while _season_window(season, y, tz).start <= local:  # type: ignore[operator]
            y += 1
        return _season_window(season, y, tz)
    y = year
    while _season_window(season, y, tz).end > local:  # type: ignore[operator]
        y -= 1
    return _season_window(season, y, tz)


def _apply_prefix(window: _Window, prefix: str | None) -> tuple[datetime | None, datetime | None]:
    prefix = (prefix or "").lower()
    if prefix in ("since", "from", "beginning", "effective", "as of") or prefix.startswith(
            "starting"):  # "starting next week": from then on, not only that week
        return window.start, None
    if prefix in ("until", "till", "through", "by"):
        return None, window.end
    return window.start, window.end


def _local(occurred_at: datetime) -> datetime:
    if occurred_at.tzinfo is None or occurred_at.utcoffset() is None:
        raise ValueError("occurred_at must be timezone-aware")
    return occurred_at


def resolve_relative_date(
    expression: str, occurred_at: datetime
) -> tuple[datetime | None, datetime | None] | None:
    """Resolve one relative date expression against the observation time.

    Returns ``(relevant_from, relevant_until)`` (half-open, in ``occurred_at``'s time zone),
    ``(None, None)`` for a recognised expression without a window ("recently"), or ``None``
    when the expression is not recognised. Accepts every value of
    :data:`RELATIVE_DATE_EXPRESSIONS` and the other surface forms the extractor knows,
    optionally prefixed by since/from/until/till/through.
    """
    local = _local(occurred_at)
    match = _REL_FULL.fullmatch(expression.replace("_", " "))
    if match is None:
        return None
    window = _safe_window(_relative_window, match, local)
    if window is None:  # outside the calendar (year 1, 9999): recognised, no window
        return None, None
    return _apply_prefix(window, match.group("prefix"))


def _closed_expressions() -> tuple[str, ...]:
    values = [
        "today", "tonight", "this morning", "this afternoon", "this evening", "yesterday",
        "last night", "the day before yesterday", "tomorrow", "the day after tomorrow",
        "this week", "last week", "next week", "this weekend", "last weekend", "next weekend",
        "this month", "last month", "next month", "this year", "last year", "next year",
        "the past week", "the past month", "the past year",
    ]
    values += [f"last {day}" for day in _WEEKDAYS]
    values += [f"next {day}" for day in _WEEKDAYS]
    values += [f"{rel} {season}" for rel in ("last", "this", "next")
               for season in ("spring", "summer", "autumn", "winter")]
    values += ["a few days ago", "a few weeks ago", "a few months ago", "a few years ago"]
    values += ["a week ago", "a month ago", "a year ago"]
    values += [f"{n} days ago" for n in range(2, 7)]
    values += [f"{n} weeks ago" for n in range(2, 5)]
    values += [f"{n} months ago" for n in range(2, 12)]
    values += [f"{n} years ago" for n in range(2, 11)]
    values += ["in a few days", "in a week", "in a few weeks", "in a month", "in a few months"]
    values += [f"in {n} days" for n in range(2, 7)]
    values += [f"in {n} weeks" for n in range(2, 5)]
    values += ["recently"]
    return tuple(values)


#: The closed vocabulary of relative expressions offered to model-backed extractors.
RELATIVE_DATE_EXPRESSIONS: tuple[str, ...] = _closed_expressions()


@dataclass(frozen=True)
class _DateHit:
    start: int
    end: int
    window: _Window
    prefix: str | None
    part_of_claim: bool
    replacement: str | None  # None: remove the phrase (frames) / keep it (claim dates)
    value: bool = False  # part of the claim and still its valid time (a schedule's date)
    # said after the noun the hit was the possessive of: "tomorrow's opening" -> "the
    # opening on 20 June 2023" (a day is what the noun is about, and a claim may be its date)
    trail: str | None = None


def _format_window(window: _Window) -> str | None:
    start = window.start
    if start is None or window.end is None:
        return None
    if window.unit in ("day", "part"):
        return f"on {start.day} {start:%B} {start.year}"
    if window.unit == "week":
        return f"in the week of {start.day} {start:%B} {start.year}"
    if window.unit == "weekend":
        return f"on the weekend of {start.day} {start:%B} {start.year}"
    if window.unit == "month":
        return f"in {start:%B} {start.year}"
    if window.unit == "year":
        return f"in {start.year}"
    if window.unit == "season":
        for name, month in _SEASON_START.items():
            if month == start.month and name != "fall":
                return f"in {name} {start.year}"
    last = window.end - timedelta(days=1)
    return f"between {start.day} {start:%B} {start.year} and {last.day} {last:%B} {last.year}"


def _absolute_window(match: re.Match[str], local: datetime, future: bool) -> _Window | None:
    tz = local.tzinfo
    g = match.group
    if g("isoy"):
        try:
            return _day_window(date(int(g("isoy")), int(g("isom")), int(g("isod"))), tz)
        except ValueError:
            return None
    month_token = g("m1") or g("m2") or g("m3")
    if month_token:
        month = _MONTHS[month_token.lower().rstrip(".")[:3]]
        year_text = g("y1") or g("y2") or g("y3")
        day_text = g("d1") or g("d2")
        if day_text:
            day = int(day_text)
            if year_text:
                try:
                    return _day_window(date(int(year_text), month, day), tz)
                except ValueError:
                    return None
            return _infer_year_day(month, day, local, future)
        if year_text:
            window = _month_window(int(year_text), month, tz)
        else:
            window = _infer_year_month(month, local, future)
        return _modify(window, g("mod"), "month")
    year = int(g("y4"))
    return _modify(_year_window(year, tz), g("mody"), "year")


def _modify(window: _Window, modifier: str | None, unit: str) -> _Window:
    if not modifier or window.start is None:
        return window
    modifier = modifier.lower().rstrip("-")
    modifier = _PART_OF_MODIFIER.get(modifier.split()[0], modifier)
    start = window.start
    tz = start.tzinfo
    if unit == "month":
        last = _days_in_month(start.year, start.month)
        bounds = {"early": (1, 11), "mid": (11, 21), "late": (21, last + 1)}[modifier]
        first = date(start.year, start.month, bounds[0])
        return _Window(_at(first, tz), _at(first + timedelta(days=bounds[1] - bounds[0]), tz),
                       "span")
    months = {"early": (1, 5), "mid": (5, 9), "late": (9, 13)}[modifier]
    ey, em = _shift_month(start.year, months[1] - 1, 1)
    return _Window(datetime(start.year, months[0], 1, tzinfo=tz), datetime(ey, em, 1, tzinfo=tz),
                   "span")


def _infer_year_month(month: int, local: datetime, future: bool) -> _Window:
    year = local.year
    if future:
        if month < local.month:
            year += 1
    elif month > local.month:
        year -= 1
    return _month_window(year, month, local.tzinfo)


def _infer_year_day(month: int, day: int, local: datetime, future: bool) -> _Window | None:
    today = local.date()
    for year in (today.year, today.year + 1) if future else (today.year, today.year - 1):
        try:
            candidate = date(year, month, day)
        except ValueError:
            continue
        if (future and candidate >= today) or (not future and candidate <= today):
            return _day_window(candidate, local.tzinfo)
    return None


_ABS_HINT = re.compile(r"\d|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)")


def _safe_window(build: Callable[..., _Window | None], *args: Any) -> _Window | None:
    """A date window, or None when it falls outside datetime's calendar (years 1..9999):
    an observation time at either end of the range must cost the date, never raise
    (one such message would otherwise stall its whole extraction batch)."""
    try:
        return build(*args)
    except (OverflowError, ValueError):
        return None


# Every relative date names one of these words (memhouse.core.needles): most chat turns
# name none, and _REL's search over a turn costs ~35 us.
_REL_NEEDLES = needles(_REL)


def _rel_matches(text: str) -> Iterable[re.Match[str]]:
    """_REL.finditer(text), or nothing without reading the text when none of _REL's
    words is in it (exact: see memhouse.core.needles)."""
    return _REL.finditer(text) if may_match(_REL_NEEDLES, lowered(text)) else ()


def _find_dates(text: str, local: datetime) -> list[_DateHit]:
    hits: list[_DateHit] = []
    taken: list[tuple[int, int]] = []
    ahead = _points_ahead(text)
    for match in _rel_matches(text):
        if (match.group("wd") or match.group("ord")) and not (
                match.group("prefix") or match.group("wdon") or match.group("ordon")
                or _second_day(text, hits, match)):
            continue  # "Saturday Night Live", "the 3rd" of a list: no date without on/until
        prefix_word = (match.group("prefix") or "").lower()
        future = prefix_word in ("until", "till", "through") or (
            prefix_word not in ("since", "from") and ahead)
        window = _safe_window(_relative_window, match, local, future)
        if window is None:
            continue
        if _second_day(text, hits, match) and not (
                hits[-1].window.end == window.start
                or _SPAN_LINK.fullmatch(text, hits[-1].end, match.start())):
            continue  # "on Monday and Wednesday": two days, not one stretch; left as said
        claim = _CLAIM_DATE_CONTEXT.search(text, 0, match.start()) is not None
        value = not claim and _value_date(text, match.start(), match.group("prefix"))
        replacement = None
        trail = None
        if match.group("poss"):  # "during last week's game" -> "during the game"
            claim, value, replacement = False, False, "the"
            if window.unit in ("day", "part"):
                trail = _format_window(window)
        elif claim or value:
            replacement = _format_window(window)
            if replacement is None and not value:  # a vague date in a claim: leave it
                continue
            if replacement is not None and _ENDS_WITH_PREPOSITION.search(
                    text[:match.start()] + " " + (match.group("prefix") or "")):
                replacement = re.sub(r"^(?:on|in) ", "", replacement)  # "is on 7 March"
            claim = True
        hits.append(_DateHit(match.start(), match.end(), window, match.group("prefix"), claim,
                             replacement, value, trail))
        taken.append((match.start(), match.end()))
    absolute = _ABS.finditer(text) if _ABS_HINT.search(text) else ()
    future = bool(absolute) and (
        _FUTURE.search(text) is not None or _PROGRESSIVE.search(text) is not None
    )
    for match in absolute:
        if any(match.start() < e and s < match.end() for s, e in taken):
            continue
        prefix = match.group("aprefix")
        prefix_key = " ".join(prefix.lower().split()) if prefix else None
        if _unanchored(match, prefix_key):
            continue
        claim = _CLAIM_DATE_CONTEXT.search(text, 0, match.start()) is not None
        value = not claim and (_value_date(text, match.start(), prefix_key) or (
            prefix is None and _dangling(text, match.start())))
        if prefix_key == "since":
            tense_future = False
        elif prefix_key == "from":  # "from April 1st to June 30th" in an announcement
            tense_future = _points_ahead(text)
        elif prefix_key in ("until", "till", "by") or value:
            tense_future = True  # a schedule's date lies ahead
        else:
            tense_future = future
        absolute_window = _safe_window(_absolute_window, match, local, tense_future)
        if absolute_window is None:
            continue
        hits.append(_DateHit(match.start(), match.end(), absolute_window, prefix_key,
                             claim or value, None, value))
    hits.sort(key=lambda hit: hit.start)
    return _join_ranges(text, hits)


def _unanchored(match: re.Match[str], prefix_key: str | None) -> bool:
    """A bare month or year (no day, no year with the month) without "in", "since", ...
    or early/mid/late names no time: "May I ask", "the 2022 model"."""
    bare = (match.group("m3") and not match.group("y3")) or match.group("y4")
    return bool(bare) and prefix_key not in _ABS_PREFIX_REQUIRED and not (
        match.group("mod") or match.group("mody"))


def _second_day(text: str, hits: list[_DateHit], match: re.Match[str]) -> bool:
    """"on Thursday and Friday", "from Wednesday to Friday": a bare weekday right after a
    day is a date because the first one is."""
    return bool(match.group("wd") and hits and hits[-1].window.unit == "day"
                and _RANGE_LINK.fullmatch(text, hits[-1].end, match.start()))


_SPAN_LINK = re.compile(r"\s*(?:to|until|till|through|thru|-|\u2013)\s*", re.I)
_RANGE_LINK = re.compile(r"\s*(?:to|until|till|through|thru|and|-|\u2013)\s*(?:the\s+)?", re.I)
_RANGE_START = re.compile(r"\b(?:from|between)\s+(?:the\s+)?$", re.I)


def _join_ranges(text: str, hits: list[_DateHit]) -> list[_DateHit]:
    """"From April 1st to June 30th", "between May 3 and May 9": one window from the start
    of the first date to the end of the second, instead of two dates."""
    out: list[_DateHit] = []
    for hit in hits:
        prev = out[-1] if out else None
        if (prev is not None and not prev.part_of_claim and not hit.part_of_claim
                and (prev.prefix in ("from", "between")
                     or _RANGE_START.search(text, 0, prev.start)
                     # "on Thursday and Friday": two days in a row are one stretch
                     or (prev.window.unit == hit.window.unit == "day"
                         and prev.window.end == hit.window.start))
                and (_RANGE_LINK.fullmatch(text, prev.end, hit.start)
                     # "from June 15 until the end of August": "until" is the hit's prefix
                     or (hit.prefix in ("until", "till", "through")
                         and not text[prev.end:hit.start].strip()))
                and prev.window.start is not None and hit.window.end is not None):
            end = hit.window.end
            if end <= prev.window.start:  # the second date's year was guessed backwards
                try:
                    end = end.replace(year=end.year + 1)
                except ValueError:
                    out.append(hit)
                    continue
                if end <= prev.window.start:
                    out.append(hit)
                    continue
            start = prev.start
            lead = _RANGE_START.search(text, 0, prev.start)
            if lead is not None:
                start = lead.start()
            out[-1] = _DateHit(start, hit.end, _Window(prev.window.start, end, "span"),
                               None, False, None)
            continue
        out.append(hit)
    return out


_PAST_AUX = frozenset({"was", "were", "did", "had", "didn't", "wasn't", "weren't", "hadn't"})


def _points_ahead(text: str) -> bool:
    """Whether a clause speaks about what is ahead: a future marker or a progressive
    ("I'm flying out"), or no past tense at all ("the party is on Friday", "let's meet on
    the 27th"); a past verb ("we adopted a cat on Saturday") points back."""
    if _FUTURE.search(text) or _PROGRESSIVE.search(text):
        return True
    for word in _WORD_SPLIT.split(text.lower()):
        if word in _PAST_AUX or (word in _IRREGULAR_PAST and word not in _VERB_BASES) or (
                _is_regular_past(word) and word not in _ED_ADJECTIVES):
            return False
    return True


def _value_date(text: str, start: int, prefix: str | None) -> bool:
    return _VALUE_DATE_CONTEXT.search(text[:start] + (f"{prefix} " if prefix else "")) \
        is not None


def _choose_window(hits: Iterable[_DateHit]) -> tuple[datetime | None, datetime | None]:
    frames = [hit for hit in hits
              if (not hit.part_of_claim or hit.value) and hit.window.unit != "none"]
    if not frames:
        return None, None
    bounded = [h for h in frames if h.window.start is not None and h.window.end is not None]
    best = frames[0]
    if len(bounded) > 1:
        narrowest = min(bounded, key=lambda h: h.window.end - h.window.start)  # type: ignore
        if all(
            o.window.start <= narrowest.window.start  # type: ignore[operator]
            and narrowest.window.end <= o.window.end  # type: ignore[operator]
            for o in bounded
        ):
            best = narrowest
    return _apply_prefix(best.window, best.prefix)


def _remove_dates(text: str, hits: list[_DateHit]) -> str:
    out: list[str] = []
    cursor = 0
    for hit in hits:
        if hit.part_of_claim and hit.replacement is None:
            continue
        out.append(text[cursor:hit.start])
        if hit.replacement is not None:
            prefix = hit.prefix
            out.append(f"{prefix} {hit.replacement}" if prefix else hit.replacement)
        cursor = hit.end
        if hit.trail is not None:
            noun = _POSSESSED_NOUN.match(text, cursor)
            if noun is not None:
                out.append(noun.group() + " " + hit.trail)
                cursor = noun.end()
    out.append(text[cursor:])
    return _tidy("".join(out))


# The noun phrase after a possessive date: up to three words, not a preposition or verb.
_STOP = (r"for|to|in|at|on|with|and|but|or|is|was|are|were|will|be|has|had|have|that|which"
         r"|who")
# "tomorrow's going to be...", "today's the day": 's is "is", no possessive
_NOT_NOUN = r"going|gonna|been|being|not|so|really|just|a|an|the|my|your|our|gotta"
_POSSESSED_NOUN = re.compile(
    rf"\s+(?!(?:{_STOP}|{_NOT_NOUN})\b)[A-Za-z][\w-]*"
    rf"(?:\s+(?!(?:{_STOP})\b)[A-Za-z][\w-]*){{0,2}}?"
    rf"(?=\s*(?:[^\w\s]|$|\s(?:{_STOP})\b))",
    re.I,
)


def strip_relative_dates(text: str, occurred_at: datetime) -> str:
    """``text`` with relative observation-frame dates removed (as the extractor does)."""
    local = _local(occurred_at)
    hits = [
        hit for hit in _find_dates(text, local)
        if _REL.fullmatch(text[hit.start:hit.end]) is not None
    ]
    return _remove_dates(text, hits)


# ---------------------------------------------------------------------------------------
# The times a question names (retrieval: semantic's said-when lane)
# ---------------------------------------------------------------------------------------

# A day named in a question matches what was said up to this far either side: "on 1
# February" is often said the day after, or the Friday before the weekend it names
# (LoCoMo dev: +-3 days kept more evidence than +-0, +-7 or +-14; bench/README.md).
NAMED_DAY_SLACK = timedelta(days=3)
_SEASON_MONTHS = {season: tuple((start + i - 1) % 12 + 1 for i in range(3))
                  for season, start in _SEASON_START.items()}
_SEASON_NAMED = re.compile(
    rf"\b(?:in|during|of|over)\s+(?:the\s+)?(?P<season>{_SEASON})"
    r"(?:\s+(?:of\s+)?(?P<year>(?:19|20)\d{2}))?\b", re.I)


@dataclass(frozen=True)
class NamedTimes:
    """The times a question names. `windows` are half-open instants (a named day widened by
    NAMED_DAY_SLACK); `months` are months named without a year ("in July"), which match
    that month of any year: a question about a past conversation rarely says the year,
    and the most recent July before today is often the wrong one."""

    windows: tuple[tuple[datetime, datetime], ...] = ()
    months: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.windows or self.months)


def named_times(text: str, now: datetime) -> NamedTimes:
    """The dates, months, years and seasons `text` names, absolute ones as said and
    relative ones ("last week", "yesterday") resolved against `now` (aware), or against
    the absolute date the text also names ("the week before August 3, 2023"). Vague words
    ("recently") and a bare weekday without "on" name no time."""
    local = _local(now)
    windows: list[tuple[datetime, datetime]] = []
    months: list[int] = []

    def add(window: _Window | None) -> None:
        if window is None or window.start is None or window.end is None:
            return
        start, end = window.start, window.end
        if window.unit in ("day", "part", "weekend"):
            start, end = start - NAMED_DAY_SLACK, end + NAMED_DAY_SLACK
        if (start, end) not in windows:
            windows.append((start, end))

    relative = [m for m in _rel_matches(text)
                if not (m.group("vague") or ((m.group("wd") or m.group("ord")) and not (
                    m.group("prefix") or m.group("wdon") or m.group("ordon"))))]
    taken = [(m.start(), m.end()) for m in relative]
    for match in _SEASON_NAMED.finditer(text):
        season, year = match.group("season").lower(), match.group("year")
        if year:
            add(_safe_window(_season_window, season, int(year), local.tzinfo))
        else:
            months.extend(m for m in _SEASON_MONTHS[season] if m not in months)
        taken.append((match.start(), match.end()))
    anchor = local
    for match in _ABS.finditer(text) if _ABS_HINT.search(text) else ():
        if any(match.start() < e and s < match.end() for s, e in taken):
            continue
        g = match.group
        prefix = " ".join(g("aprefix").lower().split()) if g("aprefix") else None
        if _unanchored(match, prefix):
            continue
        month_token = g("m1") or g("m2") or g("m3")
        if month_token and not (g("y1") or g("y2") or g("y3")):
            month = _MONTHS[month_token.lower().rstrip(".")[:3]]
            if month not in months:
                months.append(month)
            continue
        window = _safe_window(_absolute_window, match, local, False)
        if window is not None and window.unit == "day" and anchor is local:
            anchor = window.start or local
        add(window)
    for match in relative:
        add(_safe_window(_relative_window, match, anchor, False))
    return NamedTimes(tuple(windows), tuple(months))
