"""MCP over Streamable HTTP at /mcp/, driven by the MCP SDK's own Streamable HTTP client
against a real served instance (live_server) with committed data."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client

from knowledge import services
from memhouse.core.tenancy import account_context
from memhouse.mcp import tools as mcp_tools
from tests.retrieval.test_search import corpus  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)


def run_mcp(url: str, key: str | None,
            body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Connect the SDK's Streamable HTTP client to `url` with `key`, initialise, run
    `body`. (docs/integrations.md shows this snippet.)"""
    headers = {"Authorization": f"Bearer {key}"} if key else {}

    async def main() -> Any:
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http, \
                streamable_http_client(url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            with anyio.fail_after(120):
                return await body(session)

    return anyio.run(main)


def first_tool(names: list[str], *words: str) -> str:
    """A generic agent harness: the first tool whose name contains any of `words`."""
    return next(n for n in names if any(w in n for w in words))


def test_list_tools_add_then_search_and_read_the_statement(live_server, corpus):  # noqa: F811
    w, ids = corpus

    async def body(session: ClientSession) -> dict[str, Any]:
        tools = (await session.list_tools()).tools
        names = [t.name for t in tools]
        store, recall = first_tool(names, "add", "store"), first_tool(names, "search", "recall")
        out: dict[str, Any] = {"tools": tools, "store": store, "recall": recall}
        out["added"] = await session.call_tool(store, {
            "scope": "/marketing/social", "session": "mcp-http-1", "messages": [
                {"id": "mcp-http-1:1", "peer_key": "bob", "occurred_at": "2024-03-03T10:00:00Z",
                 "text": "I play the cello every Sunday."}]})
        out["found"] = await session.call_tool(recall, {
            "query": "Does Bob play the cello?", "scope": "/marketing/social", "peer_key": "bob"})
        out["listed"] = await session.call_tool("list_knowledge", {
            "peer_key": "alice", "scope": "/marketing/social", "limit": 3})
        out["one"] = await session.call_tool("get_knowledge", {
            "knowledge_id": ids["asthma"], "peer_key": "alice"})
        out["hidden"] = await session.call_tool("get_knowledge", {
            "knowledge_id": ids["asthma"], "peer_key": "bob"})
        out["context"] = await session.call_tool("get_context", {
            "scope": "/marketing/social", "peer_key": "alice", "query": "support group"})
        out["lineage"] = await session.call_tool("lineage", {
            "knowledge_id": ids["support"], "peer_key": "alice"})
        out["profile"] = await session.call_tool("stable_profile", {"peer_key": "alice"})
        out["ask"] = await session.call_tool("ask", {
            "query": "Where did Alice go for support?", "scope": "/marketing/social",
            "peer_key": "alice"})
        return out

    out = run_mcp(f"{live_server.url}/mcp/", w.agent_key, body)

    tools = {t.name: t for t in out["tools"]}
    assert [t.name for t in out["tools"]] == list(mcp_tools.TOOL_NAMES)
    assert (out["store"], out["recall"]) == ("add_messages", "search")
    for name, tool in tools.items():
        hints = tool.annotations
        assert hints is not None and hints.destructive_hint is False
        assert hints.read_only_hint is (name != "add_messages")
        assert hints.idempotent_hint is (name != "add_messages")
        assert not {"account", "account_id", "account_key"} & set(
            tool.input_schema.get("properties", {}))
    assert tools["list_knowledge"].input_schema["properties"]["kind"]["anyOf"][0]["enum"] == \
        list(mcp_tools.KINDS)

    assert not out["added"].is_error, out["added"].content
    assert out["added"].structured_content["messages"][0]["status"] == "created"
    found = out["found"].structured_content["candidates"]
    assert found and "cello" in found[0]["statement"]

    listed = out["listed"].structured_content
    assert len(listed["items"]) == 3 and listed["next_cursor"]
    assert listed["reader_posture"] == "peer"
    assert out["one"].structured_content["knowledge"]["id"] == ids["asthma"]
    hidden = out["hidden"]
    assert hidden.is_error and hidden.structured_content["error"]["code"] == "not_found"
    assert "support group" in out["context"].structured_content["context"]
    assert ids["support"] in out["lineage"].content[0].text
    assert not out["profile"].is_error and not out["ask"].is_error


def test_act_for_and_argument_errors_use_the_error_shape(live_server, committed_world):
    w = committed_world
    with account_context(w.account.id):  # an agent whose key has no act-for grant
        agent = services.peer_create(account_id=w.account.id, key="solo", kind="agent",
                                     display_name="Solo")
        _, key = services.credential_create(account_id=w.account.id, peer=agent)

    async def body(session: ClientSession) -> dict[str, Any]:
        return {
            "act_for": await session.call_tool("search", {"query": "hello",
                                                          "peer_key": "alice"}),
            "act_for_add": await session.call_tool("add_messages", {
                "scope": "/", "messages": [{"peer_key": "alice", "text": "I like tea."}]}),
            "missing": await session.call_tool("search", {"scope": "/"}),
            "wrong_type": await session.call_tool("list_knowledge", {"limit": "many",
                                                                     "kind": "gossip"}),
            "not_uuid": await session.call_tool("get_knowledge", {"knowledge_id": "../me"}),
            "extra": await session.call_tool("add_messages", {
                "scope": "/", "messages": [{"text": "Hi there, I am Solo.", "mood": "x"}]}),
            "api_bound": await session.call_tool("list_knowledge", {"limit": 5000}),
            "unknown": await session.call_tool("forget_everything", {}),
        }

    out = run_mcp(f"{live_server.url}/mcp/", key, body)

    for case in ("act_for", "act_for_add"):
        error = out[case].structured_content["error"]
        assert out[case].is_error and (error["code"], error["status"]) == ("act_for_denied", 403)
    expected = {"missing": {"query"}, "wrong_type": {"limit", "kind"},
                "not_uuid": {"knowledge_id"}, "extra": {"messages.0.mood"}}
    for case, fields in expected.items():
        result = out[case]
        assert result.is_error, case
        error = result.structured_content["error"]
        assert error["code"] == "invalid_input" and error["message"], case
        assert set(error["details"]) == fields, (case, error)
        assert all(isinstance(m, str) for ms in error["details"].values() for m in ms)
        text = result.content[0].text
        assert "pydantic" not in text and "validation error" not in text, text
        assert "../me" not in text and "gossip" not in text  # values are not echoed
    bound = out["api_bound"].structured_content["error"]
    assert (bound["code"], bound["status"]) == ("invalid_input", 400)
    assert "limit" in bound["details"]
    assert out["unknown"].structured_content["error"]["code"] == "unknown_tool"


def test_no_key_or_a_bad_key_is_401(live_server):
    url = f"{live_server.url}/mcp/"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers, code in (({}, "not_authenticated"),
                          ({"Authorization": "Bearer mh_bogus_secret"}, "authentication_failed")):
        r = httpx.post(url, json=init, headers={**accept, **headers}, timeout=30)
        assert r.status_code == 401, r.text
        assert r.json()["error"]["code"] == code and r.json()["error"]["message"]
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
        r = httpx.get(url, headers=headers, timeout=30)
        assert r.status_code == 401
    # The SDK client cannot even initialise: the HTTP error becomes its MCPError.
    with pytest.raises(BaseException) as err:
        run_mcp(url, None, lambda session: session.list_tools())
    assert any(isinstance(e, MCPError) for e in _leaves(err.value)), repr(err.value)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def test_stateless_json_mode_over_plain_http(live_server, committed_world):
    """The wire: JSON answers, no session id, 202 for a notification, 405 for GET."""
    url = f"{live_server.url}/mcp"
    headers = {"Authorization": f"Bearer {committed_world.agent_key}",
               "Accept": "application/json, text/event-stream"}
    r = httpx.post(url, headers=headers, timeout=30, json={
        "jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in r.headers
    assert [t["name"] for t in r.json()["result"]["tools"]] == list(mcp_tools.TOOL_NAMES)
    r = httpx.post(url, headers=headers, timeout=30, json={
        "jsonrpc": "2.0", "method": "notifications/initialized"})
    assert r.status_code == 202
    r = httpx.get(f"{url}/", headers=headers, timeout=30)
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
    r = httpx.post(url, headers={**headers, "Origin": "https://evil.example"}, timeout=30,
                   json={"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {}})
    assert r.status_code == 403


def test_gunicorn_sync_workers_serve_mcp_as_the_dockerfile_runs_them(corpus, tmp_path):  # noqa: F811
    """The Dockerfile's server (gunicorn, sync workers) on the committed database."""
    import os
    import subprocess
    import time
    from pathlib import Path

    from tests.memhouse.test_ops_compose import ROOT, _database_url, _free_port

    w, ids = corpus
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMHOUSE_", "CELERY_"))}
    env.update(DATABASE_URL=_database_url(), MEMHOUSE_SECRET_KEY="gunicorn-mcp-test-key",
               MEMHOUSE_ALLOWED_HOSTS="localhost,127.0.0.1", MEMHOUSE_RATE_LIMIT_PER_MINUTE="0")
    log_path = tmp_path / "gunicorn.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("gunicorn")), "memhouse.wsgi", "--bind",
             f"127.0.0.1:{port}", "--workers", "1", "--timeout", "120"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90
            while True:
                assert proc.poll() is None, log_path.read_text()
                try:
                    httpx.get(f"{base}/healthz", timeout=5)
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "gunicorn did not answer in time"
                    time.sleep(0.5)

            async def body(session: ClientSession) -> dict[str, Any]:
                return {
                    "tools": [t.name for t in (await session.list_tools()).tools],
                    "listed": await session.call_tool("list_knowledge", {
                        "peer_key": "alice", "scope": "/marketing/social", "limit": 50}),
                    "added": await session.call_tool("add_messages", {
                        "scope": "/marketing/social", "messages": [
                            {"peer_key": "bob", "text": "I keep bees on my roof."}]}),
                }

            out = run_mcp(f"{base}/mcp/", w.agent_key, body)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert out["tools"] == list(mcp_tools.TOOL_NAMES), log_path.read_text()
    assert ids["support"] in {k["id"] for k in out["listed"].structured_content["items"]}
    assert out["added"].structured_content["messages"][0]["status"] == "created"
