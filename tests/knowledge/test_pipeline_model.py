"""The model-backed extractor path: read -> model -> write with no connection held."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from knowledge import services
from knowledge.ingest.services import IncomingMessage, messages_ingest
from knowledge.models import Knowledge
from memhouse.core.principal import Principal
from memhouse.core.tenancy import account_context
from tests.fake_llm import FakeOpenAI, Reply, ok

pytestmark = pytest.mark.django_db(transaction=True)


CLAIMS = {"claims": [{
    "statement": "Caroline adopted a greyhound.", "subject": "speaker", "kind": "event",
    "confidence": 0.8, "sensitivity": "internal", "relative_date": None,
    "absolute_from": None, "absolute_until": None, "evidence": "I adopted a greyhound",
    "replaces": None}]}


@pytest.fixture
def fake_model(fake_openai: FakeOpenAI, settings) -> Iterator[FakeOpenAI]:
    """The fake provider answering every call with one claim, noting whether the
    caller's thread held a database connection while it waited."""
    settings.MEMHOUSE_LLM_MODEL = "fake-extractor"
    settings.MEMHOUSE_LLM_MAX_RETRIES = 0
    watch = connections["default"]  # the caller thread's connection wrapper
    fake_openai.connection_open_during_call = []

    def answer(request: dict[str, Any]) -> Reply:
        fake_openai.connection_open_during_call.append(watch.connection is not None)
        return ok(CLAIMS)

    fake_openai.default = answer
    yield fake_openai


def _ingest(w, text: str) -> None:
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
        messages_ingest(principal=Principal(account_id=w.account.id, peer=w.agent, act_for_all=True,
                                            via="api_key"),
                        scope_path="/", messages=[IncomingMessage(
                            text=text, occurred_at=timezone.now(), peer_key="caroline")])


def test_model_extraction_runs_with_no_database_connection_held(committed_world, fake_model):
    _ingest(committed_world, "Guess what, I adopted a greyhound!")
    assert fake_model.connection_open_during_call == [False]
    with account_context(committed_world.account.id):
        k = Knowledge.objects.get()
        assert (k.statement, k.state, k.extractor) == (
            "Caroline adopted a greyhound.", "active", "llm/llm-v3")


def test_a_failing_model_degrades_to_the_rule_based_extractor(committed_world, fake_model):
    fake_model.default = Reply(500, {"error": {"message": "boom"}})
    _ingest(committed_world, "I adopted a greyhound named Pixel.")
    with account_context(committed_world.account.id):
        k = Knowledge.objects.get()
        assert k.extractor == "rule-based/rule-v5"  # recorded, never passed off as the model's
        assert k.statement == "Caroline adopted a greyhound named Pixel."
