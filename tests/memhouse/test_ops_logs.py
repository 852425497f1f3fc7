"""Structured logs never carry statement or query text: a distinctive sentence goes through
ingest (with a failing LLM extractor, so the degraded path logs too), the pipeline, search
and ask, with every log record of every logger captured as JSON at DEBUG level."""

from __future__ import annotations

import io
import json
import logging

import httpx
import pytest

from knowledge import services
from knowledge.models import Knowledge
from memhouse.core.tenancy import account_context
from memhouse.observability import JsonFormatter
from tests.fake_llm import Reply
from tests.memhouse.test_ops_metering import provider  # noqa: F401  (fixture)

SENTENCE = "I polished the quartz telescope of Zephyrine Okonkwo-Vale yesterday."
WORDS = ("quartz", "telescope", "Zephyrine", "Okonkwo")


@pytest.fixture
def json_log():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.mark.django_db(transaction=True)
def test_no_statement_or_query_text_reaches_the_logs(live_server, committed_world,
                                                     provider, json_log):  # noqa: F811
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
    auth = {"Authorization": f"Bearer {w.agent_key}"}
    provider.script = [Reply(503, {"error": {"message": "overloaded"}})]
    r = httpx.post(f"{live_server.url}/api/v1/messages", headers=auth, timeout=60, json={
        "scope": "/", "messages": [{"peer_key": "caroline", "text": SENTENCE, "id": "z1"}]})
    assert r.status_code == 202
    with account_context(w.account.id):  # the rule-based fallback stored a statement
        statements = list(Knowledge.objects.values_list("statement", flat=True))
    assert any("telescope" in s for s in statements)
    for path, body in (("search", {"query": "quartz telescope Zephyrine"}),
                       ("ask", {"query": "Who owns the quartz telescope?", "scope": "/",
                                "peer_key": "caroline"})):
        provider.script = [Reply(503, {"error": {"message": "overloaded"}})]
        assert httpx.post(f"{live_server.url}/api/v1/{path}", headers=auth, timeout=60,
                          json=body).status_code == 200
    text = json_log.getvalue()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert any(line.get("purpose") for line in lines)  # the model-call lines were captured
    assert any("extractor" in line["message"] for line in lines)  # and the degraded path
    for needle in (SENTENCE, *statements, *WORDS):
        assert needle not in text, needle
