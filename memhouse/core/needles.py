"""Literal needles of a regular expression: a cheap test that it cannot match.

Many of the intake rules' patterns (the update rule's slot frames, the junk rules) start
with a word list, ``\\b(?:lives?|living|resides?) in ...``, and most texts contain none of
those words. Python's ``re`` tries such a pattern at every position of the text; a
substring test of each word on the lower-cased text is a C loop that rules most of them
out first. :func:`needles` derives the words from the compiled pattern itself (its parse
tree), so a pattern and its needles cannot drift apart.

The test is exact, never a guess: every match of the pattern contains at least one needle
(case-insensitively), so "no needle in the text" means "no match". Only ASCII is reasoned
about: a needle is ASCII, and :func:`may_match` answers True for a text that is not
ASCII (case-insensitive matching folds some non-ASCII letters onto ASCII ones, the long
s onto "s", the Kelvin sign onto "k", which ``str.lower`` does not).
"""

from __future__ import annotations

import re
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as P  # type: ignore[attr-defined]
from typing import Any

Needles = frozenset[str] | None


def _sequence(items: Any) -> Needles:
    """Needles of a sequence of parse items: the most selective among the literal runs
    and the items that each require one of several strings (a required group)."""
    options: list[frozenset[str]] = []
    run: list[str] = []

    def close() -> None:
        if run:
            options.append(frozenset({"".join(run)}))
            run.clear()

    for op, arg in items:
        if op is C.LITERAL and arg < 128:
            run.append(chr(arg).lower())
            continue
        close()
        found = _item(op, arg)
        if found:
            options.append(found)
    close()
    if not options:
        return None
    # The set whose shortest needle is longest rules out the most texts.
    return max(options, key=lambda s: (min(len(n) for n in s), -len(s)))


def _branches(alternatives: Any) -> Needles:
    found: set[str] = set()
    for alternative in alternatives:
        one = _sequence(alternative)
        if not one:
            return None  # an alternative with no literal: any text may match
        found |= one
    return frozenset(found)


def _item(op: Any, arg: Any) -> Needles:
    if op is C.SUBPATTERN:
        return _sequence(arg[-1])  # (group, add_flags, del_flags, pattern)
    if op is C.BRANCH:
        return _branches(arg[1])
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        low, _high, body = arg
        return _sequence(body) if low >= 1 else None
    if op is C.ATOMIC_GROUP:
        return _sequence(arg)
    return None  # classes, anchors, lookarounds, back references: no literal required


def needles(pattern: re.Pattern[str]) -> Needles:
    """Lower-cased ASCII strings one of which every match of `pattern` contains, or None
    when the pattern requires no literal (then every text may match)."""
    try:
        found = _sequence(P.parse(pattern.pattern, pattern.flags))
    except Exception:  # re's parser is private: a Python that changes it gets no needles
        return None
    if found is None or "" in found:
        return None
    return found


def may_match(found: Needles, lowered: str | None) -> bool:
    """False only when `pattern` cannot match the text: `lowered` is the text lower-cased,
    or None for a text that is not ASCII (then always True)."""
    if found is None or lowered is None:
        return True
    for needle in found:  # noqa: SIM110 (a loop, not any(<generator>): half the cost)
        if needle in lowered:
            return True
    return False


def lowered(text: str) -> str | None:
    """The text for :func:`may_match`: lower-cased, or None when it is not ASCII."""
    return text.lower() if text.isascii() else None
