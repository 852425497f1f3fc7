"""The usage ledger and per-credential rate limits, over real HTTP (counters in Redis)."""

from __future__ import annotations

import time

import httpx
import pytest

from knowledge import services
from knowledge.models import UsageEntry
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)


def _call(live_server, key, method, path, **kw) -> httpx.Response:
    return httpx.request(method, f"{live_server.url}/api/v1/{path}", timeout=30,
                         headers={"Authorization": f"Bearer {key}"}, **kw)


def test_metered_calls_land_in_the_ledger_and_sum_per_caller(live_server, committed_world):
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
    r = _call(live_server, w.agent_key, "POST", "messages", json={
        "scope": "/", "messages": [{"peer_key": "caroline", "text": "I like tea.", "id": "1"},
                                   {"peer_key": "caroline", "text": "I like jam.", "id": "2"}]})
    assert r.status_code == 202
    _call(live_server, w.agent_key, "POST", "messages", json={
        "scope": "/", "messages": [{"peer_key": "caroline", "text": "I like tea.", "id": "1"}]})
    assert _call(live_server, w.agent_key, "POST", "search", json={"query": "tea"}).status_code \
        == 200
    bad = _call(live_server, w.agent_key, "POST", "search", json={"query": ""})
    assert bad.status_code == 400  # failed calls are not billed
    body = _call(live_server, w.agent_key, "GET", "usage").json()
    assert body["scope"] == "credential"
    # the resent message is free; ingest_chars meters the stored text (item 6 budget)
    assert body["totals"] == {"ingest": 2, "ingest_chars": 22, "search": 1}
    with account_context(w.account.id):
        assert UsageEntry.objects.filter(kind="ingest").count() == 1
    r = _call(live_server, w.agent_key, "GET", "usage", params={"since": "yesterday"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_since"
    other = _call(live_server, w.outsider_key, "GET", "usage").json()
    assert other["totals"] == {}  # another Account's ledger is invisible


def test_rate_limit_answers_429_with_retry_after_per_credential(live_server, committed_world,
                                                                settings):
    w = committed_world
    settings.MEMHOUSE_RATE_LIMIT_PER_MINUTE = 3
    if time.time() % 60 > 50:  # keep the five calls inside one fixed window
        time.sleep(61 - time.time() % 60)
    codes = [_call(live_server, w.agent_key, "GET", "me").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    r = _call(live_server, w.agent_key, "GET", "me")
    assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    # Another credential has its own budget.
    assert _call(live_server, w.outsider_key, "GET", "me").status_code == 200
