"""Answer in context: does the text an agent receives hold LoCoMo's gold answer?

    .venv/bin/python bench/answer_in_context.py \\
        --dataset /work/shared/eval/locomo/locomo_dev.json \\
        --out bench/results/answer_in_context.json [--limit-conversations N] \\
        [--budgets 2000,4000,8000] [--no-ask] [--only-context] [--only-ask] \\
        [--dump FILE.jsonl] [--questions N [--seed S]] \\
        [--keep-db] [--reuse-db] [--db-name NAME] [--deadline-scale X]

One command, one private database (bench_answer_in_context unless --db-name):
  1. ingest LoCoMo through the pipeline and rebuild the entity index (bench/common.py, one
     scope per conversation), as bench/retrieval.py and bench/context_ask.py do; with
     --reuse-db a --keep-db database is measured as it is, without ingest;
  2. every QA of categories 1-4: the reader is the speaker the question names, else the
     first speaker (bench/context_ask.py reader_speaker / Readers), at the conversation's
     scope; the text is retrieval.context.get_context(...)["context"] at each budget, and
     the answer of retrieval.ask.ask(...) without a generation provider (model-free);
  3. the raw-turn baseline: bench/retrieval.py's hybrid ranking (RRF of dense and FTS
     over "Speaker: text" turns), each turn rendered "[D Month YYYY] Speaker: text" with its
     session's date, packed greedily in rank order to the same budget (pack_lines);
  4. scoring with `found(gold, text)` (pure, below; rules in bench/README.md,
     "Answer in context"), JSON per condition and category; category 5 only as ask's
     abstention rate.

The scorer (everything above "Benchmark") needs neither Django nor a database; the tests
import it directly (tests/bench/test_answer_in_context.py).
"""

from __future__ import annotations

import argparse
import calendar
import contextlib
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

from bench import common  # noqa: E402
from bench.common import log  # noqa: E402

# =======================================================================================
# Scoring (pure)
# =======================================================================================

# NLTK's English stop-word list (nltk.corpus.stopwords, 179 words), written out because
# neither nltk nor scikit-learn is installed in the venv (and scikit-learn's list holds
# number words, which this scorer turns into digits, and nouns such as "fire"). Two
# changes: apostrophes are removed as the tokenizer removes them ("don't" -> "dont"),
# and "won" is left out: NLTK lists it as the remnant of "won't", but in LoCoMo answers
# it is the verb ("won a championship"), and "won't" is "wont" here anyway.
_NLTK_STOP_WORDS = """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
yourselves he him his himself she she's her hers herself it it's its itself they them their
theirs themselves what which who whom this that that'll these those am is are was were be
been being have has had having do does did doing a an the and but if or because as until
while of at by for with about against between into through during before after above below
to from up down in out on off over under again further then once here there when where why
how all any both each few more most other some such no nor not only own same so than too
very s t can will just don don't should should've now d ll m o re ve y ain aren aren't
couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't
ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't
weren weren't wouldn wouldn't
"""
STOP_WORDS: frozenset[str] = frozenset(w.replace("'", "") for w in _NLTK_STOP_WORDS.split())

_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
          "fourteen fifteen sixteen seventeen eighteen nineteen twenty")
NUMBER_WORDS = {w: str(i) for i, w in enumerate(_UNITS.split())}
NUMBER_WORDS.update({"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60",
                     "seventy": "70", "eighty": "80", "ninety": "90", "hundred": "100",
                     "thousand": "1000"})
_ORDINALS = "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth"
ORDINAL_WORDS = {w: str(i) for i, w in enumerate(_ORDINALS.split(), start=1)}

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Month spellings a date may use: full names, three-letter abbreviations (and "sept"),
# and the misspellings LoCoMo's gold answers contain ("Januarty 5, 2024", "21Janury").
_MONTH_FORMS: dict[str, int] = {m: i for i, m in enumerate(MONTHS, start=1)}
_MONTH_FORMS.update({m[:3]: i for i, m in enumerate(MONTHS, start=1)})
_MONTH_FORMS.update({"sept": 9, "januarty": 1, "janury": 1, "feburary": 2, "febuary": 2})
_M = "(?P<{g}>" + "|".join(sorted(_MONTH_FORMS, key=len, reverse=True)) + r")\b\.?"
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"(?P<y>(?:19|20)\d\d)(?!\d)"
# Highest priority first; a later pattern never takes text an earlier one matched.
_DATE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"(?<!\d)(?P<y>(?:19|20)\d\d)-(?P<mn>\d{1,2})-(?P<d>\d{1,2})(?!\d)",       # 2023-05-07
    rf"(?<!\d)(?P<d>\d{{1,2}}){_ORD}\s*(?:of\s+)?{_M.format(g='m')}[\s.,]*{_YEAR}",
    rf"\b{_M.format(g='m')}\s*(?P<d>\d{{1,2}}){_ORD}\s*,?\s*{_YEAR}",          # May 7, 2023
    rf"(?<!\d)(?P<d>\d{{1,2}}){_ORD}\s*(?:of\s+)?{_M.format(g='m')}",          # 7 May
    rf"\b{_M.format(g='m')}[\s.,]*(?:of\s+)?{_YEAR}",                         # May 2023
    rf"\b{_M.format(g='m')}\s+(?P<d>\d{{1,2}}){_ORD}\b(?![.,]?\d)",            # May 7
    r"(?<![\d-])(?P<y>(?:19|20)[0-3]\d)(?![\d-])",                            # 2023
))


@dataclass(frozen=True)
class DateExpr:
    """One date expression found in a text: its span, the fields it states (None when it
    does not state one) and, for a full date, the days it names (more than one for "the
    week of D" (D..D+6), "the weekend of D" (D, D+1) and "between D1 and D2")."""

    start: int
    end: int
    year: int | None
    month: int | None
    day: int | None
    days: frozenset[date] = frozenset()

    @property
    def full(self) -> date | None:
        if self.year is None or self.month is None or self.day is None:
            return None
        try:
            return date(self.year, self.month, self.day)
        except ValueError:
            return None

    def agrees(self, other: DateExpr) -> bool:
        """Does `self` state every field `other` states, with the same value?"""
        return all(b is None or a == b for a, b in ((self.year, other.year),
                                                    (self.month, other.month),
                                                    (self.day, other.day)))

    def tokens(self) -> set[str]:
        """The ISO units and the day/month/year words this date adds to a text's tokens."""
        out: set[str] = set()
        if self.day is not None:
            out.add(str(self.day))
        if self.month is not None:
            out.add(MONTHS[self.month - 1])
        if self.year is not None:
            out.add(str(self.year))
        if self.year is not None and self.month is not None:
            out.add(f"{self.year:04d}-{self.month:02d}")
        if self.full is not None:
            out.add(self.full.isoformat())
        return out


def _clean(text: str) -> str:
    # Typographic apostrophes as plain ones; stray backticks dropped ("3` July 2023").
    return text.replace("\u2019", "'").replace("\u2018", "'").replace("`", "")


def find_dates(text: str) -> list[DateExpr]:
    """Every date expression of `text` (already cleaned), in text order. Formats: ISO
    (2023-05-07), day month year ("7 May 2023", "7th of May, 2023", "14September, 2022"),
    month day year ("May 7, 2023", "October 13th, 2023"), day month ("13 August"), month
    year ("May 2023", "April, 2023", "April.2023"), month day ("May 7") and a bare year
    1900-2039 ("in 2022"). Month names full, abbreviated or in the misspellings LoCoMo
    has. A full date preceded by "week of" names 7 days, by "weekend of" 2 days; two
    full dates in "between D1 and D2" (at most 62 days apart) name every day between."""
    taken: list[tuple[int, int]] = []
    found_: list[DateExpr] = []
    for pat in _DATE_PATTERNS:
        for m in pat.finditer(text):
            s, e = m.span()
            if any(s < te and ts < e for ts, te in taken):
                continue
            g = m.groupdict()
            month = (int(g["mn"]) if g.get("mn") else
                     _MONTH_FORMS[g["m"].lower()] if g.get("m") else None)
            if month is not None and not 1 <= month <= 12:
                continue
            day = int(g["d"]) if g.get("d") else None
            if day is not None and not 1 <= day <= 31:
                continue
            year = int(g["y"]) if g.get("y") else None
            taken.append((s, e))
            found_.append(DateExpr(s, e, year, month, day))
    found_.sort(key=lambda d: d.start)
    out: list[DateExpr] = []
    for i, d in enumerate(found_):
        full = d.full
        days: set[date] = {full} if full else set()
        if full is not None:
            before = text[max(0, d.start - 16):d.start].lower()
            if re.search(r"\bweekend\s+of\s+$", before):
                days |= {full + timedelta(days=1)}
            elif re.search(r"\bweek\s+of\s+$", before):
                days |= {full + timedelta(days=k) for k in range(7)}
            elif re.search(r"\bbetween\s+$", before) and i + 1 < len(found_):
                nxt = found_[i + 1]
                last = nxt.full
                if (last is not None and re.fullmatch(r"\s+and\s+", text[d.end:nxt.start])
                        and 0 < (last - full).days <= 62):
                    days |= {full + timedelta(days=k) for k in range((last - full).days + 1)}
        out.append(DateExpr(d.start, d.end, d.year, d.month, d.day, frozenset(days)))
    return out


_UNDOUBLE = frozenset("bdfgmnprt")
_VOWEL = re.compile(r"[aeiouy]")


def stem(word: str) -> str:
    """A light suffix stemmer (nltk and snowballstemmer are not installed in the venv, and
    retrieval.lexical.normalize_term belongs to the system under test, so the scorer keeps
    its own). Words of 3 letters or fewer and words with digits are left alone. In order:
    one plural suffix (-sses -> -ss, -ies -> -ie, -es after s/x/z/ch/sh, else -s unless
    the word ends in -ss/-us/-is); then -ied -> -i, or -ing / -ed when what is left has a
    vowel and 3+ letters (never -eed: "need", "speed"), undoubling a final consonant
    ("running" -> "run"); then a final -e dropped, and a final -y after a consonant
    made -i ("city"/"cities" -> "citi", "movie"/"movies" -> "movi"). Applied identically
    to gold and text, it only has to be consistent."""
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies"):
        w = w[:-1]
    elif w.endswith("es") and w[:-2].endswith(("s", "x", "z", "ch", "sh")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ied") and len(w) > 4:
        w = w[:-2]
    elif w.endswith("eed"):
        pass
    else:
        for suffix in ("ing", "ed"):
            base = w[: -len(suffix)]
            if w.endswith(suffix) and len(base) >= 3 and _VOWEL.search(base):
                w = base
                if len(w) > 3 and w[-1] == w[-2] and w[-1] in _UNDOUBLE:
                    w = w[:-1]
                break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    if len(w) > 3 and w.endswith("y") and w[-2] not in "aeiou":
        w = w[:-1] + "i"
    return w


def words(text: str) -> list[str]:
    """Lower-cased words before stop-word removal and stemming: possessive 's (and s')
    dropped, other apostrophes removed ("don't" -> "dont"), dots inside acronyms removed
    ("J.K." -> "jk"), every other punctuation mark a space (hyphens too), "13th" -> "13",
    number words and ordinal words to digits ("two" -> "2", "first" -> "1")."""
    t = _clean(text).lower()
    t = re.sub(r"(?<=\w)'s\b", "", t)
    t = re.sub(r"(?<=s)'(?!\w)", "", t)
    t = re.sub(r"(?<=\w)'(?=\w)", "", t)
    t = re.sub(r"(?<=\b[a-z])\.(?=[a-z]\b)", "", t)
    t = re.sub(r"[^\w\s]|_", " ", t)
    out: list[str] = []
    for w in t.split():
        w = re.sub(r"^(\d+)(?:st|nd|rd|th)$", r"\1", w)
        out.append(NUMBER_WORDS.get(w) or ORDINAL_WORDS.get(w) or w)
    return out


def tokens(text: str) -> list[str]:
    """`words` stemmed (stop words kept)."""
    return [stem(w) for w in words(text)]


def content_tokens(text: str) -> list[str]:
    """The distinct stemmed tokens of `text` that are not stop words; when every word is a
    stop word ("No"), all of them."""
    ws = words(text)
    kept = [w for w in ws if w not in STOP_WORDS] or ws
    return list(dict.fromkeys(stem(w) for w in kept))


# --- Gold dates --------------------------------------------------------------------------

_NUM = r"(?:\d+|a|an|one|two|three|four|five|six)"
_HEDGE = r"(?:(?:around|about|approximately|roughly|circa|early|mid|late|since)\s*-?\s*)"
# Before a full date: "the week before", "two weekends before", "the Friday before", "the
# weekend of", "the week after"; before a month-year: "first weekend of", "last week of".
_REL_DAY = re.compile(
    rf"(?:\bthe\s+|\b(?P<n>{_NUM})\s+)?\b(?P<unit>weekends?|weeks?|days?|"
    rf"{'|'.join(WEEKDAYS)})\s+(?P<rel>before|after|of)\s*$", re.IGNORECASE)
_REL_MONTH = re.compile(
    r"(?:\bthe\s+)?\b(?P<pos>first|1st|last)\s+(?P<unit>weekend|week)\s+of\s*(?:the\s+)?$",
    re.IGNORECASE)
_HEDGE_BEFORE = re.compile(rf"{_HEDGE}$", re.IGNORECASE)
_WORD_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


@dataclass(frozen=True)
class DateRequirement:
    """A date the text must hold. `exact`: some text date states every field the gold
    date states, with the same values (a full gold date needs that full date, "May 2023"
    that month and year in one expression, "2022" that year). `window`: the anchor date
    in a text line together with one of `unit_words` in the same line, or a full text
    date on one of `window` days."""

    phrase: str
    anchor: DateExpr
    window: frozenset[date] = frozenset()
    unit_words: frozenset[str] = frozenset()

    @property
    def kind(self) -> str:
        return "window" if self.window else "exact"


def _weekend_days(days: Iterable[date]) -> frozenset[date]:
    return frozenset(d for d in days if d.weekday() >= 5)


def _span(start: date, n: int) -> list[date]:
    return [start + timedelta(days=k) for k in range(n)]


def _relative_window(m: re.Match[str], a: date) -> tuple[frozenset[date], set[str]]:
    """The days a relative gold phrase names around its anchor day `a`."""
    u = m.group("unit").lower()
    unit = (u if u in WEEKDAYS else "weekend" if u.startswith("weekend")
            else "week" if u.startswith("week") else "day")
    n_raw = (m.group("n") or "").lower()
    n = int(n_raw) if n_raw.isdigit() else _WORD_NUM.get(n_raw, 1)
    rel = m.group("rel").lower()
    if unit in WEEKDAYS:  # the <weekday> before/after/of A
        wd = WEEKDAYS.index(unit)
        if rel == "before":
            back = (a.weekday() - wd) % 7 or 7
            day = a - timedelta(days=back + 7 * (n - 1))
        elif rel == "after":
            day = a + timedelta(days=((wd - a.weekday()) % 7 or 7) + 7 * (n - 1))
        else:
            day = a - timedelta(days=a.weekday()) + timedelta(days=wd)
        return frozenset({day}), {unit}
    if unit == "day":
        step = {"before": -n, "after": n, "of": 0}[rel]
        return frozenset({a + timedelta(days=step)}), {"day"}
    if rel == "before":
        days = _span(a - timedelta(days=7 * n), 7)
    elif rel == "after":
        days = _span(a + timedelta(days=1 + 7 * (n - 1)), 7)
    elif unit == "week":  # the week of A: A's Monday-Sunday week
        days = _span(a - timedelta(days=a.weekday()), 7)
    else:  # the weekend of A: the Saturday and Sunday within 3 days of A
        days = _span(a - timedelta(days=3), 7)
    return (_weekend_days(days) if unit == "weekend" else frozenset(days)), {unit}


def _month_window(m: re.Match[str], year: int, month: int) -> tuple[frozenset[date], set[str]]:
    unit, pos = m.group("unit").lower(), m.group("pos").lower()
    n_days = calendar.monthrange(year, month)[1]
    days = _span(date(year, month, 1), n_days)
    if unit == "week":
        return frozenset(days[:7] if pos != "last" else days[-7:]), {"week"}
    sats = [d for d in days if d.weekday() == 5]
    sat = sats[0] if pos != "last" else sats[-1]
    return frozenset({sat, sat + timedelta(days=1)}), {"weekend"}


def gold_dates(gold: str) -> tuple[list[DateRequirement], str]:
    """The date requirements of a gold answer and the gold with their phrases cut out.

    * A relative phrase before a full date is one window requirement: "the week before
      A" = the 7 days before A; "N weeks before A" = the 7 days from A - 7N; "the weekend
      before A" = the Saturday and Sunday of the 7 days before A; "the <weekday> before A"
      = that weekday's last date before A ("after" alike); "the week of A" = A's Monday to
      Sunday; "the weekend of A" = the Saturday and Sunday within 3 days of A; "the week /
      weekend after A" = the 7 days after A (the weekend days of them). Its unit words
      (week, weekend, the weekday) are what the anchor's line must also say.
    * "first / last week / weekend of <Month YYYY>" is a window in that month, its
      anchor the month and year.
    * A hedge right before a date ("around", "early", "since", ...) belongs to it.
    * Any other date is an exact requirement.
    """
    text = _clean(gold)
    reqs: list[DateRequirement] = []
    cuts: list[tuple[int, int]] = []
    for d in find_dates(text):
        start = d.start
        before = text[:d.start]
        window: frozenset[date] = frozenset()
        units: set[str] = set()
        full = d.full
        m = _REL_DAY.search(before) if full is not None else None
        if full is not None and m:
            window, units = _relative_window(m, full)
            start = m.start()
        elif d.day is None and d.month is not None and d.year is not None and (
                m := _REL_MONTH.search(before)):
            window, units = _month_window(m, d.year, d.month)
            start = m.start()
        h = _HEDGE_BEFORE.search(text[:start])
        if h:
            start = h.start()
        reqs.append(DateRequirement(text[start:d.end].strip(), d, window,
                                    frozenset(stem(u) for u in units)))
        cuts.append((start, d.end))
    rest = text
    for s, e in sorted(cuts, reverse=True):
        rest = rest[:s] + " " + rest[e:]
    return reqs, rest


# --- Text index and the verdict ------------------------------------------------------------


@dataclass
class TextIndex:
    """What the scorer reads from a text: its tokens (stemmed words, stop words kept,
    plus every date's ISO units and day/month/year words), its dates, and per line its
    dates and tokens (for a window's anchor-plus-unit rule)."""

    text: str
    tokens: set[str] = field(default_factory=set)
    dates: list[DateExpr] = field(default_factory=list)
    lines: list[tuple[list[DateExpr], set[str]]] = field(default_factory=list)

    @classmethod
    def of(cls, text: str) -> TextIndex:
        idx = cls(text)
        for line in _clean(text or "").split("\n"):
            ds = find_dates(line)
            toks = set(tokens(line))
            for d in ds:
                toks |= d.tokens()
            idx.lines.append((ds, toks))
            idx.dates += ds
            idx.tokens |= toks
        return idx


def date_met(req: DateRequirement, idx: TextIndex) -> bool:
    if req.kind == "exact":
        return any(d.agrees(req.anchor) for d in idx.dates)
    if any(d.days & req.window for d in idx.dates):
        return True
    return any(req.unit_words & toks and any(d.agrees(req.anchor) for d in ds)
               for ds, toks in idx.lines)


@dataclass
class Verdict:
    found: bool
    content: list[str]
    matched: list[str]
    needed: int
    dates: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {"found": self.found, "content": self.content, "matched": self.matched,
                "needed": self.needed, "dates": self.dates}


def judge(gold: str, text: str | TextIndex) -> Verdict:
    """`found` with its reasons (content tokens, the ones matched, each date's verdict)."""
    idx = text if isinstance(text, TextIndex) else TextIndex.of(text or "")
    reqs, rest = gold_dates(str(gold))
    content = content_tokens(rest) if words(rest) else []
    if reqs:  # a date answer's leftover stop words ("the", "in") are not content
        content = [t for t in content if t not in STOP_WORDS]
    matched = [t for t in content if t in idx.tokens]
    needed = -(-2 * len(content) // 3)  # ceil(2n/3): 1 of 1, 2 of 2, 2 of 3, 3 of 4
    dates = [{"phrase": r.phrase, "kind": r.kind, "met": date_met(r, idx)} for r in reqs]
    ok = len(matched) >= needed and all(d["met"] for d in dates) and bool(content or reqs)
    return Verdict(ok, content, matched, needed, dates)


def found(gold: str, text: str) -> bool:
    """Does `text` hold the gold answer? Both sides lower-cased, punctuation and
    possessive 's stripped, number words made digits, stemmed (`words`, `stem`); the gold's
    dates are taken out first (`gold_dates`) and each must be met (`date_met`); of the
    gold's remaining content tokens (stop words dropped, `content_tokens`) at least 2/3
    (rounded up) must be among the text's tokens (`TextIndex`; every text date adds its
    ISO units and day/month/year words). An empty gold is never found."""
    return judge(gold, text).found


# --- Raw-turn baseline text ----------------------------------------------------------------


def render_turn(turn: common.Turn) -> str:
    """"[8 May 2023] Caroline: I went to ..." (the session's date, then the speaker)."""
    from bench.retrieval import turn_text

    d = turn.occurred_at
    return f"[{d.day} {d:%B} {d.year}] {turn_text(turn, True)}"


def pack_lines(lines: Iterable[str], budget: int) -> str:
    """Greedy packing in the given order: each line joined with "\\n" if the result stays
    within `budget` characters, else skipped (the next one is tried)."""
    out = ""
    for line in lines:
        cost = len(line) + (1 if out else 0)
        if len(out) + cost > budget:
            continue
        out = f"{out}\n{line}" if out else line
    return out


# =======================================================================================
# Benchmark
# =======================================================================================

CATEGORIES = ("1", "2", "3", "4")
CATEGORY_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}


class Tally:
    """Found flags and characters of one condition, per category."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, bool, int]] = []

    def add(self, category: str, ok: bool, chars: int) -> None:
        self.rows.append((category, ok, chars))

    def report(self) -> dict[str, Any]:
        def rate(rows: list[tuple[str, bool, int]]) -> float | None:
            return round(sum(r[1] for r in rows) / len(rows), 4) if rows else None

        def chars(rows: list[tuple[str, bool, int]]) -> float | None:
            return round(sum(r[2] for r in rows) / len(rows), 1) if rows else None

        return {
            "found_rate": rate(self.rows),
            "questions": len(self.rows),
            "found": sum(r[1] for r in self.rows),
            "mean_chars": chars(self.rows),
            "by_category": {c: {"name": CATEGORY_NAMES[c],
                                "found_rate": rate([r for r in self.rows if r[0] == c]),
                                "questions": sum(1 for r in self.rows if r[0] == c),
                                "mean_chars": chars([r for r in self.rows if r[0] == c])}
                            for c in CATEGORIES},
        }


def git_state() -> dict[str, Any]:
    def run(*args: str) -> str:
        with contextlib.suppress(Exception):
            return subprocess.run(["git", *args], cwd=common.REPO_ROOT, capture_output=True,
                                  text=True, timeout=20).stdout
        return ""

    # porcelain lines are "XY path": the status columns may start with a space
    dirty = [line[3:] for line in run("status", "--porcelain", "--untracked-files=no")
             .splitlines() if line.strip()]
    return {"commit": run("rev-parse", "HEAD").strip(), "modified_files": dirty}


def raw_rankings(convs: list[common.Conversation],
                 qs: dict[str, list[dict[str, Any]]]) -> dict[str, list[list[str]]]:
    """Per conversation, per question (in `qs` order) bench/retrieval.py's whole hybrid
    ranking: its dense and FTS baselines over "Speaker: text" turns, HYBRID_DEPTH deep,
    fused by RRF (hybrid_ranking). Those functions also score evidence recall, which is
    discarded here; a question without evidence gets a placeholder so they can run."""
    from bench import retrieval as rb

    placeholder = {c: [{**q, "evidence": q["evidence"] or ["D1:1"]} for q in qs[c]]
                   for c in qs}
    dense: rb.Rankings = {}
    fts: rb.Rankings = {}
    rb.dense_baseline(convs, placeholder, speaker=True, depth=rb.HYBRID_DEPTH, rankings=dense)
    rb.fts_baseline(convs, placeholder, speaker=True, depth=rb.HYBRID_DEPTH, rankings=fts)
    return {c: [rb.hybrid_ranking(d, f) for d, f in zip(dense[c], fts[c], strict=True)]
            for c in qs}


def build_projections(account_id: Any, convs: list[common.Conversation],
                      readers: Any) -> dict[str, Any]:
    """Every reader's context projections marked dirty and rebuilt with the current code
    (bench/context_ask.py context_keys / ensure_built), so every get_context below reads
    clean projections (a cache hit) whatever an earlier run left in a reused database."""
    from bench import context_ask as ca
    from memhouse.core.tenancy import account_context

    built = 0
    t = time.monotonic()
    for conv in convs:
        scope = readers.scopes[conv.sample_id]
        for key in conv.peer_keys.values():
            with account_context(account_id):
                keys = ca.context_keys(readers.readers[key], scope)
            ca.mark_keys_dirty(account_id, keys)
            built += ca.ensure_built(account_id, keys)["rebuilt"]
    return {"rebuilt": built, "seconds": round(time.monotonic() - t, 2)}


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    dbname = common.bootstrap(args.db_name, keep_db=args.keep_db, reuse_db=args.reuse_db)
    import logging

    logging.getLogger("celery").setLevel(logging.WARNING)
    from django.conf import settings

    from bench import context_ask as ca
    from memhouse.core.llm import get_provider
    from memhouse.core.tenancy import account_context
    from retrieval.ask import ask
    from retrieval.context import get_context
    from retrieval.profiles import resolve_profile

    settings.MEMHOUSE_LLM_BASE_URL = ""
    if get_provider() is not None:
        raise SystemExit("a generation provider is configured; this benchmark is model-free")
    threads = common.embedder_threads(args.torch_threads)
    deadlines = common.scale_deadlines(args.deadline_scale)
    budgets = ([] if args.only_ask
               else [int(b) for b in args.budgets.split(",") if b.strip()])
    do_raw = not (args.only_context or args.only_ask)
    do_ask = not (args.no_ask or args.only_context)
    conditions = ([f"context_{b}" for b in budgets]
                  + ([f"raw_{b}" for b in budgets] if do_raw else [])
                  + (["ask"] if do_ask else []))

    payload: dict[str, Any] = {
        "benchmark": "answer_in_context",
        "dataset": str(Path(args.dataset).resolve()),
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git": git_state(),
        "conditions": {},
        "config": {
            "database": dbname, "kept_database": args.keep_db or args.reuse_db,
            "budgets": budgets, "conditions": conditions,
            "reader": "bench/context_ask.py Readers: Reader(posture='peer', peer_id=<the "
                      "speaker the question names, else speaker_a>, scope_roots=('/',))",
            "context": "retrieval.context.get_context(reader, scope, query=question, "
                       "budget_chars=B)['context'], projections rebuilt first",
            "raw": "bench/retrieval.py hybrid_ranking (RRF k=60 of dense and FTS over "
                   "'Speaker: text' turns, 100 deep each), '[D Month YYYY] Speaker: text' "
                   "lines packed greedily to B",
            "ask": "retrieval.ask.ask(reader, scope, query=question, profile=resolve_profile"
                   "(requested=None, scope, default='thorough'))['answer'], no provider",
            "llm_provider": None,
            "celery_eager": settings.CELERY_TASK_ALWAYS_EAGER,
            **threads,
            "deadline_scale": args.deadline_scale, "deadlines_ms": deadlines,
            "cpu_count": os.cpu_count(),
            "loadavg_start": os.getloadavg(),
        },
    }

    def write() -> None:
        payload["config"]["loadavg_last_write"] = os.getloadavg()
        common.write_json(args.out, payload)

    convs = common.load_locomo(args.dataset, args.limit_conversations)
    payload["conversations"] = [c.sample_id for c in convs]
    log(f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
        f"{sum(len(c.qa) for c in convs)} questions")
    reused = common.attach_locomo(convs) if args.reuse_db else None
    t = time.monotonic()
    if reused is not None:
        account_id, ingest = reused, {"reused_database": True}
        log("ingest skipped: the reused database holds these conversations")
    else:
        if args.reuse_db:
            log(f"--reuse-db: {dbname} holds no LoCoMo ingest of these conversations; "
                "ingesting")
        account_id, ingest = common.ingest_locomo(convs, batch_size=args.batch_size)
        ingest["entity_rebuild"] = common.rebuild_entity_index(account_id)
        log(f"entity index: {ingest['entity_rebuild']}")
        ingest.pop("per_conversation", None)
    payload["ingest"] = ingest
    elapsed: dict[str, float] = {"ingest": round(time.monotonic() - t, 1)}
    payload["elapsed_seconds"] = elapsed
    write()

    readers = ca.Readers(account_id, convs)
    t = time.monotonic()
    payload["projections"] = build_projections(account_id, convs, readers)
    log(f"projections: {payload['projections']}")

    scored = {c.sample_id: [
        {"question": q["question"], "category": str(q.get("category")),
         "answer": str(q["answer"]), "evidence": common.normalise_evidence(q.get("evidence"))}
        for q in c.qa if str(q.get("category")) in CATEGORIES] for c in convs}
    adversarial = {c.sample_id: [q for q in c.qa if str(q.get("category")) == "5"]
                   for c in convs}
    if args.questions is not None:
        scored, adversarial = sample_questions(scored, adversarial, args.questions, args.seed)
        payload["config"]["questions_sample"] = {"questions": args.questions,
                                                 "seed": args.seed}
    n_scored = sum(len(v) for v in scored.values())
    payload["questions"] = {
        "scored": n_scored,
        "by_category": {c: sum(1 for v in scored.values() for q in v if q["category"] == c)
                        for c in CATEGORIES},
        "category_5": sum(len(v) for v in adversarial.values()),
        "without_evidence": sum(1 for v in scored.values() for q in v if not q["evidence"]),
    }

    ranked: dict[str, list[list[str]]] = {}
    if do_raw:
        t = time.monotonic()
        ranked = raw_rankings(convs, scored)
        elapsed["raw_rankings"] = round(time.monotonic() - t, 1)
        log(f"raw rankings in {elapsed['raw_rankings']}s")

    tallies = {c: Tally() for c in conditions}
    hits = {"projection_cache_hit": 0, "calls": 0}
    c5 = {"questions": 0, "abstained": 0}
    ask_abstained_1_4 = 0
    query_s: dict[str, float] = defaultdict(float)
    dump = open(args.dump, "w") if args.dump else None  # noqa: SIM115 (closed below)

    def record(conv: str, q: dict[str, Any], cond: str, text: str, **extra: Any) -> None:
        verdict = judge(q["answer"], text)
        tallies[cond].add(q["category"], verdict.found, len(text))
        if dump is not None:
            dump.write(json.dumps({"conversation": conv, "condition": cond,
                                   "question": q["question"], "category": q["category"],
                                   "gold": q["answer"], "found": verdict.found,
                                   "score": {k: v for k, v in verdict.as_dict().items()
                                             if k != "found"},
                                   **extra, "text": text}, ensure_ascii=False) + "\n")

    t_all = time.monotonic()
    done = 0
    try:
        for conv in convs:
            scope = readers.scopes[conv.sample_id]
            turns = {t.dia_id: t for t in conv.turns}
            with account_context(account_id):
                profile = resolve_profile(requested=None, scope=scope, default="thorough")
            for qi, q in enumerate(scored[conv.sample_id]):
                rkey, reader = readers.for_question(conv, q["question"])
                for b in budgets:
                    t = time.monotonic()
                    with account_context(account_id):
                        res = get_context(reader=reader, scope=scope, query=q["question"],
                                          budget_chars=b)
                    query_s["context"] += time.monotonic() - t
                    hits["calls"] += 1
                    hits["projection_cache_hit"] += bool(res["projection_cache_hit"])
                    record(conv.sample_id, q, f"context_{b}", res["context"], reader=rkey)
                if do_raw:
                    lines = [render_turn(turns[d]) for d in ranked[conv.sample_id][qi]]
                    for b in budgets:
                        record(conv.sample_id, q, f"raw_{b}", pack_lines(lines, b),
                               reader=rkey)
                if do_ask:
                    t = time.monotonic()
                    with account_context(account_id):
                        res = ask(reader=reader, scope=scope, query=q["question"],
                                  profile=profile)
                    query_s["ask"] += time.monotonic() - t
                    ask_abstained_1_4 += bool(res["abstained"])
                    record(conv.sample_id, q, "ask", res["answer"] or "", reader=rkey,
                           abstained=bool(res["abstained"]))
                done += 1
                if done % 50 == 0 or done == n_scored:
                    log(f"questions {done}/{n_scored} ({time.monotonic() - t_all:.0f}s): "
                        + ", ".join(f"{c} {tallies[c].report()['found_rate']}"
                                    for c in conditions))
            if do_ask:
                for q in adversarial[conv.sample_id]:
                    _, reader = readers.for_question(conv, q["question"])
                    t = time.monotonic()
                    with account_context(account_id):
                        res = ask(reader=reader, scope=scope, query=q["question"],
                                  profile=profile)
                    query_s["ask"] += time.monotonic() - t
                    c5["questions"] += 1
                    c5["abstained"] += bool(res["abstained"])
                    if dump is not None:
                        dump.write(json.dumps({
                            "conversation": conv.sample_id, "condition": "ask",
                            "question": q["question"], "category": "5",
                            "adversarial_answer": q.get("adversarial_answer"),
                            "abstained": bool(res["abstained"]),
                            "text": res["answer"] or ""}, ensure_ascii=False) + "\n")
            for c in conditions:
                payload["conditions"][c] = tallies[c].report()
            write()
    finally:
        if dump is not None:
            dump.close()

    for c in conditions:
        payload["conditions"][c] = tallies[c].report()
    if do_ask:
        payload["conditions"]["ask"]["abstention_rate"] = (
            round(ask_abstained_1_4 / n_scored, 4) if n_scored else None)
        payload["ask_category_5"] = {
            **c5, "abstention_rate": round(c5["abstained"] / c5["questions"], 4)
            if c5["questions"] else None}
    payload["context_calls"] = hits
    elapsed.update({f"{k}_queries": round(v, 1) for k, v in query_s.items()})
    elapsed["questions_loop"] = round(time.monotonic() - t_all, 1)
    elapsed["total"] = round(time.monotonic() - started, 1)
    payload["python_peak_rss_mb"] = common.python_peak_rss_mb()
    payload["config"]["loadavg_end"] = os.getloadavg()
    write()
    for c in conditions:
        v = payload["conditions"][c]
        log(f"{c}: found {v['found_rate']} (" + ", ".join(
            f"{k} {v['by_category'][k]['found_rate']}" for k in CATEGORIES)
            + f"), mean chars {v['mean_chars']}")
    if do_ask:
        log(f"ask category 5 abstention {payload['ask_category_5']}")
    log(f"wrote {args.out}")
    return 0



def sample_questions(scored: dict[str, list[dict[str, Any]]],
                     adversarial: dict[str, list[dict[str, Any]]], n: int, seed: int
                     ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """The same share of every conversation's scored and category 5 questions, about n
    scored in all, in their original order (seeded, so an A/B pair sees one sample)."""
    total = sum(len(v) for v in scored.values())
    share = min(1.0, n / total) if total else 1.0
    rng = random.Random(seed)

    def take(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        keep = sorted(rng.sample(range(len(items)), round(len(items) * share)))
        return [items[i] for i in keep]

    return ({c: take(v) for c, v in scored.items()},
            {c: take(v) for c, v in adversarial.items()})

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit-conversations", type=int, default=None)
    ap.add_argument("--budgets", default="2000,4000,8000",
                    help="comma-separated character budgets for context and raw")
    ap.add_argument("--no-ask", action="store_true", help="skip retrieval.ask")
    ap.add_argument("--only-context", action="store_true",
                    help="only the get_context conditions (no raw baseline, no ask)")
    ap.add_argument("--only-ask", action="store_true",
                    help="only retrieval.ask (no context, no raw baseline)")
    ap.add_argument("--dump", default=None, metavar="FILE",
                    help="JSONL: one line per question and condition (question, category, "
                         "gold, found, the scorer's reasons, the text)")
    ap.add_argument("--questions", type=int, default=None, metavar="N",
                    help="score a seeded sample of about N category 1-4 questions, the same "
                         "share of each conversation (and of category 5), for a quick A/B; "
                         "figures for the README come from the full set")
    ap.add_argument("--seed", type=int, default=7, help="the --questions sample's seed")
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--keep-db", action="store_true")
    ap.add_argument("--reuse-db", action="store_true",
                    help="measure bench_<db-name> from an earlier --keep-db run without "
                         "ingesting again")
    ap.add_argument("--db-name", default="answer_in_context")
    ap.add_argument("--torch-threads", type=int, default=None)
    ap.add_argument("--deadline-scale", type=float, default=1.0,
                    help="multiply the profiles' deadlines (quality on a busy machine; "
                         "bench/common.py scale_deadlines)")
    args = ap.parse_args(argv)
    # Model-free: the provider is read from the environment when Django settings load.
    os.environ["MEMHOUSE_LLM_BASE_URL"] = ""
    # Progress (bench.common.log prints) goes to stderr; the results go to --out.
    with contextlib.redirect_stdout(sys.stderr):
        return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
