"""Abuse limits over real HTTP (issue #16, #34): deeply nested JSON is a 400 on every JSON
endpoint (the unauthenticated /auth/token included), and ingest text is budgeted per
request (413) and per acting peer over a rolling window (429 with Retry-After), with an
Account-wide ceiling; a fresh credential for the same peer shares the peer's budget, as
does the request rate limit."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from knowledge import services
from knowledge.models import Message, UsageEntry
from memhouse.core.tenancy import account_context
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


def _send(live_server: Any, key: str, tag: str, size: int = 580) -> httpx.Response:
    return api(live_server, key, "POST", "messages", json={
        "scope": "/", "messages": [{"peer_key": "caroline",
                                    "text": f"I like tea {tag}. " + "y" * size}]})


def test_ingest_text_is_budgeted_per_peer_over_a_window(target, live_server, settings):
    w = target
    settings.MEMHOUSE_INGEST_CHARS_PER_WINDOW = 1_000
    settings.MEMHOUSE_INGEST_WINDOW_SECONDS = 600
    with account_context(w.account.id):
        _, second_key = services.credential_create(account_id=w.account.id, peer=w.agent,
                                                    act_for_all=True)
        other = services.peer_create(account_id=w.account.id, key="courier", kind="agent")
        _, other_key = services.credential_create(account_id=w.account.id, peer=other,
                                                   act_for_all=True)

    assert _send(live_server, w.agent_key, "one").status_code == 202
    refused = _send(live_server, w.agent_key, "two")
    error = assert_error(refused, 429, "rate_limited")
    assert "budget" in error["message"], error
    assert 1 <= int(refused.headers["Retry-After"]) <= 601
    # A second key of the same agent spends the same budget; another agent has its own.
    assert_error(_send(live_server, second_key, "again"), 429, "rate_limited")
    assert _send(live_server, other_key, "three").status_code == 202
    with account_context(w.account.id):
        assert Message.objects.count() == 2
        spent = UsageEntry.objects.filter(kind="ingest_chars").values_list("units", flat=True)
        assert sorted(spent) == [len("I like tea one. ") + 580, len("I like tea three. ") + 580]


def _sign_in(live_server: Any, username: str, password: str) -> str:
    r = httpx.post(f"{live_server.url}/api/v1/auth/token", timeout=60,
                   json={"username": username, "password": password})
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


def test_a_human_signing_in_again_gets_no_fresh_budget(target, live_server, settings):
    settings.MEMHOUSE_INGEST_CHARS_PER_WINDOW = 1_000
    settings.MEMHOUSE_INGEST_WINDOW_SECONDS = 600

    def say(token: str, tag: str) -> httpx.Response:
        return api(live_server, token, "POST", "messages", json={
            "scope": "/", "messages": [{"text": f"I like tea {tag}. " + "z" * 580}]})

    assert say(_sign_in(live_server, "alice", "alice-pass-123"), "one").status_code == 202
    assert_error(say(_sign_in(live_server, "alice", "alice-pass-123"), "two"), 429,
                 "rate_limited")
    assert say(_sign_in(live_server, "bob", "bob-pass-1234"), "three").status_code == 202


def test_the_account_has_one_ceiling_and_other_accounts_are_untouched(target, live_server,
                                                                       settings):
    w = target
    settings.MEMHOUSE_INGEST_CHARS_PER_WINDOW = 1_000
    settings.MEMHOUSE_INGEST_CHARS_PER_ACCOUNT_WINDOW = 1_500
    settings.MEMHOUSE_INGEST_WINDOW_SECONDS = 600
    with account_context(w.account.id):
        keys = []
        for i in range(3):
            peer = services.peer_create(account_id=w.account.id, key=f"bot{i}", kind="agent")
            keys.append(services.credential_create(account_id=w.account.id, peer=peer,
                                                   act_for_all=True)[1])
    with account_context(w.other_account.id):
        services.peer_create(account_id=w.other_account.id, key="caroline", kind="human")
        outsider_bot = services.peer_create(account_id=w.other_account.id, key="bot",
                                            kind="agent")
        _, outsider_key = services.credential_create(
            account_id=w.other_account.id, peer=outsider_bot, act_for_all=True)
    assert _send(live_server, keys[0], "one").status_code == 202
    assert _send(live_server, keys[1], "two").status_code == 202
    error = assert_error(_send(live_server, keys[2], "three"), 429, "rate_limited")
    assert "Account" in error["message"], error
    # Another Account's budget is its own.
    assert _send(live_server, outsider_key, "four").status_code == 202


def test_the_request_rate_limit_is_per_peer_with_an_account_ceiling(target, live_server,
                                                                     settings):
    import time

    w = target
    settings.MEMHOUSE_RATE_LIMIT_PER_MINUTE = 3
    settings.MEMHOUSE_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE = 6
    if time.time() % 60 > 45:  # keep the calls inside one fixed window
        time.sleep(61 - time.time() % 60)
    tokens = [_sign_in(live_server, "alice", "alice-pass-123") for _ in range(4)]
    codes = [api(live_server, t, "GET", "me").status_code for t in tokens]
    assert codes == [200, 200, 200, 429]  # four sign-ins, one person, one budget
    bob = _sign_in(live_server, "bob", "bob-pass-1234")
    assert api(live_server, bob, "GET", "me").status_code == 200
    assert api(live_server, bob, "GET", "me").status_code == 200
    # Bob's third is within his own three, but the Account's seventh this minute.
    r = api(live_server, bob, "GET", "me")
    assert_error(r, 429, "rate_limited")
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    assert api(live_server, w.outsider_key, "GET", "me").status_code == 200
