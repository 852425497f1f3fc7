"""Extraction misses that made an old value vanish before any update rule could see it
(issue 33 item 1): "I bank with Barclays" (a noun used as a verb), "My car's a beat-up
Ford Fiesta" (a contracted "is" after a possessive), "Transferring to Edinburgh for my
final year" (a verbless change of place that mentions the speaker), and a speaker's own
clause after someone else's ("Geraint retired, my new boss is Yolanda")."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from knowledge.ingest.extraction import ObservedMessage
from knowledge.ingest.rule_extractor import RuleBasedExtractor


def _statements(text: str) -> list[str]:
    message = ObservedMessage(
        message_id="00000000-0000-4000-8000-000000000001", text=text, speaker_key="rosa",
        speaker_name="Rosa Linde", occurred_at=datetime(2026, 10, 1, 9, tzinfo=UTC),
        known_peers={"rosa": "rosa", "rosa linde": "rosa"})
    return [c.statement for c in RuleBasedExtractor().extract(message)]


@pytest.mark.parametrize(("text", "expected"), [
    ("I bank with Barclays.", "Rosa Linde banks with Barclays."),
    ("My car's a beat-up Ford Fiesta.", "Rosa Linde's car is a beat-up Ford Fiesta."),
    ("My phone's an old iPhone 8.", "Rosa Linde's phone is an old iPhone 8."),
])
def test_a_provider_or_a_possession_said_in_short_is_a_statement(text: str,
                                                                 expected: str) -> None:
    assert _statements(text) == [expected]


def test_a_possessive_before_a_noun_stays_a_possessive() -> None:
    assert _statements("My car's engine died.") == ["Rosa Linde's car's engine died."]
    # before a participle the 's is "has" (LoCoMo dev: "my fam's been awesome")
    assert _statements("My week's been busy.") == ["Rosa Linde's week has been busy."]


def test_a_verbless_move_that_mentions_the_speaker_keeps_the_new_place() -> None:
    said = _statements("Transferring to Edinburgh for my final year. Leeds wasn't for me.")
    assert any("Edinburgh" in s for s in said) and any("Leeds" in s for s in said)


def test_the_speakers_own_clause_after_a_comma_is_its_own_claim() -> None:
    said = _statements("Geraint retired last month, my new boss is Yolanda and she's great.")
    assert "Rosa Linde's new boss is Yolanda." in said
    assert not any("Geraint" in s and "Yolanda" in s for s in said)
    # no verb before the comma: one clause, as before
    assert _statements("For my birthday, my mum baked a cake.") == [
        "For Rosa Linde's birthday, Rosa Linde's mum baked a cake."]


@pytest.mark.parametrize(("text", "expected"), [
    ("Driving for Ocado now, better hours.", "Rosa Linde is driving for Ocado now, better hours."),
    ("Heading up the new design team these days.",
     "Rosa Linde is heading up the new design team these days."),
    ("Living in Leeds now.", "Rosa Linde is living in Leeds now."),
])
def test_a_line_that_drops_its_i_am_is_about_the_speaker(text: str, expected: str) -> None:
    # chat drops the "I'm" before a verb's -ing form: the new employer or home of an
    # update must not be left as "said: driving for Ocado"
    assert _statements(text) == [expected]


@pytest.mark.parametrize("text", [
    "Dancing makes me so happy.",  # a gerund subject with its own verb
    "Taking in kids in need - you're so kind.",  # a topic before a dash
    "Amazing work!", "Interesting idea.",  # -ing adjectives
])
def test_a_gerund_subject_or_an_adjective_is_no_dropped_i_am(text: str) -> None:
    assert not any(s.startswith("Rosa Linde is ") for s in _statements(text))
