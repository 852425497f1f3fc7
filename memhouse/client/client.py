"""A small typed client for the MemHouse REST API (v1), over httpx.

    with MemHouseClient("http://127.0.0.1:8000", "mh_...") as mh:
        mh.ingest_messages("/demo", [Message("I love hiking.", peer_key="alice")])
        for hit in mh.iter_search("What does Alice like?", scope="/demo", peer_key="alice"):
            print(hit["rank"], hit["statement"])

The Account and the reader come from the API key alone; `peer_key` arguments name the
peer a read is for (or who spoke), never a tenant. Retries happen only where repeating
the request cannot do harm twice: connection failures before anything was sent, 429
(honouring Retry-After) and 502/503/504, with exponential backoff. Every other error
raises at once as a MemHouseError subclass (see memhouse.client.errors).
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NotRequired, TypedDict
from uuid import UUID

import httpx

from memhouse.client.errors import (
    MemHouseError,
    TransportError,
    error_for_status,
)

__all__ = [
    "DocumentDeleted",
    "DocumentOut",
    "DocumentPage",
    "DocumentVersion",
    "IngestResult",
    "IngestedMessage",
    "JSONDict",
    "Me",
    "MemHouseClient",
    "Message",
    "MessageOut",
    "MessageOutcome",
    "MessageRead",
    "Page",
    "PeerOut",
    "ScopeOut",
    "SearchCandidate",
    "SearchPage",
    "SearchResult",
]

API_PREFIX = "/api/v1"
RETRY_STATUSES = frozenset({429, 502, 503, 504})
USER_AGENT = "memhouse-client/0.1"

JSONDict = dict[str, Any]


# --- response shapes (TypedDicts: plain dicts at run time) ------------------------------

class Me(TypedDict):
    peer_key: str | None
    peer_kind: str | None
    via: str
    scopes: list[str]
    curator: bool


class ScopeOut(TypedDict):
    id: str
    path: str


class PeerOut(TypedDict):
    key: str
    kind: str
    display_name: str


class NotVisible(TypedDict):
    count: int
    states: dict[str, int]


class Refusal(TypedDict):
    reason: str  # a lifecycle reason code, e.g. f4_gate_a_phatic
    message: str
    count: int  # refused statements; 0: nothing was proposed from the message's text


class MessageOutcome(TypedDict):
    processing: Literal["queued", "processed", "failed"]
    statements: list[JSONDict]  # as get_knowledge shows them
    refused: list[Refusal]
    not_visible: NotVisible


class IngestedMessage(TypedDict):
    id: str
    client_message_id: str | None
    status: Literal["created", "duplicate"]
    outcome: NotRequired[MessageOutcome]  # only with wait


class IngestResult(TypedDict):
    messages: list[IngestedMessage]
    timed_out: NotRequired[bool]  # only with wait


class MessageOut(TypedDict):
    id: str
    client_message_id: str | None
    scope: str
    session: str | None
    peer_key: str
    text: str
    occurred_at: str
    inserted_at: str
    outcome: MessageOutcome


class MessageRead(TypedDict):
    message: MessageOut
    reader_posture: str


class _VersionFields(TypedDict):
    document_id: str
    version: int
    version_id: str
    sha256: str
    media_type: str


class VersionOutcome(MessageOutcome):
    # when failed: "too_many_statements" (split the document), "processing_failed" or
    # "crashed_repeatedly" (an administrator may retry it: /api/v1/admin/dead-letters)
    error: str | None


class DocumentVersion(_VersionFields):
    """A stored version (create_document, add_document_version)."""

    outcome: NotRequired[VersionOutcome]  # only with wait (as a message's outcome)
    timed_out: NotRequired[bool]  # only with wait


class DocumentDeleted(TypedDict):
    id: str
    deleted: bool
    retracted_knowledge: int


class SearchCandidate(TypedDict):
    id: str
    rank: int
    statement: str
    subject_peer_key: str | None
    scope: str
    kind: str
    level: str
    state: str
    confidence: float
    sensitivity: str
    relevant_from: str | None
    relevant_until: str | None
    inserted_at: str
    when: str
    possibly_outdated: str | None
    # The id of the statement from the same source turn ranked above it, when source
    # crowding moved this one down (retrieval.crowding); else None.
    deferred_after: str | None
    fusion_score: float
    scores: dict[str, dict[str, Any]]
    lane: NotRequired[dict[str, Any]]


class SearchPage(TypedDict):
    limit: int
    offset: int
    next_offset: int | None


class SearchResult(TypedDict):
    candidates: list[SearchCandidate]
    strategies: dict[str, list[str]]
    retrieval_outcomes: list[dict[str, str]]
    disagreement: dict[str, Any]
    reader_posture: str
    profile: str
    profile_version: str
    analyzer_version: str
    deadline_ms: int
    reserved_rerank_ms: int
    rerank: dict[str, Any]
    elapsed_ms: float
    page: SearchPage
    identity_profile: NotRequired[JSONDict | None]


class DocumentLatestVersion(_VersionFields):
    created_at: str
    # Only with include_text=True; None (and text_withheld) when some statement drawn
    # from the version is one this key may not read.
    text: NotRequired[str | None]
    text_withheld: NotRequired[bool]


class DocumentOut(TypedDict):
    id: str
    title: str
    scope: str
    external_id: str | None
    created_at: str
    latest_version: DocumentLatestVersion


class DocumentPage(TypedDict):
    """A page of GET /documents: live documents, oldest first."""

    items: list[DocumentOut]
    next_cursor: str | None


class Page(TypedDict):
    """A cursor page of the governance lists (my knowledge, curator queue, questions)."""

    items: list[JSONDict]
    next_cursor: str | None


class KnowledgePage(TypedDict):
    """A page of GET /knowledge: statements the reader may see, oldest change first."""

    items: list[JSONDict]
    next_cursor: str | None
    reader_posture: str


# --- request shapes ---------------------------------------------------------------------

@dataclass(frozen=True)
class Message:
    """One observation to ingest. `peer_key` is who said it (default: the key's own peer);
    `id` is your message id, which makes resending a no-op."""

    text: str
    peer_key: str | None = None
    occurred_at: datetime | str | None = None
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> JSONDict:
        body: JSONDict = {"text": self.text}
        if self.id is not None:
            body["id"] = self.id
        if self.peer_key is not None:
            body["peer_key"] = self.peer_key
        if self.occurred_at is not None:
            body["occurred_at"] = _iso(self.occurred_at, "occurred_at")
        if self.metadata:
            body["metadata"] = dict(self.metadata)
        return body


def _iso(value: datetime | str, name: str) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name} must be timezone-aware (e.g. datetime.now(UTC))")
        return value.isoformat()
    return value


def _message_json(message: Message | Mapping[str, Any]) -> JSONDict:
    if isinstance(message, Message):
        return message.as_json()
    body = {k: v for k, v in message.items() if v is not None}
    if "text" not in body:
        raise ValueError("every message needs a text")
    if isinstance(body.get("occurred_at"), datetime):
        body["occurred_at"] = _iso(body["occurred_at"], "occurred_at")
    return body


def _compact(**fields: Any) -> JSONDict:
    """Only the fields given, so the server's defaults apply to the rest."""
    return {k: v for k, v in fields.items() if v is not None}


def _retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _content_fields(text: str | None, content: bytes | None) -> JSONDict:
    import base64

    if (text is None) == (content is None):
        raise ValueError("pass exactly one of text or content")
    if text is not None:
        return {"text": text}
    assert content is not None
    return {"content_base64": base64.b64encode(content).decode("ascii")}


# --- the client -------------------------------------------------------------------------

class MemHouseClient:
    """Synchronous MemHouse API client. Thread-safe (one pooled httpx.Client)."""

    #: Never sleep longer than this for one Retry-After; a longer wait raises instead.
    max_retry_after: float = 60.0

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 10,
                 retries: int = 3, backoff: float = 0.3,
                 transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not api_key:
            raise ValueError("an API key is required (mh_...)")
        if retries < 0 or backoff < 0:
            raise ValueError("retries and backoff must not be negative")
        root = base_url.rstrip("/")
        if root.endswith(API_PREFIX):
            root = root[: -len(API_PREFIX)]
        self.base_url = root
        self.retries = retries
        self.backoff = backoff
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=root + API_PREFIX, timeout=timeout, transport=transport,
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json",
                     "User-Agent": USER_AGENT})

    # -- lifecycle of the client itself

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemHouseClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:  # never shows the key
        return f"MemHouseClient({self.base_url!r})"

    # -- transport

    def _delay(self, attempt: int) -> float:
        return float(self.backoff * (2 ** attempt))

    def request(self, method: str, path: str, *, json: Any = None,
                params: Mapping[str, Any] | None = None,
                extra_time: float = 0) -> Any:
        """One API call (path relative to /api/v1), with the retry policy; returns the JSON.
        `extra_time`: seconds the server may take on purpose (a wait) beyond the timeout."""
        attempt = 0
        timeout: Any = httpx.USE_CLIENT_DEFAULT
        if extra_time > 0:
            base = self._http.timeout
            timeout = httpx.Timeout(
                connect=base.connect, write=base.write, pool=base.pool,
                read=None if base.read is None else base.read + extra_time)
        while True:
            try:
                response = self._http.request(method, path.lstrip("/"), json=json,
                                              params=dict(params) if params else None,
                                              timeout=timeout)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                # Nothing reached the server, so sending again cannot do anything twice.
                if attempt < self.retries:
                    self._sleep(self._delay(attempt))
                    attempt += 1
                    continue
                raise TransportError(f"cannot connect to {self.base_url}: {exc}",
                                     code="connection_failed") from exc
            except httpx.TimeoutException as exc:
                # The request may have been processed: never repeated.
                raise TransportError(f"{method} {path} timed out: {exc}",
                                     code="timeout") from exc
            except httpx.HTTPError as exc:
                raise TransportError(f"{method} {path} failed: {exc}") from exc
            if response.status_code < 400:
                return self._decode(response)
            error = self._error(response)
            if attempt < self.retries and response.status_code in RETRY_STATUSES:
                wait = _retry_after_seconds(response.headers.get("Retry-After"))
                if wait is None:
                    wait = self._delay(attempt)
                elif wait > self.max_retry_after:
                    raise error
                self._sleep(wait)
                attempt += 1
                continue
            raise error

    @staticmethod
    def _decode(response: httpx.Response) -> Any:
        if response.status_code == 204 or not response.content:
            return {}
        try:
            return response.json()
        except ValueError as exc:
            raise MemHouseError("invalid_response", "the server's answer is not JSON",
                                response.status_code) from exc

    @staticmethod
    def _error(response: httpx.Response) -> MemHouseError:
        status = response.status_code
        code, message, details = f"http_{status}", response.reason_phrase or "error", None
        try:
            body = response.json()
        except ValueError:
            body = None
            snippet = response.text.strip()[:200]
            if snippet:
                message = f"{message}: {snippet}"
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            err = body["error"]
            code = str(err.get("code") or code)
            message = str(err.get("message") or message)
            details = err.get("details")
        retry_after = _retry_after_seconds(response.headers.get("Retry-After"))
        return error_for_status(status, code, message, details, retry_after=retry_after)

    def _post(self, path: str, body: JSONDict) -> Any:
        return self.request("POST", path, json=body)

    def _get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=_compact(**params))

    # -- credentials, scopes, peers

    def me(self) -> Me:
        """Who this API key is: its peer, scopes and whether it is a curator."""
        result: Me = self._get("me")
        return result

    def scopes(self) -> list[JSONDict]:
        """The scopes this credential may see."""
        return list(self._get("scopes")["scopes"])

    def create_scope(self, path: str) -> ScopeOut:
        """Create a scope (and its ancestors); creating an existing one is harmless."""
        result: ScopeOut = self._post("scopes", {"path": path})
        return result

    def peers(self) -> list[PeerOut]:
        return list(self._get("peers")["peers"])

    def create_peer(self, key: str, kind: Literal["human", "agent"], *,
                    display_name: str = "", aliases: Iterable[str] = ()) -> PeerOut:
        """Register a participant (humans get no password this way)."""
        result: PeerOut = self._post("peers", {"key": key, "kind": kind,
                                               "display_name": display_name,
                                               "aliases": list(aliases)})
        return result

    # -- ingest

    def ingest_messages(self, scope: str, messages: Iterable[Message | Mapping[str, Any]],
                        session: str | None = None, *,
                        wait: float | None = None) -> IngestResult:
        """Store a batch of observations (202); extraction runs in the pipeline.

        Resending a message with the same `id` is a no-op ("duplicate"); reusing an id for
        other text refuses the whole batch (ConflictError `client_id_conflict`).

        `wait` (seconds, at most 10): answer once every message is processed (or the wait
        runs out, `timed_out`), each message with its `outcome`: processing state, the
        statements drawn from it that the writer may read, refusals by reason code and
        counts of what it may not read. A search right after sees what was kept.
        """
        body = _compact(scope=scope, session=session, wait=wait,
                        messages=[_message_json(m) for m in messages])
        result: IngestResult = self.request("POST", "messages", json=body,
                                            extra_time=float(wait or 0))
        return result

    def message(self, message_id: str | UUID, peer_key: str | None = None) -> MessageRead:
        """`{"message": {..., "outcome": {...}}, "reader_posture": ...}`: one message's
        processing state and outcome, read as `peer_key` (default: the key's own peer). A
        message this reader may not read raises NotFoundError, like an unknown id."""
        try:  # an id is a UUID; anything else must not become another path
            mid = UUID(str(message_id))
        except ValueError as exc:
            raise ValueError(f"message_id is not a UUID: {message_id!r}") from exc
        result: MessageRead = self._get(f"messages/{mid}", peer_key=peer_key)
        return result

    def create_document(self, scope: str, title: str, *, text: str | None = None,
                        content: bytes | None = None, media_type: str = "text/plain",
                        external_id: str | None = None,
                        wait: float | None = None) -> DocumentVersion:
        """Create a document from `text` or raw `content` bytes (exactly one).

        `wait` (seconds, at most 10): answer once the pipeline has processed the version
        (or the wait runs out, `timed_out`), with its `outcome` as ingest_messages gives a
        message's: processing state, the statements drawn from it that this key's peer may
        read, refusals by reason code and counts of the rest. A search right after sees
        what was kept."""
        body = {"scope": scope, "title": title, "media_type": media_type,
                **_content_fields(text, content),
                **_compact(external_id=external_id, wait=wait)}
        result: DocumentVersion = self.request("POST", "documents", json=body,
                                               extra_time=float(wait or 0))
        return result

    def add_document_version(self, document_id: str | UUID, *, text: str | None = None,
                             content: bytes | None = None, media_type: str = "text/plain",
                             wait: float | None = None) -> DocumentVersion:
        """A new version; statements it no longer supports are superseded. The same bytes
        again make no new version (the latest one is returned). `wait`: as for
        create_document."""
        body = {"media_type": media_type, **_content_fields(text, content),
                **_compact(wait=wait)}
        result: DocumentVersion = self.request("POST", f"documents/{document_id}/versions",
                                               json=body, extra_time=float(wait or 0))
        return result

    def list_documents(self, *, scope: str | None = None, external_id: str | None = None,
                       include_text: bool = False, cursor: str | None = None,
                       limit: int | None = None) -> DocumentPage:
        """One page of the live documents this key may access, each with its latest
        version (and its text when `include_text`); `scope` lists that scope and its
        descendants; pass `next_cursor` back for the next page."""
        result: DocumentPage = self._get(
            "documents", scope=scope, external_id=external_id,
            include_text="true" if include_text else None, cursor=cursor, limit=limit)
        return result

    def iter_documents(self, *, scope: str | None = None, include_text: bool = False,
                       limit: int | None = None) -> Iterator[DocumentOut]:
        """Every document of list_documents(...), following `next_cursor`."""
        cursor: str | None = None
        while True:
            page = self.list_documents(scope=scope, include_text=include_text,
                                       cursor=cursor, limit=limit)
            yield from page["items"]
            cursor = page.get("next_cursor")
            if not cursor or not page["items"]:
                return

    def get_document(self, document_id: str | UUID) -> JSONDict:
        """A document and its versions, each with its `processing` state (`queued`,
        `processed`, `failed`, then with an `error` code); the top-level `processing` is
        the latest version's."""
        return dict(self._get(f"documents/{document_id}"))

    def delete_document(self, document_id: str | UUID) -> DocumentDeleted:
        """Tombstone every version; statements left without a source are retracted."""
        result: DocumentDeleted = self.request("DELETE", f"documents/{document_id}")
        return result

    # -- reads

    def search(self, query: str, scope: str = "/", peer_key: str | None = None,
               profile: str | None = None, limit: int = 10, offset: int = 0,
               as_of: datetime | str | None = None, include_identity_profile: bool = False,
               deadline_ms: int | None = None) -> SearchResult:
        """One page of fused search results, in the order to use them."""
        body = _compact(query=query, scope=scope, peer_key=peer_key, profile=profile,
                        limit=limit, offset=offset,
                        as_of=_iso(as_of, "as_of") if as_of is not None else None,
                        deadline_ms=deadline_ms)
        if include_identity_profile:
            body["include_identity_profile"] = True
        result: SearchResult = self._post("search", body)
        return result

    def iter_search(self, query: str, scope: str = "/", peer_key: str | None = None,
                    profile: str | None = None, limit: int = 10, offset: int = 0,
                    as_of: datetime | str | None = None, deadline_ms: int | None = None,
                    max_results: int | None = None) -> Iterator[SearchCandidate]:
        """Every candidate, fetching `limit` per page and following `page.next_offset`."""
        yielded = 0
        next_offset: int | None = offset
        while next_offset is not None:
            page = self.search(query, scope=scope, peer_key=peer_key, profile=profile,
                               limit=limit, offset=next_offset, as_of=as_of,
                               deadline_ms=deadline_ms)
            for candidate in page["candidates"]:
                if max_results is not None and yielded >= max_results:
                    return
                yield candidate
                yielded += 1
            following = page["page"].get("next_offset")
            if following is None or following <= next_offset or not page["candidates"]:
                return
            next_offset = following

    def ask(self, query: str, scope: str, peer_key: str | None = None,
            effort: Literal["low", "medium", "high"] | None = None,
            include_source_recall: bool = False) -> JSONDict:
        """A cited answer (or an abstention) from the statements this reader may use."""
        body = _compact(query=query, scope=scope, peer_key=peer_key, effort=effort)
        if include_source_recall:
            body["include_source_recall"] = True
        return dict(self._post("ask", body))

    def context(self, scope: str, peer_key: str | None = None, session: str | None = None,
                query: str | None = None, budget_chars: int | None = None) -> JSONDict:
        """A rendered, budgeted context block for a prompt (no generation model involved)."""
        return dict(self._post("context", _compact(scope=scope, peer_key=peer_key,
                                                   session=session, query=query,
                                                   budget_chars=budget_chars)))

    def lineage(self, knowledge_id: str | UUID, peer_key: str | None = None,
                depth: int | None = None, fan_out: int | None = None,
                max_nodes: int | None = None) -> JSONDict:
        """Where a statement came from and what was derived from it, as this reader sees it."""
        return dict(self._post("lineage", _compact(knowledge_id=str(knowledge_id),
                                                   peer_key=peer_key, depth=depth,
                                                   fan_out=fan_out, max_nodes=max_nodes)))

    def stable_profile(self, peer_key: str | None = None,
                       scope: str | None = None) -> JSONDict:
        """The stable identity profile of a peer (default: the key's own peer)."""
        return dict(self._post("stable-profile", _compact(peer_key=peer_key, scope=scope)))

    # -- the knowledge listing (reads for a reader, like search)

    def list_knowledge(self, *, scope: str | None = None, peer_key: str | None = None,
                       state: str | Iterable[str] | None = None, kind: str | None = None,
                       subject: str | None = None,
                       updated_since: datetime | str | None = None,
                       cursor: str | None = None, limit: int | None = None) -> KnowledgePage:
        """One page of the statements this reader may see (default: usable ones), ordered
        by (updated_at, id); pass the page's `next_cursor` back for the next one."""
        states = state if state is None or isinstance(state, str) else ",".join(state)
        since = None if updated_since is None else _iso(updated_since, "updated_since")
        result: KnowledgePage = self._get(
            "knowledge", scope=scope, peer_key=peer_key, state=states, kind=kind,
            subject=subject, updated_since=since, cursor=cursor, limit=limit)
        return result

    def iter_knowledge(self, *, scope: str | None = None, peer_key: str | None = None,
                       state: str | Iterable[str] | None = None, kind: str | None = None,
                       subject: str | None = None,
                       updated_since: datetime | str | None = None,
                       limit: int | None = None) -> Iterator[JSONDict]:
        """Every statement of list_knowledge(...), following `next_cursor`."""
        cursor: str | None = None
        while True:
            page = self.list_knowledge(scope=scope, peer_key=peer_key, state=state, kind=kind,
                                       subject=subject, updated_since=updated_since,
                                       cursor=cursor, limit=limit)
            yield from page["items"]
            cursor = page.get("next_cursor")
            if not cursor or not page["items"]:
                return

    def get_knowledge(self, knowledge_id: str | UUID,
                      peer_key: str | None = None) -> JSONDict:
        """`{"knowledge": {...}, "reader_posture": ...}`; a statement this reader may not
        see raises NotFoundError, exactly like an unknown id."""
        try:  # an id is a UUID; anything else must not become another path
            kid = UUID(str(knowledge_id))
        except ValueError as exc:
            raise ValueError(f"knowledge_id is not a UUID: {knowledge_id!r}") from exc
        return dict(self._get(f"knowledge/{kid}", peer_key=peer_key))

    # -- governance lists (cursor pages)

    def _pages(self, path: str, limit: int | None, **params: Any) -> Iterator[JSONDict]:
        cursor: str | None = None
        while True:
            page: Page = self._get(path, cursor=cursor, limit=limit, **params)
            yield from page["items"]
            cursor = page.get("next_cursor")
            if not cursor or not page["items"]:
                return

    def my_knowledge_page(self, cursor: str | None = None, limit: int | None = None) -> Page:
        """One page of everything about this key's (human) peer, in any scope and state."""
        result: Page = self._get("me/knowledge", cursor=cursor, limit=limit)
        return result

    def my_knowledge(self, limit: int | None = None) -> Iterator[JSONDict]:
        """Every statement about this key's (human) peer, following `next_cursor`."""
        return self._pages("me/knowledge", limit)

    def curator_queue_page(self, state: Literal["held", "contested"] | None = None,
                           cursor: str | None = None, limit: int | None = None) -> Page:
        """One page of statements awaiting a curator (human curators only)."""
        result: Page = self._get("curator/queue", state=state, cursor=cursor, limit=limit)
        return result

    def curator_queue(self, state: Literal["held", "contested"] | None = None,
                      limit: int | None = None) -> Iterator[JSONDict]:
        """Every statement awaiting a curator, following `next_cursor`."""
        return self._pages("curator/queue", limit, state=state)

    def my_questions(self, status: Literal["open", "answered", "expired"] | None = None,
                     limit: int | None = None) -> Iterator[JSONDict]:
        """Questions put to this key's (human) peer, following `next_cursor`."""
        return self._pages("me/questions", limit, status=status)
