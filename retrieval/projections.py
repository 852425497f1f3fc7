"""Context projections: peer profiles, scope cards and session summaries.

Projections are rebuildable caches of governed knowledge, never a second store:

* **Anchored.** Every projection is anchored at exactly one scope and holds statements
  anchored exactly there. A read at `/a/b` assembles the projections of `/a/b`, `/a` and
  `/`, the same scopes a search there selects, and never a sibling's or descendant's.
* **Filtered before it is built.** A rebuild reads with the internal (server-side) reader.
  Shared projections (scope cards, session summaries) then keep shareable statements only:
  public or internal sensitivity, about the scope (no subject peer), or promoted (scope or
  account level), so a personal peer-level statement never reaches one. A `public`
  audience copy holds public statements only, for peerless readers. A peer profile is
  keyed by its subject and holds that subject's own rows, including the subject's
  provisional ones (the lifecycle contract's "subject-keyed peer projection only").
* **Dirty marking.** The lifecycle refresh hook runs inside the transaction of every state
  change. It locks and marks dirty (version + 1) every projection that holds the statement
  or that the statement now belongs in, and enqueues their rebuild on commit. Because the
  dirty mark holds the row lock until the change commits, a rebuild racing the change
  either waits for it or is invalidated by it; it can never mark a stale payload clean.
* **Bounded delta compaction.** A rebuild replaces the payload wholesale (no delta log
  accumulates), caps it at MAX_ENTRIES statements, keeps the source knowledge ids, and
  records how many ids it added and removed against the previous build. Session
  summaries keep the newest statements, the other kinds the most confident.
* **An id pool beyond the payload.** Every statement the projection is built from (up to
  POOL_MAX, in payload order) is linked by a ProjectionSource row, not only the
  MAX_ENTRIES shown. The pool rides on the same invalidation as the payload: a change to
  any pooled statement dirties the projection, and the liveness check reads every link.
  (A context read with a query once ranked this pool for its head; since 2026-12-05 the
  live search ranks it, retrieval.context.)
* **Cross-process invalidation by versioning.** `version` bumps on every rebuild and dirty
  mark. Each process keeps a bounded local payload cache keyed by projection id; a reader
  first reads the (id, version, dirty) rows and reuses a local payload only when its
  version matches, so a rebuild in one process invalidates every other process's copy.
* **Belt and braces.** Before serving a payload the reader checks, in SQL, that every
  source statement is still live (state and expiry), so an expiry that has not yet been
  swept, or any change that bypassed the hook, is treated as a miss and rebuilt.

No generation model is called anywhere here.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from knowledge import lifecycle
from knowledge.models import Knowledge, KnowledgeSource
from knowledge.selectors import lifecycle_q, sensitivity_q, visible_knowledge
from memhouse.core.principal import Reader, internal_reader
from memhouse.core.tenancy import account_context
from retrieval.models import Projection, ProjectionSource

log = logging.getLogger(__name__)

MAX_ENTRIES = 40
# Pool cap: the ranking reads at most this many vectors per projection (an exact scan,
# a few ms), and a rebuild writes this many links at most.
POOL_MAX = 2000
LOCAL_CACHE_SIZE = 1024
REBUILD_SETTING = "memhouse.projection_rebuild"
Kind = Projection.Kind
Audience = Projection.Audience
# Lifecycle states whose rows may sit in a projection, by projection class.
SHARED_STATES = frozenset(n for n, s in lifecycle.STATES.items()
                          if s.projection == "shared_and_peer")
SUBJECT_STATES = SHARED_STATES | frozenset(n for n, s in lifecycle.STATES.items()
                                           if s.projection == "subject_peer_only")


# --- what a projection holds ---------------------------------------------------------------

def shareable_q(prefix: str = "") -> Q:
    """Statements a shared projection may carry: public or internal, about the scope, or
    promoted above peer level (promotion is the subject's consent record)."""
    return (Q(**{f"{prefix}sensitivity__in": [Knowledge.Sensitivity.PUBLIC,
                                              Knowledge.Sensitivity.INTERNAL]})
            | Q(**{f"{prefix}subject_peer__isnull": True})
            | Q(**{f"{prefix}level__in": [Knowledge.Level.SCOPE, Knowledge.Level.ACCOUNT]}))


def statements_for(p: Projection, *, at: datetime | None = None) -> QuerySet[Knowledge]:
    """The governed statements projection `p` is built from, in payload order."""
    at = at or timezone.now()
    if p.kind == Kind.PEER_PROFILE:
        # Subject-keyed: the subject's own rows, provisional ones included, any sensitivity.
        subject = Reader(account_id=p.account_id, posture="peer", peer_id=p.peer_id,
                         scope_roots=None)
        return (Knowledge.objects.filter(account_id=p.account_id, scope_id=p.scope_id,
                                         subject_peer_id=p.peer_id)
                .filter(lifecycle_q(subject, at=at))
                .order_by("-confidence", "-inserted_at", "id"))
    qs = visible_knowledge(reader=internal_reader(p.account_id), scope_ids=[p.scope_id], at=at)
    if p.audience == Audience.PUBLIC:
        qs = qs.filter(sensitivity_q(Reader(account_id=p.account_id, posture="public_only")))
    else:
        qs = qs.filter(shareable_q())
    if p.kind == Kind.SESSION_SUMMARY:
        assert p.session_id is not None  # the kind-shape constraint guarantees it
        in_session = KnowledgeSource.objects.filter(knowledge_id=OuterRef("pk"),
                                                    message__session_id=p.session_id)
        # The newest statements: a session summary is read to continue the session.
        return qs.filter(Exists(in_session)).order_by("-inserted_at", "-id")
    return qs.order_by("-confidence", "-inserted_at", "id")


def entry(k: Knowledge) -> dict[str, Any]:
    """One statement as projections and context carry it (JSON-ready)."""

    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    return {
        "id": str(k.id), "statement": k.statement, "kind": k.kind, "level": k.level,
        "sensitivity": k.sensitivity, "state": k.state, "confidence": k.confidence,
        "subject_peer_key": k.subject_peer.key if k.subject_peer else None,
        "scope": k.scope.path, "relevant_from": iso(k.relevant_from),
        "relevant_until": iso(k.relevant_until), "inserted_at": iso(k.inserted_at),
    }


# --- rebuild ---------------------------------------------------------------------------------

def _set_rebuild_flag(on: bool) -> None:
    with connection.cursor() as cur:
        cur.execute("SELECT set_config(%s, %s, true)", [REBUILD_SETTING, "on" if on else ""])


def rebuild(account_id: uuid.UUID | str, projection_id: uuid.UUID | str) -> bool:
    """Rebuild one projection from governed knowledge; False when it no longer exists.

    The row is locked for the rebuild, so a concurrent dirty mark waits for it and then
    dirties the fresh build again (and enqueues another rebuild)."""
    with account_context(account_id):
        p = (Projection.objects.select_for_update().select_related("scope")
             .filter(pk=projection_id).first())
        if p is None:
            return False
        now = timezone.now()
        qs = statements_for(p, at=now)
        total = qs.count()
        rows = list(qs.select_related("scope", "subject_peer")[:MAX_ENTRIES])
        ids = [k.id for k in rows]
        pool = ids + [i for i in qs.values_list("id", flat=True)[MAX_ENTRIES:POOL_MAX]]
        previous = set(ProjectionSource.objects.filter(projection_id=p.pk)
                       .values_list("knowledge_id", flat=True))
        payload = {
            "kind": p.kind, "audience": p.audience, "scope": p.scope.path,
            "entries": [entry(k) for k in rows], "total": total,
            "truncated": total > len(rows), "pool": len(pool),
            "delta": {"added": len(set(pool) - previous),
                      "removed": len(previous - set(pool))},
        }
        Projection.objects.filter(pk=p.pk).update(
            payload=payload, source_ids=ids, built_at=now, dirty=False,
            version=F("version") + 1)
        _set_rebuild_flag(True)
        try:
            ProjectionSource.objects.filter(projection_id=p.pk).delete()
            ProjectionSource.objects.bulk_create([
                ProjectionSource(account_id=p.account_id, projection_id=p.pk, knowledge_id=k)
                for k in pool])
        finally:
            _set_rebuild_flag(False)
    return True


def rebuild_many(account_id: uuid.UUID | str, projection_ids: Iterable[uuid.UUID | str]) -> int:
    """Rebuild each projection in its own transaction; returns how many were rebuilt."""
    done = 0
    for pid in dict.fromkeys(str(i) for i in projection_ids):
        done += rebuild(account_id, pid)
    return done


# The rebuild task lives in retrieval.projection_tasks, which registers itself here when
# it is imported (retrieval.apps imports it), so this work module never imports its task
# module (no import cycle).
_REBUILD_TASK: list[Any] = []


def register_rebuild_task(task: Any) -> None:
    _REBUILD_TASK[:] = [task]


def enqueue_rebuild(account_id: uuid.UUID | str, projection_ids: Sequence[uuid.UUID | str]
                    ) -> None:
    """Run after commit: hand the rebuild to the queue (in-process when eager)."""
    if not projection_ids:
        return
    if not _REBUILD_TASK:  # a configuration error, not bad input
        raise RuntimeError("no projection rebuild task registered (is 'retrieval' ready?)")
    _REBUILD_TASK[0].delay(str(account_id), [str(i) for i in projection_ids])


def _rebuild_on_commit(account_id: uuid.UUID, ids: Sequence[uuid.UUID]) -> None:
    if ids:
        ids = list(ids)
        transaction.on_commit(lambda: enqueue_rebuild(account_id, ids), robust=True)


# --- dirty marking (the lifecycle refresh hook) ------------------------------------------------

def _placement(item: Any) -> tuple[bool, list[Any]]:
    """Whether `item`'s state places it in projections (peer profile), and the
    audiences of the shared ones (scope card, session summary) it belongs in."""
    mode = lifecycle.STATES[item.state].projection if item.state in lifecycle.STATES else "none"
    if mode == "none":
        return False, []
    if item.expires_at is not None and item.expires_at <= timezone.now():
        # Already expired: it belongs in no projection, and dirtying the ones a reader
        # uses would let their cache diagnostics reveal a row that reader cannot see.
        return False, []
    audiences = []
    if mode == "shared_and_peer" and is_shareable(item):
        audiences.append(Audience.SHARED)
    if mode == "shared_and_peer" and item.sensitivity == Knowledge.Sensitivity.PUBLIC:
        audiences.append(Audience.PUBLIC)
    return True, audiences


def affected_q(item: Knowledge) -> Q:
    """Projections a change of `item` can affect: every one that holds it, and every one
    its new state, scope, subject and sessions place it in."""
    q = Q(pk__in=Subquery(ProjectionSource.objects.filter(knowledge_id=item.pk)
                          .values("projection_id")))
    placed, audiences = _placement(item)
    if not placed:
        return q
    if item.subject_peer_id is not None:
        q |= Q(kind=Kind.PEER_PROFILE, peer_id=item.subject_peer_id, scope_id=item.scope_id)
    if audiences:
        sessions = (KnowledgeSource.objects.filter(knowledge_id=item.pk,
                                                   message__session__isnull=False)
                    .values("message__session_id"))
        q |= Q(kind=Kind.SCOPE_CARD, scope_id=item.scope_id, audience__in=audiences)
        q |= Q(kind=Kind.SESSION_SUMMARY, scope_id=item.scope_id, audience__in=audiences,
               session_id__in=Subquery(sessions))
    return q


def affected_many_q(items: Sequence[Any]) -> Q:
    """The union of affected_q over `items`, as a few terms however many rows: rows of
    one scope and audiences share their scope card and session-summary terms."""
    q = Q(pk__in=Subquery(ProjectionSource.objects.filter(
        knowledge_id__in=[item.pk for item in items]).values("projection_id")))
    peers: set[tuple[Any, Any]] = set()
    shared: dict[tuple[Any, tuple[Any, ...]], list[Any]] = {}
    for item in items:
        placed, audiences = _placement(item)
        if placed and item.subject_peer_id is not None:
            peers.add((item.subject_peer_id, item.scope_id))
        if audiences:
            shared.setdefault((item.scope_id, tuple(audiences)), []).append(item.pk)
    for peer_id, scope_id in sorted(peers, key=str):
        q |= Q(kind=Kind.PEER_PROFILE, peer_id=peer_id, scope_id=scope_id)
    for (scope_id, group), pks in shared.items():
        sessions = (KnowledgeSource.objects.filter(knowledge_id__in=pks,
                                                   message__session__isnull=False)
                    .values("message__session_id"))
        q |= Q(kind=Kind.SCOPE_CARD, scope_id=scope_id, audience__in=list(group))
        q |= Q(kind=Kind.SESSION_SUMMARY, scope_id=scope_id, audience__in=list(group),
               session_id__in=Subquery(sessions))
    return q


def is_shareable(item: Any) -> bool:
    """shareable_q for one row in memory (to target dirty marks; never to filter reads)."""
    return (item.sensitivity in (Knowledge.Sensitivity.PUBLIC, Knowledge.Sensitivity.INTERNAL)
            or item.subject_peer_id is None
            or item.level in (Knowledge.Level.SCOPE, Knowledge.Level.ACCOUNT))


def mark_dirty(ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    """Lock (in id order, so concurrent markers do not deadlock) and dirty projections."""
    locked = list(Projection.objects.select_for_update().filter(pk__in=list(ids))
                  .order_by("pk").values_list("pk", flat=True))
    if locked:
        Projection.objects.filter(pk__in=locked).update(dirty=True, version=F("version") + 1)
    return locked


def on_knowledge_change(item: Any) -> None:
    """The refresh hook: called with the Knowledge row inside its state change's
    transaction. Marks the affected projections dirty now; rebuilds them after commit."""
    if item.state == lifecycle.INITIAL_STATE:
        return  # a freshly proposed row is in no projection and belongs in none
    locked = list(Projection.objects.select_for_update()
                  .filter(account_id=item.account_id).filter(affected_q(item))
                  .order_by("pk").values_list("pk", flat=True))
    if locked:
        Projection.objects.filter(pk__in=locked).update(dirty=True, version=F("version") + 1)
    _rebuild_on_commit(item.account_id, locked)


def on_knowledge_change_many(items: Sequence[Any]) -> None:
    """on_knowledge_change for the rows of one set-based lifecycle write: one query
    marks every projection any of them affects."""
    items = [item for item in items if item.state != lifecycle.INITIAL_STATE]
    for account_id in {item.account_id for item in items}:
        q = affected_many_q([item for item in items if item.account_id == account_id])
        locked = list(Projection.objects.select_for_update().filter(account_id=account_id)
                      .filter(q).order_by("pk").values_list("pk", flat=True))
        if locked:
            Projection.objects.filter(pk__in=locked).update(dirty=True,
                                                            version=F("version") + 1)
        _rebuild_on_commit(account_id, locked)


# --- reading ---------------------------------------------------------------------------------

class LocalPayloadCache:
    """A bounded, process-local payload cache keyed by projection id and version."""

    def __init__(self, max_entries: int = LOCAL_CACHE_SIZE) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[uuid.UUID, tuple[int, dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, pid: uuid.UUID, version: int) -> dict[str, Any] | None:
        with self._lock:
            item = self._items.get(pid)
            if item is None or item[0] != version:
                return None
            self._items.move_to_end(pid)
            return item[1]

    def put(self, pid: uuid.UUID, version: int, payload: dict[str, Any]) -> None:
        with self._lock:
            self._items[pid] = (version, payload)
            self._items.move_to_end(pid)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


local_cache = LocalPayloadCache()


@dataclass(frozen=True)
class Key:
    kind: str
    audience: str
    scope_id: uuid.UUID
    peer_id: uuid.UUID | None = None
    session_id: uuid.UUID | None = None


@dataclass
class Loaded:
    """The outcome of reading a set of projections."""

    payloads: dict[Key, dict[str, Any]] = field(default_factory=dict)
    versions: dict[Key, int] = field(default_factory=dict)
    ids: dict[Key, uuid.UUID] = field(default_factory=dict)  # of the served payloads
    missing: list[Key] = field(default_factory=list)
    dirty: list[Key] = field(default_factory=list)
    stale: list[Key] = field(default_factory=list)
    local_hits: int = 0
    loaded: int = 0

    @property
    def complete(self) -> bool:
        return not (self.missing or self.dirty or self.stale)


def _key_of(row: dict[str, Any]) -> Key:
    return Key(row["kind"], row["audience"], row["scope_id"], row["peer_id"], row["session_id"])


def _live_violation_q(now: datetime) -> Q:
    """A link whose statement may no longer be served by its projection."""
    expired = Q(knowledge__expires_at__isnull=False, knowledge__expires_at__lte=now)
    subject_bad = Q(projection__kind=Kind.PEER_PROFILE) & ~Q(
        knowledge__state__in=sorted(SUBJECT_STATES))
    shared_bad = ~Q(projection__kind=Kind.PEER_PROFILE) & ~Q(
        knowledge__state__in=sorted(SHARED_STATES))
    return expired | subject_bad | shared_bad


def load(account_id: uuid.UUID, keys: Sequence[Key]) -> Loaded:
    """Read the clean payloads of `keys`; create missing rows and dirty stale ones, and
    enqueue a rebuild of everything not clean after this transaction commits."""
    out = Loaded()
    if not keys:
        return out
    now = timezone.now()
    wanted = Q()
    for k in keys:
        wanted |= Q(kind=k.kind, audience=k.audience, scope_id=k.scope_id, peer_id=k.peer_id,
                    session_id=k.session_id)
    rows: dict[Key, dict[str, Any]] = {
        _key_of(dict(r)): dict(r) for r in Projection.objects.filter(account_id=account_id)
        .filter(wanted).values("id", "kind", "audience", "scope_id", "peer_id",
                               "session_id", "version", "dirty", "built_at")}
    clean: dict[Key, dict[str, Any]] = {}
    for k in keys:
        row = rows.get(k)
        if row is None:
            out.missing.append(k)
        elif row["dirty"] or row["built_at"] is None:
            out.dirty.append(k)
        else:
            clean[k] = row
    if clean:
        bad = set(ProjectionSource.objects.filter(
            projection_id__in=[r["id"] for r in clean.values()])
            .filter(_live_violation_q(now)).values_list("projection_id", flat=True))
        for k in [k for k, r in clean.items() if r["id"] in bad]:
            out.stale.append(k)
            clean.pop(k)
    need: dict[uuid.UUID, Key] = {}
    for k, row in clean.items():
        payload = local_cache.get(row["id"], row["version"])
        if payload is None:
            need[row["id"]] = k
        else:
            out.payloads[k], out.versions[k] = payload, row["version"]
            out.ids[k] = row["id"]
            out.local_hits += 1
    if need:
        fresh = {r["id"]: r for r in Projection.objects.filter(pk__in=list(need), dirty=False)
                 .values("id", "version", "payload")}
        for pid, k in need.items():
            r = fresh.get(pid)
            if r is None:  # dirtied since the first read
                out.dirty.append(k)
                continue
            local_cache.put(pid, r["version"], r["payload"])
            out.payloads[k], out.versions[k] = r["payload"], r["version"]
            out.ids[k] = pid
            out.loaded += 1
    rebuild_ids = [rows[k]["id"] for k in out.dirty if k in rows]
    if out.stale:
        rebuild_ids += mark_dirty(rows[k]["id"] for k in out.stale)
    if out.missing:
        Projection.objects.bulk_create(
            [Projection(account_id=account_id, kind=k.kind, audience=k.audience,
                        scope_id=k.scope_id, peer_id=k.peer_id, session_id=k.session_id,
                        dirty=True, version=1) for k in out.missing],
            ignore_conflicts=True)
        created = Q()
        for k in out.missing:
            created |= Q(kind=k.kind, audience=k.audience, scope_id=k.scope_id,
                         peer_id=k.peer_id, session_id=k.session_id)
        rebuild_ids += list(Projection.objects.filter(account_id=account_id).filter(created)
                            .values_list("id", flat=True))
    _rebuild_on_commit(account_id, rebuild_ids)
    return out
