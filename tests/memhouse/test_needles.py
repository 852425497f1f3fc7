"""memhouse.core.needles: a pattern's literal needles rule a text out only when the
pattern cannot match it, so the intake rules gated by them decide as before."""

from __future__ import annotations

import gzip
import itertools
import json
import re
from pathlib import Path

import pytest

from memhouse.core.needles import lowered, may_match, needles

FIXTURES = Path(__file__).resolve().parents[2] / "bench" / "fixtures"


def test_needles_of_word_lists_runs_and_repeats():
    assert needles(re.compile(r"\b(?:lives?|living|resides?) (?P<v>\w+)", re.I)) == {
        "live", "living", "reside"}
    # the longest required run wins over a short one
    assert needles(re.compile(r"\d+ ?% (?:complete|done)\b")) == {"complete", "done"}
    # a required repeat keeps its body's needles; an optional one requires nothing
    assert needles(re.compile(r"(?:ab)+c")) == {"ab"}
    assert needles(re.compile(r"x?(?:ab)*")) is None
    # an alternative without a literal lets any text through
    assert needles(re.compile(r"\bcron\b|\d+ files")) == {"cron", " files"}
    assert needles(re.compile(r"\bcron\b|\d+")) is None
    # case-sensitive parts and non-ASCII letters are not needles of their own
    assert needles(re.compile(r"Traceback|(?-i:[A-Z])x\u2019s", re.I)) == {"traceback", "x"}


def test_may_match_is_exact_on_ascii_and_lets_other_text_through():
    pattern = re.compile(r"\b(?:heartbeat|health ?check)\b", re.I)
    found = needles(pattern)
    assert not may_match(found, lowered("see you at the gym"))
    assert may_match(found, lowered("HEARTBEAT OK"))
    assert pattern.search("HEARTBEAT OK")
    # the long s folds onto "s" under IGNORECASE, which str.lower does not: a text that
    # is not ASCII is always searched
    long_s = re.compile(r"status", re.I)
    assert long_s.search("\u017ftatus")
    assert lowered("\u017ftatus") is None and may_match(needles(long_s), None)
    assert may_match(None, "anything")


def _corpus() -> list[str]:
    texts: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, str):
            texts.add(node)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(FIXTURES.glob("*.json")):
        walk(json.loads(path.read_text(encoding="utf-8")))
    with gzip.open(FIXTURES / "junk_machine.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in itertools.islice(fh, 3000):
            walk(json.loads(line))
    return sorted(texts | {t.upper() for t in texts})


@pytest.mark.django_db
def test_gated_intake_patterns_never_rule_out_a_text_they_match():
    from governance.intake import junk, supersession
    from knowledge.ingest import dates, sensitivity

    patterns = [frame for frames in supersession.SINGLE_SLOTS.values() for frame in frames]
    patterns += list(junk._NEEDLES)
    patterns += [sensitivity._RESTRICTED_I, sensitivity._PERSONAL,
                 sensitivity._PERSONAL_PHRASES, dates._REL]
    texts = _corpus()
    assert len(texts) > 5000
    ruled_out = 0
    for pattern in patterns:
        found = needles(pattern)
        for text in texts:
            if not may_match(found, lowered(text)):
                ruled_out += 1
                assert pattern.search(text) is None, (pattern.pattern, text)
    # and the gate does rule most searches out (what it is for)
    assert ruled_out > 0.5 * len(patterns) * len(texts)
