"""Fixtures for governance tests: persona API keys and the fake generation provider."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge import services
from memhouse.core.tenancy import account_context
from tests.fake_llm import FakeOpenAI
from tests.governance.helpers import Keys


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
def fake_llm(fake_openai: FakeOpenAI, settings: Any) -> FakeOpenAI:
    settings.MEMHOUSE_LLM_API_KEY = "sk-test"
    settings.MEMHOUSE_LLM_MAX_RETRIES = 0
    return fake_openai
