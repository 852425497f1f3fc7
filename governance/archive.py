"""Account archives: the durable tables of one Account as JSON lines in a .tar.gz.

Layout::

    manifest.json              format, version, account, audit head (seq, hash),
                               per-table row counts and SHA-256 of each member
    tables/<table>.jsonl       one JSON object per row, column name -> value

Only durable data is archived (accounts, sign-in users of the Account's humans, scopes,
peers, credentials, sessions, messages, documents, document versions with their blobs,
knowledge, knowledge sources, relations, lifecycle events, audit entries, validations,
peer questions, erasure records). Derived data is rebuilt on import: document chunks are
re-cut from each version, embedding is enqueued for every embeddable statement, and the
entity index is rebuilt when the retrieval module provides it.

Import inserts knowledge in its archived state, which the knowledge insert trigger allows
only while the transaction-local setting `memhouse.archive_import` is 'on'. Content named
in the erasure ledger (the archive's and the database's, which outlives the Account row)
is skipped, and statements left with no live source are retracted (f4_source_erased).
The audit chain is verified against the manifest head before the import commits.

Trust (issue #16): the manifest's checksums only catch accidents, since whoever edits an
archive can recompute them. So the manifest is signed: ``manifest.sig`` holds an
HMAC-SHA256 of the exact manifest bytes under a key kept outside the archive (an
operator key from ``--archive-key-file`` / ``MEMHOUSE_ARCHIVE_KEY``, else one derived
from the deployment's SECRET_KEY, or, while that is the built-in key, a random key
generated once into the data directory, ``archive.key``). Import refuses an unsigned or
badly signed archive, and one signed with a key anyone can derive from the source
(issue #34).
Export prints the audit head; import given ``--expect-audit-head`` checks the archive
against that out-of-band value. Credentials (API key hashes) and sign-in password hashes
are imported only when asked (``with_credentials``); otherwise keys are dropped and
passwords made unusable, so a planted key or hash can never authenticate.

Import streams: members are copied to disk in chunks under a size cap (a small gzip
must not decompress into memory), rows are read line by line and inserted in batches,
and a corrupt or truncated archive is an ArchiveError, never a traceback.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import tarfile
import tempfile
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import connection, models, transaction
from django.utils import timezone

from governance.models import ErasureRecord, PeerQuestion, Validation
from knowledge import audit
from knowledge.models import (
    Account,
    AuditEntry,
    Credential,
    Document,
    DocumentChunk,
    DocumentVersion,
    Knowledge,
    KnowledgeSource,
    LifecycleEvent,
    Message,
    Peer,
    Relation,
    Scope,
    ScopeRelation,
    Session,
    UsageEntry,
)
from memhouse.core.tenancy import set_account

FORMAT = "memhouse.account-archive"
VERSION = 1
ARCHIVE_IMPORT_SETTING = "memhouse.archive_import"
BATCH = 1000
Progress = Callable[[str], None]
SIGNATURE_MEMBER = "manifest.sig"
SIGNATURE_ALG = "hmac-sha256"
_KEY_DERIVATION = b"memhouse.account-archive.signing-key.v1"
_CHUNK = 1 << 20
MANIFEST_MAX_BYTES = 16 << 20


class ArchiveError(Exception):
    pass


# --- signing ----------------------------------------------------------------------------

@dataclass(frozen=True)
class SigningKey:
    key: bytes
    # "operator" (given), "deployment" (derived from SECRET_KEY) or "generated" (a random
    # key kept in the data directory while SECRET_KEY is the built-in one)
    source: str

    @property
    def key_id(self) -> str:
        """A fingerprint that names the key in errors without revealing it."""
        return hashlib.sha256(b"memhouse.archive-key-id:" + self.key).hexdigest()[:16]


GENERATED_KEY_FILE = "archive.key"


def _derive(secret: str) -> bytes:
    return hmac.new(secret.encode("utf-8"), _KEY_DERIVATION, hashlib.sha256).digest()


def well_known_keys() -> list[SigningKey]:
    """Keys anyone can compute from MemHouse's source (issue #34): the one derived from
    the built-in SECRET_KEY, and that key's text itself given as an operator key. Nothing
    is signed or accepted under them."""
    builtin = settings.MEMHOUSE_BUILTIN_SECRET_KEY
    return [SigningKey(_derive(builtin), "built-in"),
            SigningKey(builtin.encode("utf-8"), "built-in")]


def generated_key_path() -> Path:
    from memhouse.core.embedded_db import default_data_dir

    return Path(getattr(settings, "DATA_DIR", None) or default_data_dir()) / GENERATED_KEY_FILE


def _generated_key() -> bytes:
    """This deployment's random archive key, made on first use (mode 0600, never
    overwritten: archives and backups signed with it verify only with it)."""
    path = generated_key_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ArchiveError(f"MEMHOUSE_SECRET_KEY is the built-in key and no archive key is "
                           f"set, and no key could be kept at {path} ({exc}). Set "
                           f"MEMHOUSE_ARCHIVE_KEY (or pass --archive-key-file) to a long "
                           f"random value, e.g. `openssl rand -hex 32`") from exc
    else:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32) + "\n")
    raw = path.read_text(encoding="ascii").strip()
    if len(raw) < 32:
        raise ArchiveError(f"the archive key file {path} is empty or damaged; restore it "
                           f"from your backup of it, or set MEMHOUSE_ARCHIVE_KEY")
    return raw.encode("ascii")


def signing_key(operator_key: str | bytes | None = None) -> SigningKey:
    """The key archives are signed and checked with: the operator's (argument, else
    MEMHOUSE_ARCHIVE_KEY), else one derived from SECRET_KEY, so an archive moves between
    deployments only with an operator key both sides hold. While SECRET_KEY is the
    built-in (public) one, the fallback is a random key generated once into the data
    directory instead: a signing key is never derivable from the source."""
    given = operator_key or getattr(settings, "MEMHOUSE_ARCHIVE_KEY", "")
    if given:
        raw = given.encode("utf-8") if isinstance(given, str) else given
        if len(raw.strip()) < 16:
            raise ArchiveError("the archive key must be at least 16 characters")
        key = SigningKey(raw.strip(), "operator")
        if any(hmac.compare_digest(key.key, k.key) for k in well_known_keys()):
            raise ArchiveError("the archive key given is the built-in key published in "
                               "MemHouse's source; anyone can sign with it. Set "
                               "MEMHOUSE_ARCHIVE_KEY to a long random value, e.g. "
                               "`openssl rand -hex 32`")
        return key
    if settings.SECRET_KEY == settings.MEMHOUSE_BUILTIN_SECRET_KEY:
        return SigningKey(_generated_key(), "generated")
    return SigningKey(_derive(settings.SECRET_KEY), "deployment")


def _signature(manifest_bytes: bytes, key: SigningKey) -> dict[str, str]:
    return {"alg": SIGNATURE_ALG, "key_id": key.key_id, "key_source": key.source,
            "signature": hmac.new(key.key, manifest_bytes, hashlib.sha256).hexdigest()}


def _check_signature(manifest_bytes: bytes, sig_bytes: bytes | None, key: SigningKey) -> None:
    if sig_bytes is None:
        raise ArchiveError("the archive is not signed (no manifest.sig); refusing to import "
                           "it. Export it again with this version, or check where it came "
                           "from")
    try:
        sig = json.loads(sig_bytes)
        claimed = str(sig["signature"])
        alg = sig["alg"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ArchiveError("the archive signature (manifest.sig) is unreadable") from exc
    if alg != SIGNATURE_ALG:
        raise ArchiveError(f"unsupported archive signature algorithm {alg!r}")
    for public in well_known_keys():
        # Checked first, whatever key this deployment holds: such an archive could have
        # been made by anyone, offline.
        if hmac.compare_digest(_signature(manifest_bytes, public)["signature"], claimed):
            raise ArchiveError(
                "the archive is signed with the built-in key published in MemHouse's "
                "source, so anyone could have made it; refusing to import it. Export it "
                "again from a deployment with MEMHOUSE_ARCHIVE_KEY (or its own "
                "MEMHOUSE_SECRET_KEY) set, and import it with that key")
    expected = _signature(manifest_bytes, key)["signature"]
    if not hmac.compare_digest(expected, claimed):
        hint = ("it was signed with another key"
                if sig.get("key_id") not in (None, key.key_id)
                else "the archive was altered after it was signed")
        raise ArchiveError(
            f"the archive signature does not verify with the {key.source} key "
            f"(key id {key.key_id}): {hint}. Use the key it was exported with "
            f"(--archive-key-file / MEMHOUSE_ARCHIVE_KEY); never import an archive you "
            f"cannot verify")


def parse_audit_head(value: str) -> tuple[int | None, str]:
    """'SEQ:HASH' or 'HASH' (as export prints it)."""
    seq_text, _, hash_text = value.strip().rpartition(":")
    hash_text = hash_text.lower()
    if len(hash_text) != 64 or any(c not in "0123456789abcdef" for c in hash_text):
        raise ArchiveError("--expect-audit-head takes SEQ:HASH or the 64-hex-digit HASH "
                           "that export printed")
    if not seq_text:
        return None, hash_text
    try:
        return int(seq_text), hash_text
    except ValueError as exc:
        raise ArchiveError("--expect-audit-head takes SEQ:HASH with an integer SEQ") from exc


def _user_model() -> type[models.Model]:
    return get_user_model()


# Import order; foreign keys are deferred to commit, so order matters only for the skip
# bookkeeping (a table is filtered after the tables it refers to).
def tables() -> list[tuple[str, type[models.Model]]]:
    return [
        ("accounts", Account), ("users", _user_model()), ("scopes", Scope), ("peers", Peer),
        ("scope_relations", ScopeRelation), ("credentials", Credential),
        ("sessions", Session), ("messages", Message),
        ("documents", Document), ("document_versions", DocumentVersion),
        ("knowledge", Knowledge), ("knowledge_sources", KnowledgeSource),
        ("relations", Relation), ("lifecycle_events", LifecycleEvent),
        ("audit_entries", AuditEntry), ("validations", Validation),
        ("peer_questions", PeerQuestion), ("erasure_records", ErasureRecord),
        ("usage_ledger", UsageEntry),
    ]


def _columns(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    return list(model._meta.concrete_fields)


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool, int, float, dict, list)):
        return value
    if isinstance(value, (datetime, date)):
        return value.isoformat()  # full microseconds: the audit hash covers created_at
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Decimal):
        return str(value)
    raise ArchiveError(f"cannot archive a value of type {type(value).__name__}")


def _decode(model: type[models.Model], row: dict[str, Any]) -> models.Model:
    values: dict[str, Any] = {}
    for f in _columns(model):
        if f.attname not in row:
            # An archive from before a column was added: its default, when it has one
            # (e.g. a credential's act-for grant); a column that needs a value is an error.
            if f.has_default():
                values[f.attname] = f.get_default()
                continue
            if f.null:
                values[f.attname] = None
                continue
            raise ArchiveError(f"{model.__name__} row lacks column {f.attname}")
        raw = row[f.attname]
        values[f.attname] = None if raw is None else f.to_python(raw)
    return model(**values)


def _queryset(name: str, model: type[models.Model], account_id: uuid.UUID) -> Any:
    mgr = model._default_manager
    if name == "accounts":
        return mgr.filter(id=account_id)
    if name == "users":
        ids = Peer.objects.filter(account_id=account_id, user__isnull=False).values("user_id")
        return mgr.filter(pk__in=ids).order_by("pk")
    qs = mgr.filter(account_id=account_id)
    return qs.order_by("seq") if model is AuditEntry else qs.order_by("pk")


def _write_table(path: Path, model: type[models.Model], qs: Any) -> tuple[int, str]:
    names = [f.attname for f in _columns(model)]
    digest = hashlib.sha256()
    count = 0
    with path.open("wb") as out:
        for values in qs.values_list(*names).iterator(chunk_size=2000):
            line = json.dumps({n: _encode(v) for n, v in zip(names, values, strict=True)},
                              ensure_ascii=False, sort_keys=True, separators=(",", ":"))
            data = (line + "\n").encode("utf-8")
            out.write(data)
            digest.update(data)
            count += 1
    return count, digest.hexdigest()


def export_account(account_id: uuid.UUID | str, out_path: str | Path, *,
                   progress: Progress = print,
                   archive_key: str | bytes | None = None) -> dict[str, Any]:
    """Write the Account's durable tables to `out_path` (.tar.gz); return the manifest.

    Reads run in one REPEATABLE READ, READ ONLY transaction, so every table is from the
    same snapshot and the manifest's audit head matches the archived chain. The manifest
    is signed with :func:`signing_key`."""
    key = signing_key(archive_key)
    account_id = uuid.UUID(str(account_id))
    out_path = Path(out_path)
    outermost = not connection.in_atomic_block
    with tempfile.TemporaryDirectory() as tmp, transaction.atomic():
        if outermost:  # nested in a caller's transaction (tests), its snapshot applies
            with connection.cursor() as cur:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        set_account(account_id)
        account = Account.objects.filter(id=account_id).first()
        if account is None:
            raise ArchiveError(f"no Account {account_id}")
        head = (AuditEntry.objects.filter(account_id=account_id).order_by("-seq")
                .values("seq", "hash").first()) or {"seq": 0, "hash": audit.GENESIS}
        progress(f"exporting Account {account.slug} ({account_id})")
        members: dict[str, dict[str, Any]] = {}
        for name, model in tables():
            count, digest = _write_table(Path(tmp) / f"{name}.jsonl", model,
                                         _queryset(name, model, account_id))
            members[name] = {"rows": count, "sha256": digest}
            progress(f"  {name}: {count} rows")
        manifest = {
            "format": FORMAT, "version": VERSION, "account_id": str(account_id),
            "account_slug": account.slug, "exported_at": timezone.now().isoformat(),
            "audit_head": {"seq": head["seq"], "hash": head["hash"]}, "tables": members,
        }
        manifest_bytes = json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8")
        (Path(tmp) / "manifest.json").write_bytes(manifest_bytes)
        (Path(tmp) / SIGNATURE_MEMBER).write_text(json.dumps(_signature(manifest_bytes, key)))
        with tarfile.open(out_path, "w:gz") as tar:
            tar.add(Path(tmp) / "manifest.json", arcname="manifest.json")
            tar.add(Path(tmp) / SIGNATURE_MEMBER, arcname=SIGNATURE_MEMBER)
            for name, _ in tables():
                tar.add(Path(tmp) / f"{name}.jsonl", arcname=f"tables/{name}.jsonl")
    progress(f"audit head seq={head['seq']} hash={head['hash']}")
    progress(f"signed with the {key.source} key (key id {key.key_id}); keep the audit head "
             f"apart from the archive and check it on import with "
             f"--expect-audit-head {head['seq']}:{head['hash']}")
    progress(f"wrote {out_path} ({out_path.stat().st_size} bytes)")
    return manifest


# --- import -----------------------------------------------------------------------------

@dataclass
class _Skips:
    """What the erasure ledger says must not come back, and what that touches."""

    messages: set[str] = field(default_factory=set)
    documents: set[str] = field(default_factory=set)
    peers: set[str] = field(default_factory=set)
    users: set[Any] = field(default_factory=set)
    versions: set[str] = field(default_factory=set)
    knowledge: set[str] = field(default_factory=set)
    validations: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)  # statements that lost a source

    def add(self, kind: str, target_id: str) -> None:
        {"message": self.messages, "document": self.documents,
         "peer": self.peers}[kind].add(str(target_id))


def _max_bytes() -> int:
    return int(getattr(settings, "MEMHOUSE_ARCHIVE_MAX_BYTES", 8 << 30))


def _max_row_bytes() -> int:
    return int(getattr(settings, "MEMHOUSE_ARCHIVE_MAX_ROW_BYTES", 64 << 20))


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    """One archived table, a row at a time; a row longer than the cap or not a JSON
    object is an ArchiveError (the digest matched, so this is a forged or buggy file)."""
    limit = _max_row_bytes()
    with path.open("rb") as f:
        number = 0
        while line := f.readline(limit + 1):
            number += 1
            if len(line) > limit:
                raise ArchiveError(f"{path.name}: row {number} is longer than {limit} bytes")
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ArchiveError(f"{path.name}: row {number} is not valid JSON") from exc
            if not isinstance(row, dict):
                raise ArchiveError(f"{path.name}: row {number} is not a JSON object")
            yield row


@dataclass
class _Member:
    sha256: str
    lines: int


def _copy_member(src: Any, dest: Path) -> _Member:
    digest = hashlib.sha256()
    lines = 0
    with dest.open("wb") as out:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            lines += chunk.count(b"\n")
            out.write(chunk)
    return _Member(digest.hexdigest(), lines)


def _extract(in_path: Path, tmp: Path, key: SigningKey) -> dict[str, Any]:
    """Stream the expected members to `tmp` (no path from the archive is trusted), under
    a cap on their total size, then check the signature and each member against the
    signed manifest."""
    expected = ({"manifest.json", SIGNATURE_MEMBER}
                | {f"tables/{name}.jsonl" for name, _ in tables()})
    if not in_path.is_file():
        raise ArchiveError(f"no archive file at {in_path}")
    cap = _max_bytes()
    total = 0
    seen: dict[str, _Member] = {}
    small: dict[str, bytes] = {}
    try:
        with tarfile.open(in_path, "r|gz") as tar:  # a stream: no seeking, no index
            for member in tar:
                if member.name not in expected or not member.isfile():
                    raise ArchiveError(f"unexpected archive member {member.name!r}")
                if member.name in seen or member.name in small:
                    raise ArchiveError(f"archive member {member.name!r} appears twice")
                total += member.size
                if total > cap:
                    raise ArchiveError(
                        f"the archive unpacks to more than {cap} bytes "
                        f"(MEMHOUSE_ARCHIVE_MAX_BYTES); refusing it")
                src = tar.extractfile(member)
                assert src is not None
                if member.name in ("manifest.json", SIGNATURE_MEMBER):
                    if member.size > MANIFEST_MAX_BYTES:
                        raise ArchiveError(f"{member.name} is implausibly large")
                    small[member.name] = src.read()
                else:
                    seen[member.name] = _copy_member(
                        src, tmp / member.name.replace("/", "__"))
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise ArchiveError(f"the archive is corrupt or truncated ({type(exc).__name__}: "
                           f"{exc}); nothing was imported") from exc
    if "manifest.json" not in small:
        raise ArchiveError("the archive has no manifest.json")
    _check_signature(small["manifest.json"], small.get(SIGNATURE_MEMBER), key)
    try:
        manifest: dict[str, Any] = json.loads(small["manifest.json"])
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise ArchiveError("not a MemHouse account archive of a supported version")
        for name, _ in tables():
            info = manifest["tables"].get(name)
            got = seen.get(f"tables/{name}.jsonl")
            if info is None or got is None:
                raise ArchiveError(f"the archive lacks table {name}")
            if got.sha256 != info["sha256"]:
                raise ArchiveError(f"table {name} does not match its manifest digest")
            if got.lines != info["rows"]:
                raise ArchiveError(f"table {name} does not match its manifest row count")
        uuid.UUID(str(manifest["account_id"]))
        int(manifest["audit_head"]["seq"]), str(manifest["audit_head"]["hash"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ArchiveError(f"the archive manifest is malformed ({type(exc).__name__})") \
            from exc
    return manifest


def _keep(name: str, row: dict[str, Any], skip: _Skips) -> bool:
    """Apply the erasure ledger to one archived row (may blank references in place)."""
    def gone_peer(col: str) -> bool:
        return row.get(col) is not None and row[col] in skip.peers

    if name == "users":
        return row["id"] not in skip.users
    if name == "peers":
        return row["id"] not in skip.peers
    if name == "credentials":
        return not gone_peer("peer_id")
    if name == "messages":
        if row["id"] in skip.messages or gone_peer("peer_id"):
            skip.messages.add(row["id"])
            return False
        return True
    if name == "documents":
        if gone_peer("peer_id"):
            row["peer_id"] = None
        return row["id"] not in skip.documents
    if name == "document_versions":
        if row["document_id"] in skip.documents:
            skip.versions.add(row["id"])
            return False
        return True
    if name == "knowledge":
        for col in ("proposed_by_id",):
            if gone_peer(col):
                row[col] = None
        if row.get("supersedes_id") in skip.knowledge:
            row["supersedes_id"] = None
        return row["id"] not in skip.knowledge
    if name == "knowledge_sources":
        if row["knowledge_id"] in skip.knowledge:
            return False
        if row.get("message_id") in skip.messages or row.get(
                "document_version_id") in skip.versions:
            skip.touched.add(row["knowledge_id"])
            return False
        return True
    if name == "relations":
        return row["source_id"] not in skip.knowledge and row["target_id"] not in skip.knowledge
    if name == "lifecycle_events":
        if gone_peer("actor_peer_id"):
            row["actor_peer_id"] = None
        return row["knowledge_id"] not in skip.knowledge
    if name == "validations":
        if gone_peer("resolved_by_id"):
            row["resolved_by_id"] = None
        if row["knowledge_id"] in skip.knowledge:
            skip.validations.add(row["id"])
            return False
        return True
    if name == "peer_questions":
        return not (row["knowledge_id"] in skip.knowledge or gone_peer("peer_id")
                    or row["validation_id"] in skip.validations)
    return True


def _import_users(rows: list[dict[str, Any]], *, with_credentials: bool) -> int:
    """Sign-in users keep their ids (peers refer to them); an existing user with the same
    id and username is reused, any other clash refuses the import. Without
    `with_credentials` the archived password hash is not trusted: the user gets an
    unusable password and signs in again after a reset. Returns how many were created."""
    User = _user_model()
    created = 0
    for row in rows:
        existing = User._default_manager.filter(pk=row["id"]).first()
        if existing is not None:
            if getattr(existing, "username", None) != row["username"]:
                raise ArchiveError(f"user id {row['id']} belongs to another user")
            continue
        if User._default_manager.filter(username=row["username"]).exists():
            raise ArchiveError(f"username {row['username']!r} is taken by another user")
        if not with_credentials and "password" in row:
            row["password"] = make_password(None)
        _decode(User, row).save(force_insert=True)
        created += 1
    if created:
        table = User._meta.db_table
        pk = User._meta.pk
        assert pk is not None and pk.column is not None
        column = pk.column
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT setval(pg_get_serial_sequence(%s, %s), "
                f"(SELECT max({connection.ops.quote_name(column)}) FROM "
                f"{connection.ops.quote_name(table)}))", [table, column])
    return created


def _batches(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _rechunk(account_id: uuid.UUID) -> int:
    from knowledge.ingest.services import chunk_text

    chunks: list[DocumentChunk] = []
    total = 0
    for vid, text in DocumentVersion.objects.filter(account_id=account_id).values_list(
            "id", "text").iterator(chunk_size=200):
        chunks += [DocumentChunk(account_id=account_id, version_id=vid, ordinal=i,
                                 text=text[s:e], start=s, end=e)
                   for i, (s, e) in enumerate(chunk_text(text))]
        if len(chunks) >= BATCH:  # bounded memory, whatever the Account's size
            DocumentChunk.objects.bulk_create(chunks, batch_size=BATCH)
            total, chunks = total + len(chunks), []
    DocumentChunk.objects.bulk_create(chunks, batch_size=BATCH)
    return total + len(chunks)


def _enqueue_rebuilds(account_id: uuid.UUID) -> int:
    from retrieval.tasks import embed_knowledge as embed_knowledge_task
    from retrieval.vectors import EMBEDDABLE_STATES

    ids = [str(i) for i in Knowledge.objects.filter(
        account_id=account_id, state__in=EMBEDDABLE_STATES).values_list("id", flat=True)]
    def embed(batch: list[str]) -> Callable[[], None]:
        return lambda: embed_knowledge_task.delay(str(account_id), batch)

    for start in range(0, len(ids), 500):
        transaction.on_commit(embed(ids[start:start + 500]), robust=True)

    def entities() -> None:
        try:
            from retrieval.entities import rebuild_entities  # type: ignore[attr-defined]
        except ImportError:
            return
        rebuild_entities(account_id)

    transaction.on_commit(entities, robust=True)
    return len(ids)


@dataclass
class ImportResult:
    account_id: uuid.UUID
    inserted: dict[str, int]
    skipped: dict[str, int]
    retracted: int
    chunks: int
    embedding_queued: int


def import_account(in_path: str | Path, *, progress: Progress = print,
                   archive_key: str | bytes | None = None, expect_audit_head: str | None = None,
                   with_credentials: bool = False) -> ImportResult:
    """Restore an Account from a signed archive into a database that does not hold it.

    `archive_key`: the operator key the archive was signed with (default: the
    deployment's, see :func:`signing_key`). `expect_audit_head`: 'SEQ:HASH' or 'HASH' as
    export printed it, kept apart from the archive. `with_credentials`: also restore API
    key hashes and sign-in password hashes (off: keys are dropped, passwords unusable)."""
    from governance.erasure import retract_orphaned

    key = signing_key(archive_key)
    expected = parse_audit_head(expect_audit_head) if expect_audit_head else None
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        manifest = _extract(Path(in_path), tmp, key)
        account_id = uuid.UUID(manifest["account_id"])
        head = manifest["audit_head"]
        if expected is not None and (expected[1] != head["hash"]
                                     or expected[0] not in (None, head["seq"])):
            raise ArchiveError(
                f"the archive's audit head (seq {head['seq']}, hash {head['hash']}) is not "
                f"the expected one ({expect_audit_head}); refusing it")
        progress(f"importing Account {manifest.get('account_slug')} ({account_id}); "
                 f"signature verified with the {key.source} key (key id {key.key_id}), "
                 f"members match the manifest"
                 + ("; audit head matches the expected value" if expected else ""))
        inserted: dict[str, int] = {}
        skipped: dict[str, int] = {}
        with transaction.atomic():
            set_account(account_id)
            if Account.objects.filter(id=account_id).exists():
                raise ArchiveError(f"Account {account_id} already exists; remove it first")
            skip = _Skips()
            archived_erasures = list(_rows(tmp / "tables__erasure_records.jsonl"))
            ledger = {str(r) for r in ErasureRecord.objects.filter(account_id=account_id)
                      .values_list("id", flat=True)}
            for rec in archived_erasures:
                skip.add(rec["kind"], rec["target_id"])
            for kind, target in ErasureRecord.objects.filter(account_id=account_id).values_list(
                    "kind", "target_id"):
                skip.add(kind, str(target))
            # Peers and statements about them are decided before the tables that refer to
            # them are read.
            skip.users = {r["user_id"] for r in _rows(tmp / "tables__peers.jsonl")
                          if r["id"] in skip.peers and r.get("user_id") is not None}
            skip.knowledge = {r["id"] for r in _rows(tmp / "tables__knowledge.jsonl")
                              if r.get("subject_peer_id") in skip.peers}
            with connection.cursor() as cur:
                cur.execute("SELECT set_config(%s, 'on', true)", [ARCHIVE_IMPORT_SETTING])
            for name, model in tables():
                seen = kept_count = created = 0
                for rows in _batches(_rows(tmp / f"tables__{name}.jsonl")):
                    seen += len(rows)
                    kept = [r for r in rows if _keep(name, r, skip)]
                    if name == "erasure_records":
                        kept = [r for r in kept if r["id"] not in ledger]
                    if name == "credentials" and not with_credentials:
                        kept = []  # a key hash from a file is never trusted by default
                    kept_count += len(kept)
                    if name == "users":
                        created += _import_users(kept, with_credentials=with_credentials)
                    else:
                        model._default_manager.bulk_create([_decode(model, r) for r in kept],
                                                           batch_size=BATCH)
                if name == "users":
                    progress(f"  users: {created} created, {kept_count - created} already "
                             f"present" + ("" if with_credentials else
                                           "; passwords not imported (unusable until reset)"))
                elif name == "credentials" and not with_credentials:
                    progress(f"  credentials: {seen} not imported (mint new keys, or import "
                             f"with --with-credentials)")
                else:
                    progress(f"  {name}: {kept_count} rows"
                             + (f" ({seen - kept_count} skipped)" if kept_count < seen else ""))
                inserted[name] = kept_count
                skipped[name] = seen - kept_count
            with connection.cursor() as cur:
                cur.execute("SELECT set_config(%s, '', true)", [ARCHIVE_IMPORT_SETTING])
            retracted = 0
            if skip.touched - skip.knowledge:
                retracted = retract_orphaned(
                    knowledge_ids=sorted(skip.touched - skip.knowledge),
                    actor="system:archive-import", evidence={"kind": "archive_import"})
                progress(f"  retracted {retracted} statements whose erased sources were "
                         f"skipped")
            chunks = _rechunk(account_id)
            progress(f"  document chunks rebuilt: {chunks}")
            result = audit.verify(account_id, expected_head=(head["seq"], head["hash"]))
            if not result.ok:
                raise ArchiveError(f"audit chain does not verify after import: "
                                   f"{result.problem} (seq {result.broken_seq})")
            progress(f"  audit chain verified against the manifest head seq={head['seq']}")
            queued = _enqueue_rebuilds(account_id)
            progress(f"  embedding queued for {queued} statements; entity index rebuild "
                     f"queued")
    return ImportResult(account_id, inserted, skipped, retracted, chunks, queued)
