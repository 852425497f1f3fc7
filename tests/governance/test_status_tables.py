"""Validation and PeerQuestion status: small transition tables with one writer each
(governance.questions.close_validations / close_questions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from governance import questions
from governance.models import PeerQuestion, Validation
from memhouse.core.errors import ApplicationError
from tests.governance.helpers import provisional_about

pytestmark = pytest.mark.django_db
V, Q_ = Validation.Status, PeerQuestion.Status
ROOT = Path(__file__).resolve().parents[2]


def test_tables_leave_open_only():
    validation = {V.OPEN: {V.RESOLVED, V.EXPIRED}, V.RESOLVED: set(), V.EXPIRED: set()}
    question = {Q_.OPEN: {Q_.ANSWERED, Q_.EXPIRED}, Q_.ANSWERED: set(), Q_.EXPIRED: set()}
    assert validation == questions.VALIDATION_EDGES
    assert question == questions.QUESTION_EDGES


def test_close_moves_open_rows_once_and_refuses_other_targets(world):
    item = provisional_about(world, "Alice might move to Oslo next year.")
    validation = Validation.objects.get(knowledge=item, status=V.OPEN)
    question = PeerQuestion.objects.get(validation=validation)
    for bad in (V.OPEN, "withdrawn"):
        with pytest.raises(ApplicationError) as err:
            questions.close_validations([validation], to=bad, resolution="x")
        assert err.value.code == "invalid_status"
    with pytest.raises(ApplicationError):
        questions.close_questions(PeerQuestion.objects.filter(pk=question.pk), to=Q_.OPEN)

    assert questions.close_validations([validation], to=V.EXPIRED, resolution="unanswered") == 1
    assert validation.status == V.EXPIRED  # the instance follows
    # Closed is final: a later close changes nothing.
    assert questions.close_validations([validation], to=V.RESOLVED, resolution="late") == 0
    validation.refresh_from_db()
    assert (validation.status, validation.resolution) == (V.EXPIRED, "unanswered")

    qs = PeerQuestion.objects.filter(pk=question.pk)
    assert questions.close_questions(qs, to=Q_.ANSWERED, answer="yes") == 1
    assert questions.close_questions(qs, to=Q_.EXPIRED) == 0
    question.refresh_from_db()
    assert (question.status, question.answer) == (Q_.ANSWERED, "yes")
    assert question.answered_at is not None


def test_status_has_one_writer():
    """Outside governance/questions.py no module assigns or updates these statuses."""
    offenders = []
    for path in (ROOT / "governance").rglob("*.py"):
        if path.name == "questions.py" or "migrations" in path.parts:
            continue
        text = path.read_text()
        for needle in (".update(status=", "q.status = ", "validation.status = "):
            if needle in text:
                offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert offenders == []
