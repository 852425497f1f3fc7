"""Reads of the memory model. Every selector takes the reader explicitly.

RLS already confines every query to the reader's Account; these filters add scope,
lifecycle, expiry, provisional-subject and sensitivity visibility *inside* the query,
so nothing is post-filtered in Python.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from knowledge import indexing, lifecycle
from knowledge.models import (
    Document,
    DocumentVersion,
    Knowledge,
    KnowledgeSource,
    Message,
    Peer,
    Scope,
    ScopeChain,
    Session,
)
from knowledge.presenters import decode_cursor, encode_cursor
from memhouse.core.errors import ApplicationError, NotFound
from memhouse.core.principal import Principal, Reader, ancestor_paths


def peer_acted_for(*, principal: Principal, peer_key: Any) -> Peer:
    """The peer a request names with `peer_key`, when the credential may act for it: the
    one place that decides who reads for and speaks as whom (reads and ingest both call
    it). A human credential acts only as itself; a machine credential for itself and the
    peers of its act-for grant. Naming anyone else is 403 `act_for_denied`, whether or not
    that peer exists."""
    if not isinstance(peer_key, str) or not peer_key.strip():
        raise ApplicationError("invalid_peer_key", "peer_key must be a non-empty string")
    if not principal.may_act_for(peer_key):
        who = "a human credential acts only as itself" if not principal.is_machine else \
            "this key's act-for grant does not include that peer"
        raise ApplicationError("act_for_denied", f"may not act for {peer_key!r}: {who}",
                               status_code=403)
    peer = Peer.objects.filter(account_id=principal.account_id, key=peer_key).first()
    if peer is None:
        raise ApplicationError("unknown_peer_key", f"no peer with key {peer_key!r}; create "
                               "it first with POST /api/v1/peers (key, kind human or agent)",
                               status_code=400)
    return peer


def reader_for(*, principal: Principal, peer_key: str | None = None) -> Reader:
    """The Reader of a request.

    A named peer_key reads for that peer, within the credential's act-for rule
    (peer_acted_for: an unknown key is an error, never a fallback to the caller);
    otherwise a credential with a peer reads as that peer and a peerless one reads public
    statements only. Scope authorisation stays the credential's.
    """
    if peer_key is not None:
        peer = peer_acted_for(principal=principal, peer_key=peer_key)
        return Reader(account_id=principal.account_id, posture="peer", peer_id=peer.id,
                      scope_roots=principal.scope_paths)
    if principal.peer is not None:
        return Reader(account_id=principal.account_id, posture="peer",
                      peer_id=principal.peer.id, scope_roots=principal.scope_paths)
    return Reader(account_id=principal.account_id, posture="public_only",
                  scope_roots=principal.scope_paths)


def scope_for_read(*, reader: Reader, path: str) -> Scope:
    """The scope a read targets, with its chain (ancestor ids and settings) read in the
    same query and kept on it for the rest of the request (`scope_chain`). Unauthorised
    and missing scopes look the same."""
    from knowledge.services import normalise_scope_path

    path = normalise_scope_path(path)
    if not reader.may_read_scope(path):
        raise NotFound("scope")
    paths = ancestor_paths(path)
    rows = {s.path: s for s in Scope.objects.filter(account_id=reader.account_id,
                                                    path__in=paths)}
    scope = rows.get(path)
    if scope is None:
        raise NotFound("scope")
    scope.read_chain = ScopeChain.of([rows[p] for p in paths if p in rows])
    return scope


def scope_chain(scope: Scope) -> ScopeChain:
    """The scope and its ancestors, nearest first: as scope_for_read read them for this
    request, or loaded now (one query; not kept, so a later change of settings is seen)."""
    if scope.read_chain is not None:
        return scope.read_chain
    paths = ancestor_paths(scope.path)
    rows = {s.path: s for s in Scope.objects.filter(account_id=scope.account_id,
                                                    path__in=paths)}
    return ScopeChain.of([rows[p] for p in paths if p in rows])


def scope_setting(*, scope: Scope, key: str, default: Any = None) -> Any:
    """Nearest-wins inheritance: the deepest scope on the path that sets `key`."""
    return scope_chain(scope).setting(key, default)


def session_for_read(*, reader: Reader, scope: Scope, external_id: str) -> Session:
    """The session a read names: the one in the nearest scope of the read's chain (session
    ids are unique per scope), else one in a scope below that the reader may read; absent
    and unreadable sessions look the same."""
    chain = scope_chain(scope).ids
    candidates = {x.scope_id: x for x in Session.objects.select_related("scope")
                  .filter(account_id=reader.account_id, external_id=external_id,
                          scope_id__in=chain)}
    session = next((candidates[c] for c in chain if c in candidates), None)
    if session is None:
        session = next((x for x in Session.objects.select_related("scope")
                        .filter(account_id=reader.account_id, external_id=external_id)
                        .order_by("scope__path")
                        if reader.may_read_scope(x.scope.path)), None)
    if session is None:
        raise NotFound("session")
    return session


def scope_ancestors(scope: Scope) -> QuerySet[Scope]:
    """The scope and its ancestors: what a read at `scope` may see."""
    return Scope.objects.filter(account_id=scope.account_id, path__in=ancestor_paths(scope.path))


def sensitivity_q(reader: Reader, prefix: str = "") -> Q:
    """Which statements the reader's posture may see, by sensitivity, subject and level."""
    if reader.posture == "internal":
        return Q()
    if reader.posture == "public_only":
        return Q(**{f"{prefix}sensitivity": Knowledge.Sensitivity.PUBLIC})
    return (
        Q(**{f"{prefix}sensitivity__in": [Knowledge.Sensitivity.PUBLIC,
                                          Knowledge.Sensitivity.INTERNAL]})
        | Q(**{f"{prefix}subject_peer_id": reader.peer_id})
        | Q(**{f"{prefix}subject_peer__isnull": True})
        | Q(**{f"{prefix}level__in": [Knowledge.Level.SCOPE, Knowledge.Level.ACCOUNT]})
    )


def lifecycle_q(reader: Reader, *, at: datetime | None = None, prefix: str = "") -> Q:
    """Searchable states; provisional only for its own subject; expiry hidden at read time
    even before the sweeper has moved the row to `expired`."""
    at = at or timezone.now()
    states = Q(**{f"{prefix}state__in": sorted(lifecycle.SEARCHABLE)})
    if reader.peer_id is not None:
        states |= Q(**{f"{prefix}state__in": sorted(lifecycle.SUBJECT_SEARCHABLE),
                       f"{prefix}subject_peer_id": reader.peer_id})
    not_expired = Q(**{f"{prefix}expires_at__isnull": True}) | Q(**{f"{prefix}expires_at__gt": at})
    return states & not_expired


def visible_knowledge(*, reader: Reader, scope_ids: Iterable[uuid.UUID] | None = None,
                      at: datetime | None = None) -> QuerySet[Knowledge]:
    """Knowledge a reader may retrieve, optionally limited to a set of scopes."""
    qs = Knowledge.objects.filter(account_id=reader.account_id)
    if scope_ids is not None:
        qs = qs.filter(scope_id__in=list(scope_ids))
    return qs.filter(lifecycle_q(reader, at=at) & sensitivity_q(reader))


def knowledge_for_read(*, reader: Reader, scope: Scope,
                       at: datetime | None = None) -> QuerySet[Knowledge]:
    """Retrievable knowledge for a read at `scope` (the scope and its ancestors)."""
    ids = list(scope_ancestors(scope).values_list("id", flat=True))
    return visible_knowledge(reader=reader, scope_ids=ids, at=at)


# --- the knowledge listing (GET /api/v1/knowledge) ---------------------------------------

LISTING_DEFAULT_LIMIT = 50
LISTING_MAX_LIMIT = 200
# States any reader may ask the listing for, each within the reader's visibility: the
# contract's member column (sensitivity and scope still apply) plus provisional, which
# only its own subject ever sees (lifecycle_q). The subject column's other states (held,
# rejected, redacted, ...) are listed only for a human reading as themself: an agent's
# act-for grant never reaches what only the subject may inspect.
LISTING_STATES = lifecycle.MEMBER_VISIBLE | lifecycle.SUBJECT_SEARCHABLE
SUBJECT_ONLY_STATES = frozenset(lifecycle.STATES) - LISTING_STATES
# Beyond the member column, the contract's curator and admin columns: a human curator or
# administrator reading with their own credential lists those states in every scope they
# may read (all subjects, as their queue shows them), never provisional (subject only).
CURATOR_STATES = frozenset(n for n, s in lifecycle.STATES.items() if s.visibility.curator)
ADMIN_STATES = frozenset(n for n, s in lifecycle.STATES.items() if s.visibility.admin)


def _listable_states(*, as_subject: bool = False, as_curator: bool = False,
                     as_admin: bool = False) -> frozenset[str]:
    """Every state this reader may name in a `state` filter: the lifecycle contract's
    visibility columns for the roles it reads in (member always; subject, curator and
    admin only for a human reading with their own credential)."""
    states = set(LISTING_STATES)
    if as_subject:
        states |= SUBJECT_ONLY_STATES
    if as_curator:
        states |= CURATOR_STATES
    if as_admin:
        states |= ADMIN_STATES
    return frozenset(states)


def _who_may_list(state: str) -> str:
    seen = lifecycle.STATES[state].visibility
    who = [w for w, yes in (("its subject", seen.subject), ("curators", seen.curator),
                            ("administrators", seen.admin)) if yes]
    return who[0] if len(who) == 1 else ", ".join(who[:-1]) + " and " + who[-1]


@dataclass(frozen=True)
class KnowledgePage:
    items: list[Knowledge]
    next_cursor: str | None


def listing_states(*, states: Iterable[str], as_subject: bool, as_curator: bool = False,
                   as_admin: bool = False) -> tuple[str, ...]:
    """Validate a `state` filter: unknown names are `invalid_state`, states beyond what
    this reader may inspect (_listable_states) are `state_not_visible` (both 400). Empty =
    usable states."""
    wanted = tuple(dict.fromkeys(s.strip() for s in states if s.strip()))
    unknown = [s for s in wanted if s not in lifecycle.STATES]
    if unknown:
        raise ApplicationError("invalid_state", f"unknown state {unknown[0]!r}; states are "
                               f"{', '.join(lifecycle.STATES)}")
    allowed = _listable_states(as_subject=as_subject, as_curator=as_curator,
                              as_admin=as_admin)
    hidden = [s for s in wanted if s not in allowed]
    if hidden:
        raise ApplicationError(
            "state_not_visible", f"state {hidden[0]!r} is listed only for "
            f"{_who_may_list(hidden[0])}, each with their own credential (an agent acting "
            f"for them is not); this reader may list {', '.join(sorted(allowed))}")
    return wanted


def listing_q(reader: Reader, *, states: Iterable[str] = (), as_subject: bool = False,
              as_curator: bool = False, as_admin: bool = False,
              at: datetime | None = None) -> Q:
    """Which statements the listing shows this reader. No states: exactly what search may
    retrieve (lifecycle_q & sensitivity_q). Named states: active and provisional keep
    search's rules (expiry at read time, provisional for its subject); the other
    member-visible states are history under the same sensitivity rule, shown to members
    only when the row was once visible to them (lifecycle.visible_q); subject-only
    states (allowed by listing_states only when `as_subject`) are the reader's own rows,
    and those of the curator / admin column (history included) are the rows in them a
    curator / administrator may inspect by lifecycle.visible_q (the caller limits
    scopes)."""
    usable = lifecycle_q(reader, at=at) & sensitivity_q(reader)
    states = tuple(states)
    if not states:
        return usable
    searchable = lifecycle.SEARCHABLE | lifecycle.SUBJECT_SEARCHABLE
    q = usable & Q(state__in=sorted(set(states) & searchable))
    history = sorted(set(states) & (lifecycle.MEMBER_VISIBLE - searchable))
    if history:
        # History keeps the visibility the row had while it lived (lifecycle.visible_q):
        # someone else's provisional claim never becomes readable by being superseded.
        shown = lifecycle.visible_q("member", history)
        if reader.peer_id is not None:
            shown |= Q(state__in=history, subject_peer_id=reader.peer_id)
        q |= shown & sensitivity_q(reader)
    own = sorted(set(states) & SUBJECT_ONLY_STATES)
    if own and as_subject and reader.peer_id is not None:
        q |= Q(state__in=own, subject_peer_id=reader.peer_id)
    # A curator's / administrator's column, history included, under the rule that history
    # keeps the visibility a row had while it lived (never someone's provisional claim).
    for role, column, yes in (("curator", CURATOR_STATES, as_curator),
                              ("admin", ADMIN_STATES, as_admin)):
        by_role = sorted(set(states) & column - searchable) if yes else []
        if by_role:
            q |= lifecycle.visible_q(role, by_role)
    return q


def readable_scopes_q(reader: Reader) -> Q:
    """Scopes a reader with no scope named may list: its grants, their descendants and,
    because context flows downward, their ancestors (what a read anywhere it may read
    would see)."""
    if reader.scope_roots is None or "/" in reader.scope_roots:
        return Q()
    q = Q(scope__path__in=sorted({p for r in reader.scope_roots for p in ancestor_paths(r)}))
    for root in reader.scope_roots:
        q |= Q(scope__path__startswith=root.rstrip("/") + "/")
    return q


def _after_cursor(cursor: str) -> Q:
    at, pk = decode_cursor(cursor)
    return Q(updated_at__gt=at) | Q(updated_at=at, id__gt=pk)


def knowledge_listing(*, reader: Reader, scope: Scope | None = None,
                      states: Iterable[str] = (), as_subject: bool = False,
                      as_curator: bool = False, as_admin: bool = False,
                      kind: str | None = None, subject_key: str | None = None,
                      updated_since: datetime | None = None, cursor: str | None = None,
                      limit: int = LISTING_DEFAULT_LIMIT) -> KnowledgePage:
    """Statements the reader may see, oldest change first, in keyset pages on
    (updated_at, id), so a row that changes later reappears after the cursor.

    `scope` (already authorised by scope_for_read) lists that scope and its ancestors, as
    a search there would read; without it every scope the reader may read. `states` must
    come from listing_states; `as_subject` (and `as_curator` / `as_admin`, the human's
    roles) are true only for a human credential reading as itself."""
    if scope is not None:
        qs = Knowledge.objects.filter(account_id=reader.account_id,
                                      scope_id__in=scope_ancestors(scope).values("id"))
    else:
        qs = Knowledge.objects.filter(account_id=reader.account_id).filter(
            readable_scopes_q(reader))
    qs = qs.filter(listing_q(reader, states=states, as_subject=as_subject,
                             as_curator=as_curator, as_admin=as_admin))
    if kind:
        qs = qs.filter(kind=kind)
    if subject_key:
        qs = qs.filter(subject_peer__key=subject_key)
    if updated_since is not None:
        qs = qs.filter(updated_at__gte=updated_since)
    if cursor:
        qs = qs.filter(_after_cursor(cursor))
    rows = list(qs.select_related("subject_peer", "scope", "held_scope")
                .order_by("updated_at", "id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return KnowledgePage(rows, encode_cursor(rows[-1].updated_at, rows[-1].pk) if more else None)


def _inspectable(reader: Reader, *, as_subject: bool = False, as_curator: bool = False,
                 as_admin: bool = False) -> QuerySet[Knowledge]:
    """The statements some state filter of the listing would show this reader in a scope
    it may read: GET /knowledge/<id>'s rule, also for whole sources (document text,
    message outcomes)."""
    states = tuple(sorted(_listable_states(as_subject=as_subject, as_curator=as_curator,
                                           as_admin=as_admin)))
    return (Knowledge.objects.filter(account_id=reader.account_id)
            .filter(readable_scopes_q(reader))
            .filter(listing_q(reader, states=states, as_subject=as_subject,
                              as_curator=as_curator, as_admin=as_admin)))


def knowledge_listed(*, reader: Reader, knowledge_id: uuid.UUID,
                     as_subject: bool = False, as_curator: bool = False,
                     as_admin: bool = False) -> Knowledge:
    """One statement, visible exactly when some state filter of the listing would show it
    to this reader in a scope it may read; otherwise the same 404 as an unknown id."""
    item = (_inspectable(reader, as_subject=as_subject, as_curator=as_curator,
                         as_admin=as_admin).filter(pk=knowledge_id)
            .select_related("subject_peer", "scope", "held_scope").first())
    if item is None:
        raise NotFound("knowledge")
    return item



# --- the document listing (GET /api/v1/documents) -----------------------------------------

DOCUMENTS_DEFAULT_LIMIT = 50
DOCUMENTS_MAX_LIMIT = 100


@dataclass(frozen=True)
class DocumentPage:
    """Live documents, each with its latest version (text loaded only when asked)."""

    items: list[tuple[Document, DocumentVersion]]
    next_cursor: str | None
    # Documents whose latest version's text this reader may not read (only with text).
    text_withheld: frozenset[uuid.UUID] = frozenset()


def _scope_subtree_q(root: str) -> Q:
    if root == "/":
        return Q()
    return Q(scope__path=root) | Q(scope__path__startswith=root.rstrip("/") + "/")


def documents_listing(*, reader: Reader, scope_path: str | None = None,
                      external_id: str | None = None, with_text: bool = False,
                      cursor: str | None = None,
                      limit: int = DOCUMENTS_DEFAULT_LIMIT, as_subject: bool = False,
                      reads_every_text: bool = False) -> DocumentPage:
    """Documents that are not tombstoned, in the scopes the credential may access (the
    rule of GET /documents/<id>: the scope grant decides who may know a document
    exists), oldest first in keyset pages on (created_at, id).

    Its raw text says everything its statements say, so `with_text` gives a document's
    text only to its owner (the uploading peer; a peerless upload: peerless keys), to
    `reads_every_text` (curators and administrators) and to a reader who may inspect
    every statement drawn from its latest version (the rule of GET /knowledge/<id>,
    `as_subject` as there); for the rest its id is in `text_withheld`.

    `scope_path` narrows the list to that scope and its descendants (a document store's
    namespace prefix); a scope the credential may not read is the same 404 as a missing
    one. `external_id` is the uploader's own id for a document, unique per scope."""
    from knowledge.services import normalise_scope_path

    qs = Document.objects.filter(account_id=reader.account_id, deleted_at__isnull=True)
    if reader.scope_roots is not None and "/" not in reader.scope_roots:
        allowed = Q(pk__in=[])  # no grant: nothing
        for root in reader.scope_roots:
            allowed |= _scope_subtree_q(root)
        qs = qs.filter(allowed)
    if scope_path is not None:
        path = normalise_scope_path(scope_path)
        if not reader.may_read_scope(path) or not Scope.objects.filter(
                account_id=reader.account_id, path=path).exists():
            raise NotFound("scope")
        qs = qs.filter(_scope_subtree_q(path))
    if external_id is not None:
        qs = qs.filter(external_id=external_id)
    if cursor:
        at, pk = decode_cursor(cursor)
        qs = qs.filter(Q(created_at__gt=at) | Q(created_at=at, id__gt=pk))
    docs = list(qs.select_related("scope").order_by("created_at", "id")[: limit + 1])
    more = len(docs) > limit
    docs = docs[:limit]
    versions = DocumentVersion.objects.filter(document__in=docs, tombstoned_at__isnull=True)
    versions = versions.defer("blob") if with_text else versions.defer("text", "blob")
    # DISTINCT ON: one latest version per document in a single query.
    latest = {v.document_id: v for v in versions.order_by("document_id", "-number")
              .distinct("document_id")}
    items = [(d, latest[d.id]) for d in docs if d.id in latest]
    nxt = encode_cursor(docs[-1].created_at, docs[-1].pk) if more else None
    withheld: frozenset[uuid.UUID] = frozenset()
    if with_text and not reads_every_text:
        owned = {d.id for d, _ in items if d.peer_id == reader.peer_id}
        visible = _inspectable(reader, as_subject=as_subject)
        hidden = (KnowledgeSource.objects
                  .filter(document_version_id__in=[v.pk for d, v in items if d.id not in owned])
                  .filter(~Exists(visible.filter(id=OuterRef("knowledge_id"))))
                  .values_list("document_version__document_id", flat=True).distinct())
        withheld = frozenset(hidden)
    return DocumentPage(items, nxt, withheld)


# --- which source messages a reader may see (one rule, also retrieval.lineage's) ----------

def visible_messages(*, reader: Reader, scope_ids: Any = None,
                     at: datetime | None = None) -> QuerySet[Message]:
    """Source messages the reader may see: spoken by the reader, or with every statement
    derived from them visible to the reader (a visible derived statement never opens a
    source that also fed a hidden one). `scope_ids` limits both the messages and the
    statements that count as visible (None: the whole Account; the caller checks the
    scope grant); `at` is the time visibility is judged at. The internal posture sees
    every message."""
    qs = Message.objects.filter(account_id=reader.account_id)
    if scope_ids is not None:
        qs = qs.filter(scope_id__in=scope_ids)
    if reader.posture == "internal":
        return qs
    vis = visible_knowledge(reader=reader, scope_ids=scope_ids, at=at)
    derived = KnowledgeSource.objects.filter(message_id=OuterRef("pk"))
    # NOT EXISTS per derived statement, not NOT IN (the visible set): PostgreSQL cannot
    # turn NOT IN into an anti-join, so it built the reader's whole visible set even to
    # check a handful of messages (semantic's message lanes check only their candidates).
    hidden_derived = derived.filter(~Exists(vis.filter(id=OuterRef("knowledge_id"))))
    allowed = Exists(derived) & ~Exists(hidden_derived)
    if reader.peer_id is not None:
        allowed = Q(peer_id=reader.peer_id) | allowed
    return qs.filter(allowed)


# --- a source's processing outcome (POST /api/v1/messages or /documents with wait) ------

# Processing states of a message or document version, from its pipeline markers: the
# pipeline wrote its statements (a message's `extracted_at`, a version's `processed_at`)
# or set it aside (`extraction_failed_at`, `processing_failed_at`). There is no marker
# for a source a worker has started on: until its write commits it is `queued`.
QUEUED, PROCESSED, FAILED = "queued", "processed", "failed"


def message_processing(message: Message) -> str:
    if message.extracted_at is not None:
        return PROCESSED
    if message.extraction_failed_at is not None:
        return FAILED
    return QUEUED


def version_processing(version: DocumentVersion) -> str:
    if version.processed_at is not None:
        return PROCESSED
    if version.processing_failed_at is not None:
        return FAILED
    return QUEUED


# Why a source was set aside, as a code its writer can act on: a version would yield
# more statements than MEMHOUSE_MAX_STATEMENTS_PER_VERSION (split the document); its
# processing (a message's extraction) raised (an administrator reads the error in
# GET /api/v1/admin/dead-letters); or its processing was cut off (a worker killed
# mid-task) MEMHOUSE_MAX_INGEST_ATTEMPTS times. A coded reason is stored as
# "<code>: <human message>"; an exception's is "<class>: <message>".
TOO_MANY_STATEMENTS = "too_many_statements"
PROCESSING_FAILED = "processing_failed"
EXTRACTION_FAILED = "extraction_failed"
CRASHED_REPEATEDLY = "crashed_repeatedly"
_CODED = (TOO_MANY_STATEMENTS, CRASHED_REPEATEDLY)


def failure_reason(stored: str, *, default: str) -> tuple[str, str]:
    """(code, human message) of a stored failure reason; `default` is the code of an
    exception's (processing_failed for a version, extraction_failed for a message)."""
    for code in _CODED:
        if stored.startswith(code + ":"):
            return code, stored[len(code) + 1:].strip()
    return default, stored


def version_error(version: DocumentVersion) -> str | None:
    """The code of a set-aside version's failure (never the error text); None otherwise."""
    if version_processing(version) != FAILED:
        return None
    return failure_reason(version.processing_error, default=PROCESSING_FAILED)[0]


def _index_pending(account_id: uuid.UUID, derived_from: Q, message_ids: list[Any]) -> int:
    """Once the pipeline is done with some sources: how many of them (messages) and of the
    statements drawn from them (`derived_from`, a KnowledgeSource filter) are not indexed
    yet (knowledge.indexing)."""
    if not indexing.registered():
        return 0
    statements = list(KnowledgeSource.objects.filter(derived_from, account_id=account_id)
                      .values_list("knowledge_id", flat=True))
    return indexing.pending(account_id, knowledge_ids=statements, message_ids=message_ids)


def messages_pending(*, account_id: uuid.UUID, message_ids: Iterable[Any]) -> int:
    """How many of these messages the pipeline has neither processed nor set aside, or,
    once none is left, how many of them and their statements are not indexed yet."""
    ids = list(message_ids)
    waiting = Message.objects.filter(account_id=account_id, pk__in=ids,
                                     extracted_at__isnull=True,
                                     extraction_failed_at__isnull=True).count()
    return waiting or _index_pending(account_id, Q(message_id__in=ids), ids)


def versions_pending(*, account_id: uuid.UUID, version_ids: Iterable[Any]) -> int:
    """How many of these live document versions the pipeline has neither processed nor
    set aside (a tombstoned version is never processed: it waits for nothing), or, once
    none is left, how many of their statements are not indexed yet."""
    ids = list(version_ids)
    waiting = DocumentVersion.objects.filter(account_id=account_id, pk__in=ids,
                                             tombstoned_at__isnull=True,
                                             processed_at__isnull=True,
                                             processing_failed_at__isnull=True).count()
    return waiting or _index_pending(account_id, Q(document_version_id__in=ids), [])


def message_for_read(*, reader: Reader, message_id: uuid.UUID) -> Message:
    """One message, when the reader may read it: in a scope the credential may read, and
    visible by the source-message rule (`visible_messages`). Unknown, other Accounts' and
    unreadable messages are the same 404."""
    message = (visible_messages(reader=reader).filter(pk=message_id)
               .select_related("peer", "scope", "session").first())
    if message is None or not reader.may_read_scope(message.scope.path):
        raise NotFound("message")
    return message


@dataclass
class SourceOutcome:
    """What the pipeline made of one message or document version, as a reader may see it.

    `statements`: the derived statements the reader may read (the visibility of GET
    /api/v1/knowledge/<id>), in any state. `refused`: reason code -> how many derived
    statements are rejected for it (codes only, whoever may read them). `hidden`: state ->
    how many derived statements the reader may not read (counts only, never text)."""

    processing: str
    statements: list[Knowledge] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)
    hidden: dict[str, int] = field(default_factory=dict)


def _source_outcomes(*, by_id: dict[uuid.UUID, tuple[str, Reader, bool]], source_field: str
                     ) -> dict[uuid.UUID, SourceOutcome]:
    """Each source's outcome for its reader: `by_id` maps a source id to (processing
    state, reader, as_subject); `source_field` is KnowledgeSource's link to it. One query
    for every derived statement, one per distinct reader for which of them it may read,
    one for the readable rows."""
    derived: dict[uuid.UUID, list[tuple[uuid.UUID, str, str]]] = {pk: [] for pk in by_id}
    for source_id, knowledge_id, state, reason in (
            KnowledgeSource.objects.filter(**{f"{source_field}__in": list(by_id)})
            .order_by("knowledge__inserted_at", "knowledge_id")
            .values_list(source_field, "knowledge_id", "knowledge__state",
                         "knowledge__state_reason")):
        derived[source_id].append((knowledge_id, state, reason))

    def key(reader: Reader, as_subject: bool) -> tuple[Any, ...]:
        return (reader.posture, reader.peer_id, reader.scope_roots, as_subject)

    wanted: dict[tuple[Any, ...], tuple[Reader, bool, set[uuid.UUID]]] = {}
    for pk, (_, reader, as_subject) in by_id.items():
        entry = wanted.setdefault(key(reader, as_subject), (reader, as_subject, set()))
        entry[2].update(k for k, _, _ in derived[pk])
    readable: dict[tuple[Any, ...], set[uuid.UUID]] = {}
    for reader_key, (reader, as_subject, ids) in wanted.items():
        readable[reader_key] = set(
            _inspectable(reader, as_subject=as_subject).filter(pk__in=list(ids))
            .values_list("pk", flat=True)) if ids else set()
    shown: set[uuid.UUID] = set().union(*readable.values())
    rows = {k.pk: k for k in Knowledge.objects.filter(pk__in=list(shown))
            .select_related("subject_peer", "scope", "held_scope")} if shown else {}
    out: dict[uuid.UUID, SourceOutcome] = {}
    for pk, (processing, reader, as_subject) in by_id.items():
        outcome = SourceOutcome(processing=processing)
        may = readable[key(reader, as_subject)]
        for knowledge_id, state, reason in derived[pk]:
            if state == lifecycle.REJECTED:
                outcome.refused[reason] = outcome.refused.get(reason, 0) + 1
            if knowledge_id in may:
                outcome.statements.append(rows[knowledge_id])
            else:
                outcome.hidden[state] = outcome.hidden.get(state, 0) + 1
        out[pk] = outcome
    return out


def message_outcomes(*, messages: list[tuple[Message, Reader, bool]]
                     ) -> dict[uuid.UUID, SourceOutcome]:
    """The outcome of each message for its reader (message, reader, as_subject)."""
    return _source_outcomes(
        by_id={m.pk: (message_processing(m), reader, as_subject)
               for m, reader, as_subject in messages}, source_field="message_id")


def version_outcomes(*, versions: list[tuple[DocumentVersion, Reader, bool]]
                     ) -> dict[uuid.UUID, SourceOutcome]:
    """The outcome of each document version for its reader (version, reader, as_subject):
    the statements drawn from it, including those an earlier version already held that
    it still supports."""
    return _source_outcomes(
        by_id={v.pk: (version_processing(v), reader, as_subject)
               for v, reader, as_subject in versions}, source_field="document_version_id")
