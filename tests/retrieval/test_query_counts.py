"""Query counts of the read and write hot paths, pinned (issue 20 item 6).

Counted on the request's own connection (CaptureQueriesContext), through Django's full
request stack: authentication, the request transaction, the view, the usage ledger. The
search strategies run on their own pooled connections (retrieval.engine), so a pin here
is the per-request overhead around them, which is what grows when a selector is called
twice. Pins are today's count plus a little slack; a change that needs more queries
should say why in the pin.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from knowledge import services
from tests.factories import active_statement

pytestmark = pytest.mark.django_db

# Measured 2026-12-04 (search 15, context 17, ingest of 5 messages 40; before
# scope_for_read kept the chain, search was 19 with the chain read 4 times, context 19).
SEARCH_MAX = 17
CONTEXT_MAX = 19
INGEST_MAX = 43
# The scope and its ancestors (`path IN (...)` on memhouse_scope): read once per request.
_CHAIN = re.compile(r'FROM "memhouse_scope" WHERE .*"memhouse_scope"\."path" IN \(')


def _post(world: Any, path: str, body: dict[str, Any]) -> tuple[int, Any, list[str]]:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {world.agent_key}")
    with CaptureQueriesContext(connection) as queries:
        r = client.post(path, json.dumps(body), content_type="application/json")
    return r.status_code, r.json(), [q["sql"] for q in queries.captured_queries]


@pytest.fixture
def corpus(world: Any) -> Any:
    deep = services.scope_ensure(account_id=world.account.id, path="/marketing/social/emea")
    for n in range(3):
        active_statement(world, f"Alice enjoys trail number {n} on weekends", scope=deep)
    return world


def test_search_reads_the_scope_chain_once(corpus: Any) -> None:
    status, body, sql = _post(corpus, "/api/v1/search", {
        "query": "trail weekends", "scope": "/marketing/social/emea", "peer_key": "alice",
        "include_identity_profile": True})
    assert status == 200, body
    assert sum(1 for q in sql if _CHAIN.search(q)) == 1, [q for q in sql if _CHAIN.search(q)]
    assert len(sql) <= SEARCH_MAX, "\n".join(sql)


def test_context_query_count(corpus: Any) -> None:
    status, body, sql = _post(corpus, "/api/v1/context", {
        "scope": "/marketing/social/emea", "peer_key": "alice", "query": "trail"})
    assert status == 200, body
    assert len(sql) <= CONTEXT_MAX, "\n".join(sql)


def test_ingest_query_count(corpus: Any) -> None:
    messages = [{"peer_key": "alice", "text": f"I went hiking on trail {n} today."}
                for n in range(5)]
    status, body, sql = _post(corpus, "/api/v1/messages", {
        "scope": "/marketing/social/emea", "session": "s1", "messages": messages})
    assert status in (200, 201, 202), body
    assert len(sql) <= INGEST_MAX, "\n".join(sql)
