"""A LangGraph store (langgraph.store.base.BaseStore) over the MemHouse REST API.

    from langgraph.graph import StateGraph
    from memhouse.client import MemHouseClient
    from memhouse.client.langgraph_store import MemHouseStore

    store = MemHouseStore(MemHouseClient(url, key), peer_key="alice")
    store.put(("team", "alice"), "prefs", {"drink": "Alice drinks green tea."})
    graph = StateGraph(State).add_node(...).compile(store=store)

Needs the optional extra `memhouse[langgraph]`. How LangGraph's model maps onto MemHouse:

* A namespace is a scope path: ("team", "alice") is /team/alice. Labels use letters,
  digits, '-' and '_' (MemHouse's scope segments; LangGraph itself refuses '.').
* `put(namespace, key, value)` stores the value, as JSON, as a version of the document
  whose external id is `key` in that scope (the scope is created on first use). It is a
  source like any other: statements extracted from it are governed knowledge with
  provenance, and a new version supersedes what the old one no longer supports.
  `put(..., None)` and `delete` tombstone the document, so statements left without a
  source are retracted. A put waits up to `wait` seconds (default 5, at most 10; 0 does
  not wait) for the pipeline to extract the version's statements, so a `search` right
  after it finds them; a put whose wait runs out has still stored the value.
* `get` reads the latest version of that document back as an `Item`.
* `search(prefix, query=...)` is a MemHouse search for the store's reader at that scope
  (which reads the scope and its ancestors, never siblings or descendants). It returns
  governed statements, not the stored values: `SearchItem(key=<statement id>,
  value={"statement": ..., ...}, score=<fusion score>)`, in MemHouse's order.
* `search(prefix)` without a query lists the stored documents in that scope and below
  (LangGraph's prefix rule), as `SearchItem`s without a score.
* `list_namespaces` lists the scopes holding stored documents.

Reads of statements are for `peer_key` (default: the API key's own peer) under the
key's act-for grant, exactly as in REST: a key that may not act for that peer gets
`PermissionDeniedError` `act_for_denied`. Stored documents are readable by any key with
access to their scope, like GET /documents. `filter` is applied to values after a page
is fetched (equality on top-level keys), so a filtered page may be shorter than `limit`.
The client is synchronous: `abatch` runs `batch` in a worker thread (asyncio.to_thread).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from memhouse.client.client import DocumentOut, MemHouseClient
from memhouse.client.errors import ConflictError, NotFoundError

__all__ = ["MemHouseStore", "namespace_to_scope", "scope_to_namespace"]

# How long a put waits for its version to be processed (the documents endpoints' `wait`),
# so a search right after it reads what it stored; the server's cap is 10 s.
DEFAULT_WAIT_SECONDS = 5.0
MAX_LABEL = 100  # MemHouse's longest scope segment
MAX_KEY = 200  # a document's external id
MEDIA_TYPE = "application/json"
STATEMENT_FIELDS = ("statement", "subject_peer_key", "kind", "level", "state", "confidence",
                    "sensitivity", "relevant_from", "relevant_until")


def namespace_to_scope(namespace: tuple[str, ...]) -> str:
    """("team", "alice") -> "/team/alice"; () -> "/". Raises InvalidNamespaceError for a
    label MemHouse cannot hold as a scope segment."""
    if not isinstance(namespace, tuple):
        raise InvalidNamespaceError(f"a namespace is a tuple of strings, not {namespace!r}")
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidNamespaceError(f"namespace labels are non-empty strings: {namespace!r}")
        if len(label) > MAX_LABEL or not all(c.isalnum() or c in "-_" for c in label):
            raise InvalidNamespaceError(
                f"invalid namespace label {label!r} in {namespace!r}: MemHouse scope "
                f"segments use letters, digits, '-' or '_' (at most {MAX_LABEL} characters)")
    return "/" + "/".join(namespace)


def scope_to_namespace(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.split("/") if p)


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's prefix/suffix rule, with '*' matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported match type {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)


def _passes(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    return not wanted or all(value.get(k) == v for k, v in wanted.items())


class MemHouseStore(BaseStore):
    """LangGraph `BaseStore` whose items are MemHouse documents and whose search is
    MemHouse's governed search. Thread-safe as far as the client is (it is)."""

    supports_ttl = False

    def __init__(self, client: MemHouseClient, *, peer_key: str | None = None,
                 profile: str | None = None, wait: float = DEFAULT_WAIT_SECONDS) -> None:
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= 10:
            raise ValueError("wait is a number of seconds from 0 to 10")
        self.client = client
        self.wait = wait  # seconds a put waits for its statements (0: no wait)
        self.peer_key = peer_key  # the reader of searches (None: the key's own peer)
        self.profile = profile  # a MemHouse search profile: fast, balanced, thorough
        self._scopes: set[str] = set()  # scopes created (or found) by this store

    # -- the ops

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, PutOp):
                if op.value is None:
                    self._delete(op.namespace, op.key)
                else:
                    self._put(op.namespace, op.key, op.value)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # MemHouseClient is synchronous (httpx.Client): run the batch off the event loop.
        return await asyncio.to_thread(self.batch, list(ops))

    # -- documents by (scope, key)

    @staticmethod
    def _check_key(key: str) -> str:
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY:
            raise ValueError(f"a key is a non-empty string of at most {MAX_KEY} characters, "
                             f"not {key!r}")
        return key

    def _find(self, scope: str, key: str, *, with_text: bool) -> DocumentOut | None:
        """The live document `key` in exactly `scope` (the listing also covers the
        scope's descendants, which may reuse the key)."""
        cursor: str | None = None
        while True:
            try:
                page = self.client.list_documents(scope=scope, external_id=key, cursor=cursor,
                                                  include_text=with_text, limit=100)
            except NotFoundError:  # no such scope (or not this key's): nothing stored
                return None
            for doc in page["items"]:
                if doc["scope"] == scope:
                    return doc
            cursor = page.get("next_cursor")
            if not cursor:
                return None

    @staticmethod
    def _parts(doc: DocumentOut) -> tuple[dict[str, Any], str, tuple[str, ...], datetime,
                                          datetime]:
        """(value, key, namespace, created_at, updated_at) of a stored document."""
        latest = doc["latest_version"]
        text = latest.get("text") or ""  # None: withheld from this key (text_withheld)
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):  # a document someone uploaded as plain text
            value = {"text": text}
        return (value, doc["external_id"] or doc["id"], scope_to_namespace(doc["scope"]),
                _when(doc["created_at"]), _when(latest["created_at"]))

    def _item(self, doc: DocumentOut) -> Item:
        value, key, namespace, created, updated = self._parts(doc)
        return Item(value=value, key=key, namespace=namespace, created_at=created,
                    updated_at=updated)

    def _listed(self, doc: DocumentOut) -> SearchItem:
        value, key, namespace, created, updated = self._parts(doc)
        return SearchItem(namespace, key, value, created, updated, score=None)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        scope = namespace_to_scope(namespace)
        doc = self._find(scope, self._check_key(key), with_text=True)
        return None if doc is None else self._item(doc)

    def _put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any]) -> None:
        if not namespace:
            raise InvalidNamespaceError("a namespace for put has at least one label")
        scope = namespace_to_scope(namespace)
        self._check_key(key)
        if not isinstance(value, Mapping):
            raise TypeError(f"a stored value is a dict, not {type(value).__name__}")
        try:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"the value for key {key!r} in {namespace!r} is not "
                            f"JSON-serialisable: {exc}") from exc
        if scope not in self._scopes:
            self.client.create_scope(scope)  # harmless when it exists
            self._scopes.add(scope)
        doc = self._find(scope, key, with_text=False)
        if doc is None:
            try:
                self.client.create_document(scope, key, text=text, media_type=MEDIA_TYPE,
                                            external_id=key, wait=self.wait or None)
                return
            except ConflictError as exc:  # created meanwhile by someone else: revise it
                if exc.code != "document_exists":
                    raise
                doc = self._find(scope, key, with_text=False)
                if doc is None:
                    raise
        # Same bytes again is no new version (the API is idempotent on content).
        self.client.add_document_version(doc["id"], text=text, media_type=MEDIA_TYPE,
                                         wait=self.wait or None)

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        doc = self._find(namespace_to_scope(namespace), self._check_key(key), with_text=False)
        if doc is not None:
            self.client.delete_document(doc["id"])

    # -- search and listing

    def _documents(self, namespace: tuple[str, ...], *,
                   with_text: bool) -> Iterator[DocumentOut]:
        # No prefix: every scope the key may access (a key limited to /team/bob may not
        # read "/" itself, yet lists what it stored there).
        scope = namespace_to_scope(namespace) if namespace else None
        try:
            yield from self.client.iter_documents(scope=scope, include_text=with_text,
                                                  limit=100)
        except NotFoundError:  # no such scope: nothing stored under it
            return

    def _search(self, op: SearchOp) -> list[SearchItem]:
        scope = namespace_to_scope(op.namespace_prefix)
        if op.query is None or not op.query.strip():
            found: list[SearchItem] = []
            skipped = 0
            for doc in self._documents(op.namespace_prefix, with_text=True):
                item = self._listed(doc)
                if not _passes(item.value, op.filter):
                    continue
                if skipped < op.offset:
                    skipped += 1
                    continue
                found.append(item)
                if len(found) >= op.limit:
                    break
            return found
        try:
            result = self.client.search(op.query, scope=scope, peer_key=self.peer_key,
                                        profile=self.profile, limit=op.limit,
                                        offset=op.offset)
        except NotFoundError:  # no such scope (or not this key's), as for get: nothing
            return []
        items = []
        for hit in result["candidates"]:
            value = {k: hit.get(k) for k in STATEMENT_FIELDS}
            value["scope"] = hit["scope"]
            if not _passes(value, op.filter):
                continue
            when = _when(hit["inserted_at"])
            items.append(SearchItem(namespace=scope_to_namespace(hit["scope"]), key=hit["id"],
                                    value=value, created_at=when, updated_at=when,
                                    score=float(hit["fusion_score"])))
        return items

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        # A literal prefix narrows the listing on the server; wildcards are matched here.
        root: tuple[str, ...] = ()
        for cond in op.match_conditions or ():
            if cond.match_type == "prefix":
                literal = tuple(cond.path[: next((i for i, p in enumerate(cond.path)
                                                  if p == "*"), len(cond.path))])
                root = literal if len(literal) > len(root) else root
        found = {scope_to_namespace(doc["scope"])
                 for doc in self._documents(root, with_text=False)}
        names = [ns for ns in found if all(_matches(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            names = list({ns[: op.max_depth] for ns in names})
        return sorted(names)[op.offset: op.offset + op.limit]
