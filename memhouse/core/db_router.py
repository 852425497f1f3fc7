"""Reads a hot standby may serve, and the router that sends them there (docs/deploy.md,
"Read replicas").

With DATABASE_REPLICA_URL set, the settings add a second connection, `replica`: a
streaming standby of the primary, reached as the same non-superuser role without
BYPASSRLS, so row-level security binds it exactly as it binds the primary. Which reads go
there is explicit, never "every SELECT": a replica-safe read runs inside
:func:`replica_reads` (API views through :func:`replica_safe`). The block opens one
transaction on the replica and sets the Account in it (the setting is transaction-local:
a read in any other transaction would match no row), then routes the block's ORM reads,
and the raw SQL that asks :func:`read_connection`, there. Everything else stays on the
primary (`default`):

* every write, whatever block it is in (`db_for_write`), and every locking read
  (`select_for_update` routes as a write);
* read-your-writes in the request that wrote: a block entered by a transaction that has
  already written (PostgreSQL gave it a transaction id) reads from the primary, because
  the standby cannot see an uncommitted write and sees a committed one only after
  replay; a write inside a block turns the rest of that block's reads to the primary;
* and in the writer's next requests: a request that wrote records, for its writer (its
  credential, else its peer), the primary's WAL position when it answered
  (:class:`ReadYourWritesMiddleware`); that writer's blocks read from the replica only
  once it has replayed that far. Exact, not a guessed time window, so a `wait`ed ingest
  is found by the next search whatever the lag;
* a replica that cannot be reached is left alone for REPLICA_RETRY_SECONDS, its reads
  served by the primary meanwhile.

Without DATABASE_REPLICA_URL nothing changes: every alias this module returns is
`default`, and `replica_reads` runs no query.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections, transaction

from memhouse.core.principal import Principal, principal_of
from memhouse.core.redis_link import RedisLink
from memhouse.core.tenancy import set_account

log = logging.getLogger(__name__)

REPLICA = "replica"
_OURS = frozenset({DEFAULT_DB_ALIAS, REPLICA})
# Seconds an unreachable replica is left alone before the next block tries it again.
REPLICA_RETRY_SECONDS = 30.0
# How long a writer's last WAL position is kept: past it, its reads take the replica
# whatever it has replayed (a replica that far behind is broken, and /readyz is not
# where that shows: watch pg_stat_replication.replay_lag).
READ_YOUR_WRITES_SECONDS = 600
# Writes no replica-safe read observes, so they never hold a writer to the primary: the
# last-use stamp of a credential (credentials are only read on the primary) and usage
# rows (the ledger is read on the primary: budgets, GET /usage).
_UNOBSERVED = frozenset({"knowledge.Credential", "knowledge.UsageEntry"})
# The alias this thread's reads use while a block is open (None: the primary).
_reads: ContextVar[str | None] = ContextVar("memhouse_read_alias", default=None)
# Set by ReadYourWritesMiddleware for one request: whether it has written.
_request_wrote: ContextVar[list[bool] | None] = ContextVar("memhouse_request_wrote",
                                                           default=None)
_down_until = 0.0


def replica_configured() -> bool:
    return REPLICA in connections.settings


def read_alias() -> str:
    """Where this thread's reads go now: `replica` inside a block that uses it, else
    `default`."""
    return _reads.get() or DEFAULT_DB_ALIAS


def read_connection() -> Any:
    """The connection raw SQL on a replica-safe read path executes on."""
    return connections[read_alias()]


class ReplicaRouter:
    """DATABASE_ROUTERS' one router: reads where the open block says, writes on the primary."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        # Always an answer, never None: Django would otherwise fall back to the database
        # an instance came from, and a row read on the replica would load its relations
        # there after its block's transaction (and Account) had ended.
        return read_alias()

    def db_for_write(self, model: Any, **hints: Any) -> str:
        reads = _reads.get()
        if reads == REPLICA:
            _reads.set(DEFAULT_DB_ALIAS)  # read-your-writes for the rest of the block
        elif reads is None and model._meta.label not in _UNOBSERVED:
            # Outside a block: a write the request's writer may read back later. (Inside
            # one, a replica-safe read writes only what no such read observes.)
            wrote = _request_wrote.get()
            if wrote is not None:
                wrote[0] = True
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        # The replica holds the primary's rows: a row from either relates to the other's.
        if obj1._state.db in _OURS and obj2._state.db in _OURS:
            return True
        return None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db == REPLICA else None  # a standby replays the primary's schema


def _primary_wrote() -> bool:
    """Whether the primary's open transaction on this thread has written (or locked rows):
    PostgreSQL assigns a transaction id at the first write, never to a read."""
    primary = connections[DEFAULT_DB_ALIAS]
    if not primary.in_atomic_block:
        return False
    with primary.cursor() as cur:
        cur.execute("SELECT pg_current_xact_id_if_assigned() IS NOT NULL")
        row = cur.fetchone()
    return bool(row and row[0])


def _replica_reachable() -> bool:
    global _down_until
    if time.monotonic() < _down_until:
        return False
    try:
        connections[REPLICA].ensure_connection()
    except OperationalError:
        _down_until = time.monotonic() + REPLICA_RETRY_SECONDS
        log.warning("read replica unreachable; reads go to the primary for %ss",
                    int(REPLICA_RETRY_SECONDS))
        return False
    return True


def _replayed(position: str) -> bool:
    """Whether the replica has replayed the primary's WAL up to `position` (a server not
    in recovery cannot say: then no)."""
    with connections[REPLICA].cursor() as cur:
        cur.execute("SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)",
                    [position])
        row = cur.fetchone()
    return bool(row and row[0])


@contextmanager
def replica_reads(account_id: uuid.UUID | str, writer: str | None = None) -> Iterator[str]:
    """Run the block's reads on the replica, in one transaction there bound to
    `account_id`, when one is configured and reachable, the primary's transaction has not
    written, and the replica has replayed `writer`'s last write (:func:`writer_of`);
    otherwise (and inside another block) where they would run anyway. Yields the alias
    the block reads from."""
    if (_reads.get() is not None or not replica_configured() or _primary_wrote()
            or not _replica_reachable()):
        yield read_alias()
        return
    position = _positions.get(writer) if writer else None
    with transaction.atomic(using=REPLICA):
        set_account(account_id, using=REPLICA)
        behind = position is not None and not _replayed(position)
        if not behind:
            token = _reads.set(REPLICA)
            try:
                yield REPLICA
            finally:
                _reads.reset(token)
    if behind:  # the replica has not replayed this writer's last write yet
        yield read_alias()


@contextmanager
def reads_on(alias: str) -> Iterator[None]:
    """Send this thread's reads to `alias`, which a caller's block chose (the retrieval
    engine's strategy threads, each of which opens its own transaction there)."""
    token = _reads.set(None if alias == DEFAULT_DB_ALIAS else alias)
    try:
        yield
    finally:
        _reads.reset(token)


Handler = TypeVar("Handler", bound=Callable[..., Any])


def replica_safe(handler: Handler) -> Handler:
    """Mark a DRF view method whose reads tolerate the replica's lag (docs/deploy.md lists
    them): its body runs in :func:`replica_reads` for the caller's Account."""

    @functools.wraps(handler)
    def wrapped(view: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        principal = principal_of(request)
        with replica_reads(principal.account_id, writer_of(principal)):
            return handler(view, request, *args, **kwargs)

    return wrapped  # type: ignore[return-value]


# --- read-your-writes across requests ---------------------------------------------------

def writer_of(principal: Any) -> str | None:
    """Whose writes a later read must see: the credential's, else (a console session) the
    peer's."""
    if not isinstance(principal, Principal):
        return None
    if principal.credential_id is not None:
        return f"{principal.account_id}:credential:{principal.credential_id}"
    if principal.peer is not None:
        return f"{principal.account_id}:peer:{principal.peer.id}"
    return None


class _Positions:
    """writer -> the primary's WAL position after its last write, for
    READ_YOUR_WRITES_SECONDS: in Redis, so every web process sees it, else (Redis not
    answering) in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._local: dict[str, tuple[float, str]] = {}
        self._link = RedisLink(lambda: settings.REDIS_URL)

    def _client(self) -> Any:
        return self._link.client()

    def _down(self) -> None:
        self._link.down("read-your-writes: Redis unavailable, positions kept in this process")

    def put(self, writer: str, position: str) -> None:
        client = self._client()
        if client is not None:
            try:
                client.set(f"memhouse:ryw:{writer}", position, ex=READ_YOUR_WRITES_SECONDS)
                return
            except Exception:
                self._down()
        now = time.monotonic()
        with self._lock:
            self._local[writer] = (now + READ_YOUR_WRITES_SECONDS, position)
            if len(self._local) > 100_000:  # bounded: drop the expired
                self._local = {k: v for k, v in self._local.items() if v[0] > now}

    def get(self, writer: str) -> str | None:
        client = self._client()
        if client is not None:
            try:
                value = client.get(f"memhouse:ryw:{writer}")
                if value is not None:
                    return str(value.decode() if isinstance(value, bytes) else value)
            except Exception:
                self._down()
        with self._lock:
            entry = self._local.get(writer)
        return entry[1] if entry is not None and entry[0] > time.monotonic() else None


_positions = _Positions()


class ReadYourWritesMiddleware:
    """With a replica: when the request wrote (an ORM write outside a replica-safe block,
    of anything but credential stamps and usage rows), record the primary's WAL position
    as it answers for the request's writer. Taken after the response, it also covers
    what the request waited for (a `wait`ed ingest's statements, written by the pipeline
    after the request's own commit)."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        if not replica_configured():
            return self.get_response(request)
        wrote = [False]
        token = _request_wrote.set(wrote)
        try:
            response = self.get_response(request)
        finally:
            _request_wrote.reset(token)
        writer = writer_of(getattr(request, "user", None)) if wrote[0] else None
        if writer is not None:
            try:
                with connections[DEFAULT_DB_ALIAS].cursor() as cur:
                    cur.execute("SELECT pg_current_wal_lsn()::text")
                    row = cur.fetchone()
                if row is not None:
                    _positions.put(writer, str(row[0]))
            except Exception:  # never fails the answer; that writer may then read stale
                log.warning("read-your-writes: the primary's WAL position was not recorded")
        return response
