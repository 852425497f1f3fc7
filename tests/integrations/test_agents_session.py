"""memhouse.client.agents_session with the real `openai-agents` package against a real
live_server (real HTTP, real PostgreSQL): the Session protocol and the memory function
tools, driven without a Runner (no model call)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from knowledge import services
from memhouse.client import MemHouseClient, PermissionDeniedError, ValidationError
from memhouse.core.tenancy import account_context

try:  # the optional extra memhouse[agents]; CI installs it (the dev extra)
    from agents import FunctionTool
    from agents.memory import Session, SQLiteSession
    from agents.tool_context import ToolContext

    from memhouse.client.agents_session import MemHouseSession, item_text, memhouse_tools
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"openai-agents is not installed ({exc}); CI must test the "
                           "Agents SDK session: install the dev extra") from exc
    pytest.skip(f"openai-agents not installed: {exc}", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)
SCOPE = "/demo"
USER = {"role": "user", "content": "I love hiking with my dog."}
ASSISTANT = {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
             "content": [{"type": "output_text", "text": "Hiking with a dog sounds great!",
                          "annotations": []}]}
CALL = {"type": "function_call", "call_id": "call_1", "name": "search_memory",
        "arguments": "{\"query\": \"hiking\", \"limit\": 5}"}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "[]"}


@pytest.fixture
def mh(live_server, committed_world) -> Iterator[MemHouseClient]:
    with MemHouseClient(live_server.url, committed_world.agent_key, timeout=60) as client:
        client.create_scope(SCOPE)
        yield client


def _solo_key(world) -> str:
    """An agent key without an act-for grant."""
    with account_context(world.account.id):
        agent = services.peer_create(account_id=world.account.id, key="solo", kind="agent",
                                     display_name="Solo")
        _, key = services.credential_create(account_id=world.account.id, peer=agent)
    return key


def call_tool(tool: FunctionTool, **arguments: Any) -> Any:
    """Invoke a function tool the way the Runner does, without a Runner or a model."""
    args = json.dumps(arguments)
    ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id="call_1",
                      tool_arguments=args)
    return asyncio.run(tool.on_invoke_tool(ctx, args))


def statements(mh: MemHouseClient, query: str) -> list[str]:
    found = mh.search(query, scope=SCOPE, peer_key="alice")["candidates"]
    return [c["statement"] for c in found]


def test_session_turns_flow_into_governed_memory(mh):
    session = MemHouseSession("chat-7", mh, scope=SCOPE, user_peer_key="alice")
    assert isinstance(session, Session)  # the SDK's runtime-checkable protocol

    async def turn() -> tuple[list[Any], list[Any]]:
        await session.add_items([USER])
        await session.add_items([CALL, OUTPUT, ASSISTANT])
        return await session.get_items(), await session.get_items(limit=2)

    everything, last_two = asyncio.run(turn())
    assert everything == [USER, CALL, OUTPUT, ASSISTANT]  # in order, unchanged
    assert last_two == [OUTPUT, ASSISTANT]
    # Two turns have words (user, assistant); the tool call and output are view-only.
    assert len(session.ingested_message_ids) == 2
    assert any("hiking" in s.lower() for s in statements(mh, "What does Alice love doing?"))
    context = mh.context(SCOPE, peer_key="alice", session="chat-7", query="hiking")
    assert "hiking" in context["context"].lower()

    popped = asyncio.run(session.pop_item())
    assert popped == ASSISTANT
    assert asyncio.run(session.get_items()) == [USER, CALL, OUTPUT]
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == [] and asyncio.run(session.pop_item()) is None
    # The view is empty; what was said stays governed memory (erasure is an admin's act).
    assert any("hiking" in s.lower() for s in statements(mh, "What does Alice love doing?"))
    assert "hiking" in mh.context(SCOPE, peer_key="alice", session="chat-7",
                                  query="hiking")["context"].lower()


def test_a_persistent_view_and_role_choice(mh, tmp_path):
    db = tmp_path / "chat.db"
    first = MemHouseSession("chat-8", mh, scope=SCOPE, user_peer_key="alice",
                            roles=("user",), history=SQLiteSession("chat-8", db))
    asyncio.run(first.add_items([{"role": "user", "content": "I work as a nurse."},
                                 {"role": "assistant", "content": "Nursing is demanding."}]))
    assert len(first.ingested_message_ids) == 1  # only the user's turn was ingested
    again = MemHouseSession("chat-8", mh, scope=SCOPE, user_peer_key="alice",
                            history=SQLiteSession("chat-8", db))
    assert [item_text(i) for i in asyncio.run(again.get_items())] == [
        "I work as a nurse.", "Nursing is demanding."]


def test_memory_tools_search_and_ask(mh):
    mh.ingest_messages(SCOPE, [{"text": "I went to a support group yesterday.",
                                "peer_key": "alice", "id": "t-1"}])
    tools = memhouse_tools(mh, SCOPE, "alice")
    assert [t.name for t in tools] == ["search_memory", "ask_memory"]
    assert tools[0].params_json_schema["required"] == ["query", "limit"]

    found = json.loads(call_tool(tools[0], query="Where did Alice go for support?", limit=3))
    assert found and "support group" in found[0]["statement"]
    answer = json.loads(call_tool(tools[1], question="Where did Alice go for support?"))
    assert answer["citations"] and found[0]["id"] in answer["citations"]

    # Bad arguments: the SDK's own validation answers, the tool never runs.
    bad = call_tool(tools[0], query=42, limit="many")
    assert bad.startswith("Tool error: Invalid JSON input for tool search_memory")
    too_many = call_tool(tools[0], query="support", limit=100000)
    assert too_many.startswith("MemHouse error invalid_input")


def test_adapters_keep_the_act_for_rules(live_server, mh, committed_world):
    mh.ingest_messages(SCOPE, [{"text": "I went to a support group yesterday.",
                                "peer_key": "alice", "id": "t-2"}])
    with MemHouseClient(live_server.url, _solo_key(committed_world)) as solo:
        search, ask = memhouse_tools(solo, SCOPE, "alice")
        assert call_tool(search, query="support group", limit=3).startswith(
            "MemHouse error act_for_denied")
        assert call_tool(ask, question="Where did Alice go?").startswith(
            "MemHouse error act_for_denied")
        session = MemHouseSession("chat-9", solo, scope=SCOPE, user_peer_key="alice")
        with pytest.raises(PermissionDeniedError) as denied:
            asyncio.run(session.add_items([{"role": "user", "content": "I am Alice."}]))
        assert denied.value.code == "act_for_denied"
        assert asyncio.run(session.get_items()) == []  # a refused turn is not in the view
        # Its own words it may record.
        own = MemHouseSession("chat-9", solo, scope=SCOPE)
        asyncio.run(own.add_items([{"role": "assistant", "content": "I am Solo."}]))
        assert len(own.ingested_message_ids) == 1


def test_bad_session_input(mh):
    with pytest.raises(ValueError, match="non-empty"):
        MemHouseSession("", mh, scope=SCOPE)
    with pytest.raises(ValueError, match="at most"):
        MemHouseSession("x" * 200, mh, scope=SCOPE)
    with pytest.raises(ValueError, match="roles"):
        MemHouseSession("s", mh, scope=SCOPE, roles=("system",))
    bad_scope = MemHouseSession("s", mh, scope="/no such scope")
    with pytest.raises(ValidationError) as invalid:
        asyncio.run(bad_scope.add_items([{"role": "user", "content": "Hello there, friend."}]))
    assert invalid.value.code == "invalid_scope_path" and invalid.value.status == 400
    assert asyncio.run(bad_scope.get_items()) == []
    missing = MemHouseSession("s", mh, scope="/never-created")
    with pytest.raises(ValidationError) as unknown:
        asyncio.run(missing.add_items([{"role": "user", "content": "Hello there, friend."}]))
    assert unknown.value.code == "unknown_scope"
    assert item_text({"role": "user", "content": "   "}) is None
    assert item_text(CALL) is None and item_text(OUTPUT) is None


def test_the_documented_example_runs(live_server, committed_world, capsys, monkeypatch):
    from tests.integrations.test_client import _doc_block, documented_env

    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    documented_env(monkeypatch, live_server, committed_world)
    setup = _doc_block(text, "mh.create_peer(")  # the page's scope and peers come first
    exec(compile(setup, "docs/integrations.md", "exec", dont_inherit=True), {})
    capsys.readouterr()  # its list of peers
    example = _doc_block(text, "MemHouseSession(")
    # dont_inherit: run as its own module, without this file's `from __future__` flags.
    exec(compile(example, "docs/integrations.md", "exec", dont_inherit=True), {})
    out = capsys.readouterr().out.splitlines()
    assert "Hiking with a dog sounds great!" in out[0] and "I love hiking" in out[0]
    assert "hiking" in out[1].lower() and "alice" in out[1].lower()
