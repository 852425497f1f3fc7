"""Fixtures for governance tests: persona API keys and a fake generation provider."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from knowledge import services
from memhouse.tenancy import account_context
from tests.governance.helpers import FakeProvider, Keys


@pytest.fixture
def keys(committed_world: Any) -> Keys:
    w = committed_world
    with account_context(w.account.id):
        dave = services.peer_create(account_id=w.account.id, key="dave", kind="human",
                                    display_name="Dave", is_admin=True)
        out = {}
        for name, peer in (("alice", w.subject), ("bob", w.member), ("carol", w.curator),
                           ("dave", dave)):
            _, out[name] = services.credential_create(account_id=w.account.id, peer=peer)
    return Keys(scribe=w.agent_key, mallory=w.outsider_key, **out)



@pytest.fixture
def fake_llm(settings: Any) -> Iterator[FakeProvider]:
    fake = FakeProvider()
    fake.thread.start()
    settings.MEMHOUSE_LLM_BASE_URL = fake.base_url
    settings.MEMHOUSE_LLM_MODEL = "test-model"
    settings.MEMHOUSE_LLM_API_KEY = "sk-test"
    settings.MEMHOUSE_LLM_MAX_RETRIES = 0
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
