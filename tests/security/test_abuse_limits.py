"""Abuse limits over real HTTP (issue #16): deeply nested JSON is a 400 on every JSON
endpoint (the unauthenticated /auth/token included), and ingest text is budgeted per
request (413) and per credential over a rolling window (429 with Retry-After)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from knowledge import services
from knowledge.models import Message, UsageEntry
from memhouse.tenancy import account_context
from tests.reliability.helpers import api, assert_error

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def target(committed_world: Any, live_server: Any) -> Any:
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
    return w


def _post_raw(live_server: Any, path: str, body: bytes, key: str | None = None
              ) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(f"{live_server.url}/api/v1/{path}", content=body, headers=headers,
                      timeout=60)


def _nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def test_deeply_nested_json_is_a_400_everywhere(target, live_server):
    w = target
    bomb = b"[" * 100_000
    for path, key in (("auth/token", None), ("messages", w.agent_key), ("search", w.agent_key),
                      ("peers", w.agent_key)):
        assert_error(_post_raw(live_server, path, bomb, key), 400, "malformed_request")
    # Below the interpreter's recursion limit but far deeper than any request needs.
    deep = json.dumps({"query": "x", "candidate_filter": _nested(500)}).encode()
    assert_error(_post_raw(live_server, "search", deep, w.agent_key), 400, "malformed_request")
    # Metadata has a tighter limit of its own, reported on the field.
    r = api(live_server, w.agent_key, "POST", "messages", json={
        "scope": "/", "messages": [{"peer_key": "caroline", "text": "I like tea.",
                                    "metadata": _nested(20)}]})
    error = assert_error(r, 400, "invalid_input")
    assert "nest" in json.dumps(error["details"]), error
    with account_context(w.account.id):
        assert not Message.objects.exists()
    # Ordinary nesting still works.
    ok = api(live_server, w.agent_key, "POST", "messages", json={
        "scope": "/", "messages": [{"peer_key": "caroline", "text": "I like tea.",
                                    "metadata": _nested(3, [1, {"b": 2}])}]})
    assert ok.status_code == 202, ok.text


def test_ingest_text_is_budgeted_per_request(target, live_server, settings):
    w = target
    settings.MEMHOUSE_MAX_REQUEST_CHARS = 1_000
    texts = [f"I like tea number {i}. " + "x" * 380 for i in range(3)]  # ~1,200 characters
    r = api(live_server, w.agent_key, "POST", "messages", json={
        "scope": "/", "messages": [{"peer_key": "caroline", "text": t} for t in texts]})
    error = assert_error(r, 413, "request_too_large")
    assert "1000" in error["message"], error
    with account_context(w.account.id):
        assert not Message.objects.exists()
    r = api(live_server, w.agent_key, "POST", "messages", json={
        "scope": "/", "messages": [{"peer_key": "caroline", "text": t} for t in texts[:2]]})
    assert r.status_code == 202, r.text


def test_ingest_text_is_budgeted_per_credential_over_a_window(target, live_server, settings):
    w = target
    settings.MEMHOUSE_INGEST_CHARS_PER_WINDOW = 1_000
    settings.MEMHOUSE_INGEST_WINDOW_SECONDS = 600
    with account_context(w.account.id):
        _, second_key = services.credential_create(account_id=w.account.id, peer=w.agent,
                                                    act_for_all=True)

    def send(key: str, tag: str) -> httpx.Response:
        return api(live_server, key, "POST", "messages", json={
            "scope": "/", "messages": [{"peer_key": "caroline",
                                        "text": f"I like tea {tag}. " + "y" * 580}]})

    assert send(w.agent_key, "one").status_code == 202
    refused = send(w.agent_key, "two")
    error = assert_error(refused, 429, "rate_limited")
    assert "budget" in error["message"], error
    assert 1 <= int(refused.headers["Retry-After"]) <= 601
    # Another credential has its own budget; the ledger holds what was accepted.
    assert send(second_key, "three").status_code == 202
    with account_context(w.account.id):
        assert Message.objects.count() == 2
        spent = UsageEntry.objects.filter(kind="ingest_chars").values_list("units", flat=True)
        assert sorted(spent) == [len("I like tea one. ") + 580, len("I like tea three. ") + 580]
