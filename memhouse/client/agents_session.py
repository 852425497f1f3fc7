"""An OpenAI Agents SDK session whose turns flow into MemHouse, and memory tools.

    from agents import Agent, Runner
    from memhouse.client import MemHouseClient
    from memhouse.client.agents_session import MemHouseSession, memhouse_tools

    mh = MemHouseClient(url, key)
    session = MemHouseSession("chat-42", mh, scope="/demo", user_peer_key="alice")
    agent = Agent(name="helper", tools=memhouse_tools(mh, "/demo", "alice"))
    await Runner.run(agent, "I moved to Porto.", session=session)

Needs the optional extra `memhouse[agents]`. What each method does:

* `add_items(items)` ingests every user and assistant message with text into MemHouse
  (POST /messages, in the MemHouse session `session_id`, scope `scope`), user turns
  spoken by `user_peer_key` and assistant turns by `assistant_peer_key` (None: the API
  key's own peer; naming another peer needs the key's act-for grant, as in REST). From
  there extraction makes governed knowledge of them; the call waits up to `wait` seconds
  (default 5, at most 10, 0: not at all) for that to finish, so a search right after a
  turn finds what it said. Only then are the items appended
  to the conversation view, so a refused ingest (e.g. `act_for_denied`) leaves the view
  unchanged. Tool calls, tool outputs, reasoning and system/developer items are kept in
  the view only: they are not statements anyone made.
* `get_items(limit)` reads the conversation view, in order. The view is an Agents SDK
  `SQLiteSession` (in memory by default; pass `history=SQLiteSession(id, "chat.db")` to
  keep it on disk). It is not read back from MemHouse, on purpose: MemHouse shows a raw
  message only to its speaker or to a reader who may see everything derived from it, so
  a read-back would return a conversation with holes (the other side's turns), and a
  read that returned them all would widen what a key may read.
* `pop_item()` removes the last item from the view only. The message MemHouse already
  holds stays governed memory (it was said); it is not silently dropped.
* `clear_session()` empties the view only, for the same reason. Removing what was
  ingested is an erasure, which an Account administrator does with POST /api/v1/erasure;
  `ingested_message_ids` lists the MemHouse ids this object ingested, for that purpose.

`memhouse_tools(client, scope, peer_key)` returns two function tools, `search_memory`
and `ask_memory`, reading for `peer_key` under the key's act-for grant. A MemHouse error
(e.g. `act_for_denied`) becomes the tool's text result (`MemHouse error <code>: ...`) so
the model sees why, instead of failing the run; arguments that do not fit the tool's
schema give `Tool error: Invalid JSON input for tool <name>`.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from typing import Any

from agents import FunctionTool, function_tool
from agents.items import TResponseInputItem
from agents.memory import Session, SessionABC, SQLiteSession

from memhouse.client.client import MemHouseClient, Message
from memhouse.client.errors import MemHouseError

__all__ = ["MemHouseSession", "item_text", "memhouse_tools"]

MAX_CLIENT_ID = 200  # a message's client id in MemHouse
INGESTED_ROLES = ("user", "assistant")
# How long add_items waits for its turns to be processed (POST /messages `wait`), so a
# read right after a write finds it.
DEFAULT_WAIT_SECONDS = 5.0


def item_text(item: Any) -> str | None:
    """The text of a conversational message item (user or assistant), or None for tool
    calls, tool outputs, reasoning and anything else without a speaker's words."""
    if not isinstance(item, dict) or item.get("type", "message") != "message":
        return None
    content = item.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(part["text"] for part in content if isinstance(part, dict)
                         and part.get("type") in ("input_text", "output_text", "text")
                         and isinstance(part.get("text"), str))
    else:
        return None
    return text if text.strip() else None


class MemHouseSession(SessionABC):
    """Agents SDK session: every user/assistant turn is ingested into MemHouse; the
    ordered conversation view lives in an Agents SDK session (`history`)."""

    def __init__(self, session_id: str, client: MemHouseClient, *, scope: str,
                 user_peer_key: str | None = None, assistant_peer_key: str | None = None,
                 roles: Sequence[str] = INGESTED_ROLES, history: Session | None = None,
                 wait: float = DEFAULT_WAIT_SECONDS) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValueError("session_id is a non-empty string")
        if len(session_id) > MAX_CLIENT_ID - 33:  # room for ":" + a 32-hex message id
            raise ValueError(f"session_id is at most {MAX_CLIENT_ID - 33} characters")
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= 10:
            raise ValueError("wait is a number of seconds from 0 to 10")
        unknown = set(roles) - set(INGESTED_ROLES)
        if unknown:
            raise ValueError(f"roles are among {INGESTED_ROLES}, not {sorted(unknown)}")
        self.session_id = session_id
        self.client = client
        self.scope = scope
        self.speakers = {"user": user_peer_key, "assistant": assistant_peer_key}
        self.roles = tuple(roles)
        self.history: Session = history if history is not None else SQLiteSession(session_id)
        self.ingested_message_ids: list[str] = []
        self.wait = wait

    def _messages(self, items: list[TResponseInputItem]) -> list[Message]:
        out = []
        for item in items:
            role = item.get("role") if isinstance(item, dict) else None
            text = item_text(item)
            if role in self.roles and text is not None:
                out.append(Message(text, peer_key=self.speakers[str(role)],
                                   id=f"{self.session_id}:{uuid.uuid4().hex}",
                                   metadata={"source": "openai-agents", "role": role}))
        return out

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        return await self.history.get_items(limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        messages = self._messages(items)
        if messages:
            result = await asyncio.to_thread(self.client.ingest_messages, self.scope,
                                             messages, self.session_id,
                                             wait=self.wait or None)
            self.ingested_message_ids += [m["id"] for m in result["messages"]]
        await self.history.add_items(items)

    async def pop_item(self) -> TResponseInputItem | None:
        return await self.history.pop_item()

    async def clear_session(self) -> None:
        await self.history.clear_session()


def _error_text(exc: MemHouseError) -> str:
    return f"MemHouse error {exc.code}: {exc.message}"


def memhouse_tools(client: MemHouseClient, scope: str,
                   peer_key: str | None = None) -> list[FunctionTool]:
    """`search_memory` and `ask_memory` function tools reading `scope` for `peer_key`."""

    def search_memory(query: str, limit: int = 5) -> str:
        """Search governed memory for statements relevant to the query.

        Args:
            query: What to look for, in natural language.
            limit: How many statements to return (1 to 50).
        """
        try:
            found = client.search(query, scope=scope, peer_key=peer_key, limit=limit)
        except MemHouseError as exc:
            return _error_text(exc)
        return json.dumps([{"id": c["id"], "statement": c["statement"], "state": c["state"],
                            "scope": c["scope"]} for c in found["candidates"]])

    def ask_memory(question: str) -> str:
        """Answer a question from governed memory, with the ids of the statements cited.

        Args:
            question: The question, in natural language.
        """
        try:
            answer = client.ask(question, scope, peer_key=peer_key)
        except MemHouseError as exc:
            return _error_text(exc)
        return json.dumps({"answer": answer.get("answer"),
                           "citations": [c["id"] for c in answer.get("citations", [])]})

    # The SDK's default failure text hides why; arguments that fail the tool's schema
    # get the validation message instead, so the model can correct its call.
    return [function_tool(f, failure_error_function=_tool_failure)
            for f in (search_memory, ask_memory)]


def _tool_failure(ctx: Any, error: Exception) -> str:
    # The SDK leaves the argument values out of this message unless tool-data logging is
    # on (agents._debug.DONT_LOG_TOOL_DATA); it still names the tool and the problem.
    return f"Tool error: {error}"
