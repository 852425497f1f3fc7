"""Generation-provider faults that the existing tests do not already cover, against the
loopback fake OpenAI-compatible server of tests/fake_llm.py.

Already proven elsewhere (not repeated here): ask with an HTTP 500 and with a timeout
(tests/retrieval/test_ask.py), extraction falling back on an HTTP 500
(tests/knowledge/test_pipeline_model.py), deduction with a 503 and with a schema
violation (tests/governance/test_workers.py), and the client's retry/backoff rules
(tests/memhouse/test_llm.py).

Here: malformed provider answers during ask (answer_degraded names `invalid_response`);
timeouts and malformed answers during LLM extraction behind POST /api/v1/messages (the
messages are durable and extracted by the documented rule-based fallback, recorded as
such); timeouts and malformed answers during deduction (nothing invented, the group is
retried on the next run, which then succeeds).
"""

from __future__ import annotations

import json

import httpx
import pytest

from governance import workers
from governance.models import DeductionRun
from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Message
from memhouse.core.tenancy import account_context
from tests.fake_llm import Reply, completion, ok

pytestmark = pytest.mark.django_db(transaction=True)

MALFORMED = {
    "html": Reply(body="<html>502 Bad Gateway</html>"),
    "truncated_json": Reply(body=completion('{"answer": "Alice went')),
    "wrong_shape": Reply(body=completion(json.dumps({"unexpected": True}))),
    "no_choices": Reply(body={"choices": []}),
}


@pytest.fixture
def provider(fake_openai, settings):
    settings.MEMHOUSE_LLM_MAX_RETRIES = 0
    settings.MEMHOUSE_RATE_LIMIT_PER_MINUTE = 0
    return fake_openai


def _active(w, statement: str, subject=None):
    item = services.knowledge_propose(
        account_id=w.account.id, statement=statement, scope=w.scope,
        subject_peer=subject or w.subject, actor="system:test", level="peer")
    transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    return item


def _post(live_server, w, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{live_server.url}/api/v1/{path}", json=body, timeout=60,
                      headers={"Authorization": f"Bearer {w.agent_key}"})


@pytest.mark.parametrize("fault", sorted(MALFORMED))
def test_a_malformed_answer_degrades_ask(live_server, committed_world, provider, fault):
    w = committed_world
    with account_context(w.account.id):
        _active(w, "Alice went to an LGBTQ support group.")
    provider.script = [MALFORMED[fault]]
    r = _post(live_server, w, "ask", {"query": "Where did Alice go for support?",
                                      "scope": "/marketing/social", "peer_key": "alice"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["answer_degraded"] == "invalid_response"
    assert body["abstained"] is True and body["answer_confidence"] == 0
    assert "failed" in body["answer"] and "Alice went" not in body["answer"]
    # The retrieved statements are real and still returned, not presented as an answer.
    assert body["supporting_statements"] == [c["statement"] for c in body["candidates"]]
    assert "Alice went to an LGBTQ support group." in body["supporting_statements"]
    assert len(provider.requests) == 1


EXTRACTION_FAULTS = {"timeout": Reply(delay=2.0, body={}), **MALFORMED}


@pytest.mark.parametrize("fault", sorted(EXTRACTION_FAULTS))
def test_extraction_faults_keep_messages_and_fall_back_to_rules(live_server, committed_world,
                                                                provider, settings, fault):
    w = committed_world
    settings.MEMHOUSE_LLM_TIMEOUT = 0.5
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
    provider.script = [EXTRACTION_FAULTS[fault]]
    r = _post(live_server, w, "messages", {"scope": "/", "messages": [
        {"id": "f1", "peer_key": "caroline", "text": "I adopted a greyhound named Pixel."}]})
    assert r.status_code == 202, r.text
    assert len(provider.requests) == 1  # the model was asked (and failed)
    with account_context(w.account.id):
        msg = Message.objects.get(client_message_id="f1")  # durable
        assert msg.extracted_at is not None  # processed, not stuck
        k = Knowledge.objects.get()
        assert k.statement == "Caroline adopted a greyhound named Pixel."
        assert k.extractor == "rule-based/rule-v5"  # recorded, never passed off as the model's
        assert k.state == "active"


DEDUCTION_FAULTS = {"timeout": Reply(delay=2.0, body={}),
                    "html": MALFORMED["html"], "truncated_json": MALFORMED["truncated_json"],
                    "no_choices": MALFORMED["no_choices"]}


@pytest.mark.parametrize("fault", sorted(DEDUCTION_FAULTS))
def test_deduction_faults_invent_nothing_and_retry_later(committed_world, provider, settings,
                                                         fault):
    w = committed_world
    settings.MEMHOUSE_LLM_TIMEOUT = 0.5
    with account_context(w.account.id):
        _active(w, "Alice likes jazz.")
        _active(w, "Alice likes camping.")
        before = Knowledge.objects.count()
    provider.script = [DEDUCTION_FAULTS[fault]]
    result = workers.deduce(w.account.id)
    assert (result["status"], result["failed"], result["created"]) == ("ok", 1, 0)
    with account_context(w.account.id):
        assert Knowledge.objects.count() == before
        assert not DeductionRun.objects.exists()  # the group stays due
    # The provider recovers: the next run derives from the same group.
    provider.script = [ok({"deductions": [{
        "statement": "Alice enjoys outdoor music festivals.", "kind": "preference",
        "confidence": 0.9, "contributors": ["S1", "S2"]}]})]
    again = workers.deduce(w.account.id)
    assert (again["groups"], again["created"], again["failed"]) == (1, 1, 0)
    with account_context(w.account.id):
        assert Knowledge.objects.filter(extractor="deduction").count() == 1
