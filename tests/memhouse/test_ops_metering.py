"""Every generation-model call is metered by the provider interface itself: the ingest
extractor, deduction and ask each land in the Account's usage ledger (model_call, and
model_tokens when the provider reports usage), against the loopback fake provider."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.db.models import Sum

from governance import workers
from knowledge import services
from knowledge.ingest.llm_extractor import SCHEMA_NAME
from knowledge.models import UsageEntry
from memhouse import observability as obs
from memhouse.core.tenancy import account_context
from tests.fake_llm import FakeOpenAI, Reply, ok
from tests.governance.helpers import active_about
from tests.retrieval.test_search import corpus  # noqa: F401  (fixture)

USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}


def billed(value: Any, usage: dict[str, int] | None = USAGE) -> Reply:
    return ok(value, usage)


@pytest.fixture
def provider(fake_openai: FakeOpenAI, settings) -> FakeOpenAI:
    settings.MEMHOUSE_LLM_MAX_RETRIES = 0
    return fake_openai


def ledger(account_id: Any) -> dict[str, int]:
    with account_context(account_id):
        return {r["kind"]: r["u"] for r in UsageEntry.objects.values("kind")
                .annotate(u=Sum("units"))}


def counter(metric: Any, *labels: str) -> float:
    return float(metric.labels(*labels)._value.get())


CLAIM = {"statement": "Caroline likes green tea.", "subject": "speaker", "kind": "preference",
         "confidence": 0.9, "sensitivity": "internal", "relative_date": None,
         "absolute_from": None, "absolute_until": None, "evidence": "I like green tea",
         "replaces": None}


@pytest.mark.django_db(transaction=True)
def test_ingest_extraction_calls_are_billed_to_the_account(live_server, committed_world,
                                                           provider):
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
    provider.script = [billed({"claims": [CLAIM]})]
    unattributed = counter(obs.MODEL_CALLS_UNATTRIBUTED, SCHEMA_NAME)
    r = httpx.post(f"{live_server.url}/api/v1/messages", timeout=60,
                   headers={"Authorization": f"Bearer {w.agent_key}"},
                   json={"scope": "/", "messages": [
                       {"peer_key": "caroline", "text": "I like green tea.", "id": "m1"}]})
    assert r.status_code == 202
    assert [q["json"]["response_format"]["json_schema"]["name"] for q in provider.requests] \
        == [SCHEMA_NAME]
    # The pipeline task (eager here, a worker in production) bills its Account.
    assert ledger(w.account.id) == {"ingest": 1, "ingest_chars": len("I like green tea."),
                                    "model_call": 1, "model_tokens": 150}
    assert ledger(w.other_account.id) == {}
    assert counter(obs.MODEL_CALLS_UNATTRIBUTED, SCHEMA_NAME) == unattributed


@pytest.mark.django_db
def test_deduction_calls_are_billed_with_tokens_and_failures_count_too(world, provider):
    active_about(world, "Alice likes jazz.")
    active_about(world, "Alice likes camping.")
    before = counter(obs.MODEL_CALLS, "deduction_v1", "http_error")
    provider.script = [Reply(503, {"error": {"message": "overloaded"}})]
    assert workers.deduce(world.account.id)["failed"] == 1
    assert counter(obs.MODEL_CALLS, "deduction_v1", "http_error") == before + 1
    provider.script = [billed({"deductions": []},
                              usage={"prompt_tokens": 40, "completion_tokens": 2})]
    assert workers.deduce(world.account.id)["status"] == "ok"
    rows = UsageEntry.objects.filter(account_id=world.account.id)
    # A failed call is a call (the provider was asked); tokens only where reported.
    assert sorted(rows.values_list("kind", "units")) == [
        ("model_call", 1), ("model_call", 1), ("model_tokens", 42)]
    assert all(r.credential_id is None for r in rows)  # background work: no credential


@pytest.mark.django_db(transaction=True)
def test_ask_model_calls_are_billed_once_to_the_calling_credential(live_server, corpus,  # noqa: F811
                                                                   provider):
    w, ids = corpus
    # The thorough search's rerank is a model call too (no usage reported), then the answer.
    provider.script = [billed({"order": []}, usage=None),
                       billed({"answer": "A support group.", "citations": [ids["support"]],
                               "answer_confidence": 80})]
    r = httpx.post(f"{live_server.url}/api/v1/ask", timeout=60,
                   headers={"Authorization": f"Bearer {w.agent_key}"},
                   json={"query": "Where did Alice go?", "scope": "/marketing/social",
                         "peer_key": "alice"})
    assert r.status_code == 200 and r.json()["model_called"] is True
    assert len(provider.requests) == 2
    totals = ledger(w.account.id)
    assert totals["model_call"] == 2 and totals["model_tokens"] == 150  # never twice
    usage = httpx.get(f"{live_server.url}/api/v1/usage", timeout=30,
                      headers={"Authorization": f"Bearer {w.agent_key}"}).json()
    assert usage["scope"] == "credential"  # the agent's own credential carries the call
    assert usage["totals"]["model_call"] == 2 and usage["totals"]["model_tokens"] == 150


def test_a_call_nobody_can_be_billed_for_is_counted_not_lost(provider):
    client = provider.provider()
    provider.script = [billed({"answer": "x", "score": 1})]
    before = counter(obs.MODEL_CALLS_UNATTRIBUTED, "answer_v1")
    from tests.memhouse.test_llm import call

    assert call(client) == {"answer": "x", "score": 1}  # metering never changes the answer
    assert counter(obs.MODEL_CALLS_UNATTRIBUTED, "answer_v1") == before + 1
    assert counter(obs.MODEL_TOKENS, "answer_v1", "prompt") >= 120
