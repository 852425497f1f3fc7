"""Issue 37 item 1: the update and contradiction rules read each text once.

The rules compare every new claim with up to 200 current statements; what they read of
a text (its slot frames, its values, its named things) is pure, so it is read once per
text and not again per claim or per set of names. These tests count the readings, and
check that what is read is what a fresh reading gives."""

from __future__ import annotations

from governance.intake import supersession
from governance.intake.supersession import (
    _slot_frames,
    _values,
    best_conflict,
    is_candidate,
    slot_values,
)

NAMES = frozenset({"sam", "sam okafor", "okafor"})
OLDS = [
    "Sam Okafor lives in Leeds.",
    "Sam Okafor's manager is Helen Cho.",
    "Sam Okafor works at Acme.",
    "Sam Okafor's sister lives in Madrid.",
]


def _clear() -> None:
    for name in ("_slot_frames", "_slot_values", "_values", "_named_values", "_named_keys",
                 "_words_of", "_additive", "_content_count", "is_candidate"):
        getattr(supersession, name).cache_clear()


def test_a_statements_frames_are_matched_once_whatever_the_names() -> None:
    _clear()
    statement = "Sam Okafor's sister Ana moved to Porto."
    assert is_candidate(statement)  # asks with no names
    with_names = slot_values(statement, NAMES)
    without = slot_values(statement)
    assert _slot_frames.cache_info().misses == 1
    # The values and keys do not depend on the names; only whose they are does.
    assert {k: v for k, (v, _) in with_names.items()} == {
        k: v for k, (v, _) in without.items()}


def test_the_contradiction_rule_reads_each_candidate_once() -> None:
    _clear()
    first = best_conflict("Sam Okafor moved to Berlin last spring.", OLDS, names=NAMES,
                          message="I moved to Berlin last spring!")
    readings = _values.cache_info().misses + _slot_frames.cache_info().misses
    second = best_conflict("Sam Okafor moved to Berlin last spring.", OLDS, names=NAMES,
                           message="I moved to Berlin last spring!")
    assert second == first
    # Asked again, nothing is read again.
    assert _values.cache_info().misses + _slot_frames.cache_info().misses == readings
    # A second claim against the same rows reads only itself.
    before = _slot_frames.cache_info().misses
    best_conflict("Sam Okafor now reports to Tom Reyes.", OLDS, names=NAMES,
                  message="Tom Reyes is my new boss now.")
    assert _slot_frames.cache_info().misses - before <= 1
    # What is cached is what a fresh reading gives.
    cached = {old: _values(old, NAMES) for old in OLDS}
    _clear()
    assert {old: _values(old, NAMES) for old in OLDS} == cached
    assert isinstance(next(iter(cached.values())), frozenset)  # nobody can change it
