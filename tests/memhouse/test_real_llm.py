"""The LLM path against a real OpenAI-compatible server (opt-in: ``-m real_llm``).

llama-cpp-python's server with SmolLM2-135M (tests/real_llm.py; skipped unless
``MEMHOUSE_LLAMA_PYTHON`` names an interpreter that has it). What a 135M model answers
is not the point: the request shapes, the response-format negotiation, local schema
validation, retries, metering and readiness must work against a real server. The
assertions hold whatever the model says: a call either succeeds with an answer that
validated, or fails with a named ProviderError kind, never an undiagnosed HTTP error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from django.db.models import Sum

from knowledge.models import Knowledge, UsageEntry
from memhouse import observability as obs
from memhouse.core import llm
from memhouse.core.llm import OpenAICompatibleProvider, ProviderError
from memhouse.core.tenancy import account_context
from tests.fake_llm import FakeOpenAI, refusal
from tests.real_llm import PYTHON_ENV, RealServer, run_server, server_python
from tests.retrieval.test_search import corpus  # noqa: F401 - fixture

pytestmark = [pytest.mark.real_llm, pytest.mark.skipif(
    server_python() is None, reason=f"no llama-cpp-python server: set {PYTHON_ENV} (docs/llm.md)")]

SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["city", "confidence"],
    "properties": {"city": {"type": "string"},
                   "confidence": {"type": "integer", "minimum": 0, "maximum": 100}}}


@pytest.fixture(scope="module")
def real_server() -> Iterator[RealServer]:
    yield from run_server()


@pytest.fixture
def configured(real_server: RealServer, settings: Any) -> RealServer:
    real_server.check_alive()
    settings.MEMHOUSE_LLM_BASE_URL = real_server.base_url
    settings.MEMHOUSE_LLM_MODEL = real_server.model
    settings.MEMHOUSE_LLM_API_KEY = ""
    settings.MEMHOUSE_LLM_TIMEOUT = 300  # a CPU model on a shared 2-core machine
    settings.MEMHOUSE_LLM_MAX_RETRIES = 1
    settings.MEMHOUSE_LLM_MAX_TOKENS = 512  # a 135M model may not stop by itself
    settings.MEMHOUSE_RATE_LIMIT_PER_MINUTE = 0
    return real_server


def _calls(purpose: str, outcome: str) -> float:
    return float(obs.MODEL_CALLS.labels(purpose, outcome)._value.get())


def _tokens(purpose: str, part: str) -> float:
    return float(obs.MODEL_TOKENS.labels(purpose, part)._value.get())


def test_the_real_server_refuses_json_schema_the_way_the_fake_does(real_server):
    body = OpenAICompatibleProvider(real_server.base_url, real_server.model).request_body(
        system="Answer in JSON.", user="Which city is the capital of France?",
        schema=SCHEMA, schema_name="city_v1", mode="json_schema")
    r = httpx.post(f"{real_server.base_url}/chat/completions", json=body, timeout=120)
    fake = refusal("json_schema")
    assert r.status_code == fake.status == 500, r.text
    message = r.json()["error"]["message"]
    assert "response_format" in message and "json_object" in message, message
    # The fake's refusal is recognised the same way (tests/fake_llm.py mimics this one).
    for status, text in ((r.status_code, message), (fake.status, fake.body["error"]["message"])):
        assert llm._format_refused(ProviderError("http_error", text, status_code=status))


def test_negotiation_lands_on_json_mode_with_the_schema_and_answers_validate(real_server):
    provider = OpenAICompatibleProvider(real_server.base_url, real_server.model, timeout=300,
                                        max_retries=2, backoff_seconds=0, max_tokens=256)
    before = _calls("city_v1", "ok")
    answer = provider.complete_json(
        system="You answer geography questions.", user="Which city is the capital of France?",
        schema=SCHEMA, schema_name="city_v1")
    llm.validate_json(answer, SCHEMA)  # whatever the city, the shape is the schema's
    assert llm.structured_output(real_server.base_url) == "json_object_schema"
    assert provider.response_format == "json_object_schema"
    assert _calls("city_v1", "ok") == before + 1
    assert _tokens("city_v1", "prompt") > 0  # llama-cpp-python reports usage: metered


def test_retries_and_metering_of_a_failing_call(real_server):
    # One attempt can never finish in 10 ms: a timeout, retried once, then named.
    provider = OpenAICompatibleProvider(real_server.base_url, real_server.model, timeout=0.01,
                                        max_retries=1, backoff_seconds=0)
    before = _calls("city_v1", "timeout")
    with pytest.raises(ProviderError) as caught:
        provider.complete_json(system="You answer.", user="Capital of Peru?", schema=SCHEMA,
                               schema_name="city_v1")
    assert (caught.value.kind, caught.value.attempts) == ("timeout", 2)
    assert _calls("city_v1", "timeout") == before + 1
    # A prompt beyond the context window: the server's 400 is final, not retried, and is
    # not taken for a refused response format.
    provider = OpenAICompatibleProvider(real_server.base_url, real_server.model, timeout=300,
                                        max_retries=2, backoff_seconds=0)
    with pytest.raises(ProviderError) as caught:
        provider.complete_json(system="You answer.", user="word " * 20_000, schema=SCHEMA,
                               schema_name="city_v1")
    assert (caught.value.kind, caught.value.status_code, caught.value.attempts) == (
        "http_error", 400, 1)
    assert llm.structured_output(real_server.base_url) != "unsupported"


@pytest.mark.django_db
def test_readiness_reports_the_negotiated_format(live_server, configured):
    llm._READINESS.pop(configured.base_url, None)
    deadline = time.monotonic() + 300
    while True:  # a cold CPU model may take longer than readiness waits for its probe
        r = httpx.get(f"{live_server.url}/readyz", timeout=60)
        if r.json()["checks"]["llm"] != "probing" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert r.status_code == 200, r.text
    assert r.json()["checks"]["llm"] == "ok"
    assert r.json()["llm_response_format"] == "json_object_schema"


@pytest.mark.django_db(transaction=True)
def test_ingest_runs_the_llm_extractor_through_the_real_server(live_server, committed_world,
                                                             configured):
    w = committed_world
    before = _calls(llm_schema_name(), "ok") + _calls(llm_schema_name(), "invalid_response")
    r = httpx.post(f"{live_server.url}/api/v1/messages", timeout=600,
                   headers={"Authorization": f"Bearer {w.agent_key}"},
                   json={"scope": "/marketing/social", "messages": [{
                       "text": "I adopted a greyhound named Pixel last week.",
                       "peer_key": "alice", "occurred_at": "2026-11-02T09:00:00+00:00"}]})
    assert r.status_code in (200, 201, 202), r.text
    after = _calls(llm_schema_name(), "ok") + _calls(llm_schema_name(), "invalid_response")
    assert after == before + 1  # the extractor asked the model once (retries inside)
    with account_context(w.account.id):
        extractors = set(Knowledge.objects.values_list("extractor", flat=True))
        ledger = dict(UsageEntry.objects.values_list("kind").annotate(u=Sum("units")))
    # Either the model's claims were stored as the model's, or (only if every attempt
    # came back invalid) the rules stood in and said so; never an HTTP failure.
    from knowledge.ingest.llm_extractor import LLMExtractor
    from knowledge.ingest.rule_extractor import RuleBasedExtractor

    if _calls(llm_schema_name(), "ok") > before:
        assert extractors <= {f"{LLMExtractor.name}/{LLMExtractor.version}"}, extractors
    else:
        assert extractors <= {f"{RuleBasedExtractor.name}/{RuleBasedExtractor.version}"}, \
            extractors
    assert ledger.get("model_call") == 1 and ledger.get("model_tokens", 0) > 0, ledger


def llm_schema_name() -> str:
    from knowledge.ingest.llm_extractor import SCHEMA_NAME

    return SCHEMA_NAME


@pytest.mark.django_db(transaction=True)
def test_ask_reranks_and_answers_through_the_real_server(live_server, corpus,  # noqa: F811
                                                         configured, monkeypatch):
    from retrieval.profiles import BASE_PROFILES

    # A CPU model needs seconds, not thorough's 300 ms rerank reserve: widen the budgets
    # so this test sees the model's answer instead of the deadline.
    monkeypatch.setitem(BASE_PROFILES, "thorough", replace(
        BASE_PROFILES["thorough"], deadline_ms=600_000, rerank_reserve_ms=300_000))
    w, _ = corpus
    r = httpx.post(f"{live_server.url}/api/v1/ask", timeout=900,
                   headers={"Authorization": f"Bearer {w.agent_key}"},
                   json={"query": "Where did Alice go for support?", "peer_key": "alice",
                         "scope": "/marketing/social"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["profile"] == "thorough"
    rerank = body["retrieval"]["rerank"]
    # The rerank answer validated (done), or the model's answer did not (failed,
    # invalid_response); a refused format or an HTTP error would be a defect here.
    assert rerank["reranker"] == "model", rerank
    assert rerank["status"] == "done" or rerank.get("reason") == "invalid_response", rerank
    assert body["answer_degraded"] in (None, "invalid_response"), body["answer_degraded"]
    cited = {c["id"] for c in body["citations"]}
    assert cited <= {c["id"] for c in body["candidates"]}  # nothing invented survives
    with account_context(w.account.id):
        calls = UsageEntry.objects.filter(kind="model_call").aggregate(u=Sum("units"))["u"]
    assert calls == 2, json.dumps(body)[:2000]  # one rerank call, one answer call


def test_the_fake_takes_and_refuses_what_the_real_server_does(real_server):
    """tests.fake_llm's ``json_object`` mode stands for this server in the other tests."""
    fake = FakeOpenAI(structured="json_object")  # its rules only; never started
    try:
        for mode in llm.FORMATS:
            body = OpenAICompatibleProvider(real_server.base_url, real_server.model)\
                .request_body(system="Answer in JSON.", user="Capital of Chile?",
                              schema=SCHEMA, schema_name="city_v1", mode=mode, max_tokens=8)
            real = httpx.post(f"{real_server.base_url}/chat/completions", json=body,
                              timeout=300)
            assert (real.status_code == 500) == (fake.refuses(body) is not None), (
                mode, real.status_code, real.text[:300])
    finally:
        fake.server.server_close()
