"""The MemHouse MCP tools, shared by both transports.

`build_server(client)` returns an MCP server whose tools each make one call of a
memhouse.client.MemHouseClient. The stdio server (memhouse.mcp.server) passes a client
that speaks HTTP to a MemHouse URL; the Streamable HTTP endpoint at /mcp/
(memhouse.mcp.http) passes one whose transport hands the request to this process's own
REST API with the caller's API key. Either way the Account, the act-for grant and the
reader's rights come from the key alone, and every answer, good or bad, is the REST
API's: `peer_key` arguments are the peer a read is for (or who spoke), never a tenant.

A failed call is an MCP tool error result (`isError: true`) carrying
`{"error": {"code", "message", "details", "status"}}`, the API's error shape: an API
error keeps its code and status; arguments that fail the tool's schema are
`invalid_input` with the offending fields in `details` (never the validator's raw text);
an unknown tool is `unknown_tool`.

Tool names are chosen for generic harnesses too: the first tool whose name contains
"add" or "store" is the one that stores messages, and the first containing "search" or
"recall" is search. Descriptions that speak of lifecycle states are generated from
knowledge.lifecycle, so they follow the executable contract.
"""

import json
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memhouse.client import MemHouseClient, MemHouseError, Message

log = logging.getLogger("memhouse.mcp")

SERVER_NAME = "memhouse"

# The API's enumerations. tests/integrations/test_mcp_server.py checks them against
# retrieval.ask.EFFORTS, retrieval.profiles.BASE_PROFILES and knowledge.models, which
# need a database.
EFFORTS = ("low", "medium", "high")
PROFILES = ("fast", "balanced", "thorough")
KINDS = ("fact", "preference", "relation", "skill", "event")
Effort = Literal["low", "medium", "high"]
ProfileName = Literal["fast", "balanced", "thorough"]
Kind = Literal["fact", "preference", "relation", "skill", "event"]
# add_messages waits this long by default for its batch to be processed (the API's cap
# is MAX_WAIT_SECONDS), so an agent that stores and then searches finds what it stored.
DEFAULT_WAIT_SECONDS = 5.0
MAX_WAIT_SECONDS = 10.0
# In the order tools/list returns them (see the module docstring on names).
TOOL_NAMES = ("add_messages", "search", "ask", "get_context", "lineage", "stable_profile",
              "list_knowledge", "get_knowledge")


# --- lifecycle wording ------------------------------------------------------------------

def _lifecycle() -> ModuleType:
    """knowledge.lifecycle, imported lazily. It needs no database; should a later version
    need configured settings, configure Django with memhouse.settings first."""
    from django.core.exceptions import AppRegistryNotReady, ImproperlyConfigured

    try:
        from knowledge import lifecycle
    except (ImproperlyConfigured, AppRegistryNotReady):
        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memhouse.settings")
        django.setup()
        from knowledge import lifecycle
    return lifecycle


@dataclass(frozen=True)
class LifecycleText:
    reads: str
    ingest: str
    lineage: str
    profile: str
    listing: str


def lifecycle_text(lifecycle: ModuleType | None = None) -> LifecycleText:
    lc = lifecycle or _lifecycle()

    def named(names: Any) -> str:
        return ", ".join(f"`{n}` ({lc.STATES[n].meaning.rstrip('.')})" for n in sorted(names))

    hidden = sorted(set(lc.STATES) - set(lc.SEARCHABLE) - set(lc.SUBJECT_SEARCHABLE))
    reads = (f"Only usable statements are returned: those in state {named(lc.SEARCHABLE)}, "
             f"and {named(lc.SUBJECT_SEARCHABLE)} only when the reader is their subject. "
             f"Statements in any other state ({', '.join(hidden)}) never appear; "
             "sensitivity and the API key's scope grants filter further.")
    ingest = (f"Every extracted statement starts as {named([lc.INITIAL_STATE])}; a gate then "
              f"places it: a speaker's statement about themself becomes "
              f"{named([lc.ACTIVE])}; a claim about someone else becomes "
              f"{named([lc.PROVISIONAL])} and that person is asked to confirm it; a claim "
              f"about the scope becomes {named([lc.HELD])} for a curator; noise, duplicates "
              f"and unattended restricted content become {named([lc.REJECTED])}.")
    lineage = ("Each statement node carries its lifecycle `state`, one of "
               f"{', '.join(lc.STATES)}; a node the reader may not see is an opaque "
               '`{"ref": "hidden"}`, one that is gone `{"ref": "missing"}`.')
    profile = (f"Only statements in state {named([lc.ACTIVE])} count, never "
               f"`{lc.PROVISIONAL}` ones, and never personal or restricted traits.")
    listable = sorted(lc.MEMBER_VISIBLE | lc.SUBJECT_SEARCHABLE)
    listing = (f"By default the same usable statements as search; `state` may also ask for "
               f"{', '.join(f'`{s}`' for s in listable)} (history a member may inspect, "
               "still filtered by sensitivity; provisional only for its subject). Other "
               "states are listed only as the lifecycle contract's subject, curator and "
               "admin columns allow, for a human's own API key (their own rows; a "
               "curator's or administrator's also the rows of their scopes in those "
               "states); for anyone else they are refused (`state_not_visible`).")
    return LifecycleText(reads=reads, ingest=ingest, lineage=lineage, profile=profile,
                         listing=listing)


# --- arguments --------------------------------------------------------------------------

PEER_KEY_DOC = ("Key of the peer this read is for (their visibility applies). Default: the "
                "API key's own peer. An unknown key is the error `unknown_peer_key`. The "
                "Account always comes from the API key.")
SCOPE_DOC = ("Scope path such as /marketing/social; the read covers this scope and its "
             "ancestors, never siblings.")

PeerKey = Annotated[str | None, Field(description=PEER_KEY_DOC, max_length=200)]
Query = Annotated[str, Field(description="A question or keywords.", min_length=1,
                             max_length=2000)]


class MessageIn(BaseModel):
    """One observation."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="What was said or observed, verbatim.")
    peer_key: str | None = Field(None, max_length=200, description=(
        "Key of the peer who said it. Default: the API key's own peer (a key without a "
        "peer must name one). An unknown key is the error `unknown_peer_key`."))
    occurred_at: str | None = Field(None, description=(
        "When it was said, ISO 8601 with a timezone, e.g. 2023-05-08T13:56:00Z. "
        "Default: now."))
    id: str | None = Field(None, max_length=200, description=(
        "Your id for this message; resending it is a no-op, reusing it for other text "
        "refuses the batch (`client_id_conflict`)."))


# --- results ----------------------------------------------------------------------------

def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def ok_result(value: dict[str, Any]) -> CallToolResult:
    structured = json.loads(_json_text(value))
    return CallToolResult(content=[TextContent(type="text", text=_json_text(structured))],
                          structured_content=structured)


def error_result(code: str, message: str, *, status: int | None = None,
                 details: Any = None) -> CallToolResult:
    body = {"error": {"code": code, "message": message, "details": details,
                      "status": status}}
    structured = json.loads(_json_text(body))
    return CallToolResult(content=[TextContent(type="text", text=_json_text(structured))],
                          structured_content=structured, is_error=True)


def run_tool(call: Callable[[], Any]) -> CallToolResult:
    """Run one client call; every failure becomes an error result, never an exception."""
    try:
        value = call()
    except MemHouseError as exc:
        return error_result(exc.code, exc.message, status=exc.status, details=exc.details)
    except ValueError as exc:  # refused by the client before sending (e.g. a naive time)
        return error_result("invalid_input", str(exc))
    except Exception:
        log.exception("MemHouse MCP tool failed")
        return error_result("internal_error", "the MemHouse MCP server failed; see its log")
    return ok_result(dict(value))


def argument_error(tool: str, exc: ValidationError) -> CallToolResult:
    """Arguments that fail a tool's schema, in the API's `invalid_input` shape: each
    offending field (dotted path) with the reasons, never the input values themselves."""
    details: dict[str, list[str]] = {}
    for err in exc.errors(include_url=False, include_input=False):
        field = ".".join(str(part) for part in err["loc"]) or "arguments"
        details.setdefault(field, []).append(str(err["msg"]))
    fields = ", ".join(sorted(details))
    return error_result("invalid_input", f"invalid arguments for {tool}: {fields}; see "
                        "details for each field and the tool's input schema",
                        details=details)


class MemHouseMCP(MCPServer):
    """MCPServer whose argument and unknown-tool errors use the documented error shape
    instead of the SDK's free-form text."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return argument_error(name, exc.__cause__)
            if name not in {t.name for t in await self.list_tools()}:
                return error_result("unknown_tool", f"no tool named {name!r}; tools are "
                                    f"{', '.join(TOOL_NAMES)}")
            raise


# --- the server -------------------------------------------------------------------------

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False,
                            idempotent_hint=True, open_world_hint=False)


def build_server(client: MemHouseClient, lifecycle: ModuleType | None = None) -> MCPServer:
    """The MCP server with its eight tools, each one call of `client`."""
    text = lifecycle_text(lifecycle)
    server: MCPServer = MemHouseMCP(
        name=SERVER_NAME, title="MemHouse",
        instructions=(
            "MemHouse is governed long-term memory for agents and the people they talk "
            "about. Store what you observe with add_messages; recall with search, ask "
            "and get_context; browse with list_knowledge and get_knowledge; explain a "
            "statement with lineage; orient yourself on a person with stable_profile. "
            "Everything you read is filtered for the reader (peer_key, default: the API "
            "key's own peer). " + text.reads),
        log_level="WARNING")

    def add_messages(
        scope: Annotated[str, Field(description="Scope path to store the messages in.",
                                    max_length=500)],
        messages: Annotated[list[MessageIn], Field(min_length=1,
                                                   description="The batch, in order.")],
        session: Annotated[str | None, Field(
            description="Your conversation id; groups the messages into a session.",
            max_length=200)] = None,
        wait: Annotated[float, Field(ge=0, le=MAX_WAIT_SECONDS, description=(
            "Seconds to wait for the batch to be processed (0 to 10); the answer then "
            "gives each message's outcome and a search right after finds what was kept. "
            "0 returns as soon as the messages are stored."))] = DEFAULT_WAIT_SECONDS,
    ) -> CallToolResult:
        batch = [Message(text=m.text, peer_key=m.peer_key, occurred_at=m.occurred_at,
                         id=m.id) for m in messages]
        return run_tool(lambda: client.ingest_messages(scope, batch, session=session,
                                                       wait=wait or None))

    def search(
        query: Query,
        scope: Annotated[str, Field(description=SCOPE_DOC, max_length=500)] = "/",
        peer_key: PeerKey = None,
        profile: Annotated[ProfileName | None, Field(description=(
            "Retrieval profile; default: the nearest scope's setting, else balanced."
        ))] = None,
        limit: Annotated[int, Field(ge=1, description="Page size.")] = 10,
        offset: Annotated[int, Field(ge=0, description=(
            "Start of the page; use the previous page.next_offset."))] = 0,
        as_of: Annotated[str | None, Field(description=(
            "ISO 8601 time the question is about; enables the temporal strategy."
        ))] = None,
        include_identity_profile: Annotated[bool, Field(description=(
            "Also return the reader's stable identity profile beside the results."
        ))] = False,
    ) -> CallToolResult:
        return run_tool(lambda: client.search(
            query, scope=scope, peer_key=peer_key, profile=profile, limit=limit,
            offset=offset, as_of=as_of, include_identity_profile=include_identity_profile))

    def ask(
        query: Query,
        scope: Annotated[str, Field(description=SCOPE_DOC, max_length=500)],
        peer_key: PeerKey = None,
        effort: Annotated[Effort | None, Field(description=(
            "How hard to look before answering; default: the server's."))] = None,
        include_source_recall: Annotated[bool, Field(description=(
            "With an effort: let the planner also search the raw source messages."
        ))] = False,
    ) -> CallToolResult:
        return run_tool(lambda: client.ask(query, scope, peer_key=peer_key, effort=effort,
                                           include_source_recall=include_source_recall))

    def get_context(
        scope: Annotated[str, Field(description=SCOPE_DOC, max_length=500)],
        peer_key: PeerKey = None,
        session: Annotated[str | None, Field(description=(
            "A session id given to ingest_messages; adds that session's summary."
        ), max_length=200)] = None,
        query: Annotated[str | None, Field(description=(
            "What the conversation is about now; blank: the most salient and recent."
        ), max_length=2000)] = None,
        budget_chars: Annotated[int | None, Field(ge=1, description=(
            "Upper bound on the rendered context's length; default: the server's."
        ))] = None,
    ) -> CallToolResult:
        return run_tool(lambda: client.context(scope, peer_key=peer_key, session=session,
                                               query=query, budget_chars=budget_chars))

    def lineage(
        knowledge_id: Annotated[str, Field(description=(
            "Id of a statement (a search candidate's id)."))],
        peer_key: PeerKey = None,
        depth: Annotated[int | None, Field(ge=1, description="Hops to follow.")] = None,
        fan_out: Annotated[int | None, Field(ge=1, description=(
            "Most edges followed from one node."))] = None,
        max_nodes: Annotated[int | None, Field(ge=1, description=(
            "Most nodes returned."))] = None,
    ) -> CallToolResult:
        return run_tool(lambda: client.lineage(knowledge_id, peer_key=peer_key, depth=depth,
                                               fan_out=fan_out, max_nodes=max_nodes))

    def stable_profile(
        peer_key: PeerKey = None,
        scope: Annotated[str | None, Field(description=(
            "Read at this scope and its ancestors; default: every scope the API key "
            "may read."), max_length=500)] = None,
    ) -> CallToolResult:
        return run_tool(lambda: client.stable_profile(peer_key=peer_key, scope=scope))

    def list_knowledge(
        peer_key: PeerKey = None,
        scope: Annotated[str | None, Field(description=(
            SCOPE_DOC + " Default: every scope the API key may read."), max_length=500)
        ] = None,
        state: Annotated[list[str] | None, Field(description=(
            "Lifecycle states to list; default: the usable ones."), max_length=12)] = None,
        kind: Annotated[Kind | None, Field(description="Only statements of this kind.")
                        ] = None,
        subject: Annotated[str | None, Field(description=(
            "Only statements about this peer (a peer key)."), max_length=200)] = None,
        updated_since: Annotated[str | None, Field(description=(
            "ISO 8601 time with a timezone: only statements changed at or after it."))
        ] = None,
        cursor: Annotated[str | None, Field(description=(
            "The previous page's next_cursor."), max_length=500)] = None,
        limit: Annotated[int | None, Field(ge=1, description="Page size.")] = None,
    ) -> CallToolResult:
        return run_tool(lambda: client.list_knowledge(
            peer_key=peer_key, scope=scope, state=state, kind=kind, subject=subject,
            updated_since=updated_since, cursor=cursor, limit=limit))

    def get_knowledge(
        knowledge_id: Annotated[uuid.UUID, Field(description=(
            "Id of a statement (from search or list_knowledge)."))],
        peer_key: PeerKey = None,
    ) -> CallToolResult:
        return run_tool(lambda: client.get_knowledge(knowledge_id, peer_key=peer_key))

    server.add_tool(add_messages, name="add_messages", title="Store observations",
                    description=(
                        "Add (store) a batch of messages - raw, immutable observations - to "
                        "a scope; MemHouse extracts statements from them. " + text.ingest
                        + " By default it waits (up to `wait` seconds) until the batch is "
                        "processed and returns each message's outcome: `processing` "
                        "(queued, processed, failed), the `statements` drawn from it that "
                        "you may read (id, state), `refused` reason codes (e.g. "
                        "f4_gate_a_phatic for an acknowledgement) and `not_visible` counts; "
                        "`timed_out` is true when the wait ran out first."),
                    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                idempotent_hint=False, open_world_hint=False))
    server.add_tool(search, name="search", title="Search memory", annotations=READ_ONLY,
                    description=(
                        "Ranked statements matching a question, fused from several retrieval "
                        "strategies; use them in the order returned. " + text.reads))
    server.add_tool(ask, name="ask", title="Ask memory", annotations=READ_ONLY,
                    description=(
                        "Answer a question from memory, citing the statements used, or "
                        "abstain when the evidence is weak. " + text.reads))
    server.add_tool(get_context, name="get_context", title="Context for a prompt",
                    annotations=READ_ONLY, description=(
                        "A compact, budgeted text block of what matters for this reader in "
                        "this scope, ready to put into a prompt. " + text.reads))
    server.add_tool(lineage, name="lineage", title="Statement lineage", annotations=READ_ONLY,
                    description=(
                        "Where a statement came from (messages, documents, reasoning) and "
                        "what was derived from it, as the reader may see it. " + text.lineage))
    server.add_tool(stable_profile, name="stable_profile", title="Stable profile",
                    annotations=READ_ONLY, description=(
                        "The stable identity profile of the reader (peer_key): direct, "
                        "source-backed, long-lived facts, relations and skills about them, "
                        "for orientation; cite the knowledge ids it links. " + text.profile))
    server.add_tool(list_knowledge, name="list_knowledge", title="List statements",
                    annotations=READ_ONLY, description=(
                        "Page through the governed statements this reader may see, oldest "
                        "change first, with their lifecycle state, belief and valid time; "
                        "follow next_cursor. " + text.listing))
    server.add_tool(get_knowledge, name="get_knowledge", title="One statement",
                    annotations=READ_ONLY, description=(
                        "One statement by id with its governance metadata; a statement "
                        "this reader may not see is `not_found`, like an unknown id."))
    return server
