"""The name typer (governance.intake.name_typer): plain-JSON weights in the default
encoder's space that tell a given name from an ordinary capitalised word."""

from __future__ import annotations

import json

import pytest

from governance.intake import name_typer
from knowledge.ingest.named_persons import unlisted_subject
from retrieval.embedding import MINILM_DIMS


def test_the_weights_are_plain_json_for_the_default_encoder() -> None:
    data = json.loads(name_typer.MODEL_PATH.read_text(encoding="utf-8"))
    assert data["format"] == name_typer.FORMAT
    assert len(data["weights"]) == MINILM_DIMS
    assert data["embedder"] == "all-MiniLM-L6-v2-int8"


@pytest.mark.parametrize(("word", "name"), [
    ("Isambard", True), ("Brangwen", True), ("Eluned", True),
    ("Pottery", False), ("Netflix", False), ("Veggies", False),
])
def test_a_name_is_told_from_a_word(word: str, name: bool) -> None:
    assert name_typer.is_given_name(word) is name


@pytest.mark.parametrize(("statement", "expected"), [
    ("Sam heard Isambard won the pub quiz again.", "Isambard"),
    ("Sam said Rupert's band is playing the Half Moon.", "Rupert"),
    ("Sam said Isambard has two kids under five.", "Isambard"),
    ("Sam said Veggies are his fave.", None),  # a copula says nothing of who
    ("Sam said Anyone can do it.", None),
    ("Sam said Isambard and Sam went to the zoo.", None),  # the speaker is a subject too
    ("Sam said Paris is lovely in spring.", None),  # a place the lexicon knows
    ("Sam said: Isambard never replies to messages.", "Isambard"),  # a present -s verb
    ("Sam said Isambard and Brangwen bought a house.", "Isambard"),  # two others
    ("Sam said Isambard and Sam went to the zoo.", None),
])
def test_the_unlisted_subject_is_the_one_before_a_verb(statement: str,
                                                      expected: str | None) -> None:
    assert unlisted_subject(statement, speaker_names=["Sam", "sam"]) == expected


def test_what_a_shop_does_is_no_sign_of_a_person() -> None:
    # a brand's word passes the typer ("Lidl"), so its trade verbs keep it off the path
    assert unlisted_subject("Sam said Lidl opened round the corner.",
                            speaker_names=["Sam", "sam"]) is None
    assert unlisted_subject("Sam said Monzo sent a new card.",
                            speaker_names=["Sam", "sam"]) is None


def test_news_said_to_come_from_someone_else_is_about_who_it_names() -> None:
    from knowledge.ingest.named_persons import named_person

    found = named_person("According to Sam's mum, Auntie Winifred has dementia.",
                         speaker_names=["Sam", "sam"])
    assert found is not None and found.name == "Winifred"
