"""Shared benchmark plumbing: a private database, memory sampling and LoCoMo ingest.

Import order matters: call :func:`bootstrap` before importing anything that needs Django
models. It points Django at `bench.settings`, creates the database `bench_<name>` on the
same PostgreSQL server as the app (the app role has CREATEDB; `vector` comes from
template1), migrates it, and registers its removal (unless keep_db).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import resource
import sys
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# Keys bench/worker_probe.py writes in the broker's Redis database: each worker
# process's figures (a hash), and the message ids of every extraction task that
# succeeded (a list, one JSON array per task). Not queues: the idle check skips them.
PROBE_KEY = "memhouse-bench:probe"
EXTRACTED_KEY = "memhouse-bench:extracted"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------
# Private database
# ---------------------------------------------------------------------------------------

_state: dict[str, Any] = {}


def _server_conn(dbname: str = "postgres") -> Any:
    import psycopg

    from memhouse.settings import DATABASES  # starts/reuses the embedded server

    db: dict[str, Any] = DATABASES["default"]
    return psycopg.connect(host=db["HOST"] or None, port=db["PORT"] or None,
                           user=db["USER"] or None, password=db.get("PASSWORD") or None,
                           dbname=dbname, autocommit=True)


def bootstrap(name: str, *, keep_db: bool = False, reuse_db: bool = False) -> str:
    """Create and migrate `bench_<name>`, set Django up against it. Returns the db name.
    With `reuse_db` an existing `bench_<name>` (from an earlier --keep-db run) is kept as
    it is, migrated, and never dropped at exit."""
    from psycopg import sql

    dbname = f"bench_{re.sub(r'[^a-z0-9_]', '_', name.lower())}"
    os.environ["MEMHOUSE_BENCH_DB"] = dbname
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    with _server_conn() as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                              [dbname]).fetchone()
        if reuse_db and exists:
            log(f"reusing database {dbname}")
            keep_db = True
        else:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(dbname)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
            log(f"created database {dbname}")
    _state["dbname"] = dbname
    if not keep_db:
        atexit.register(drop_database)
    import django

    django.setup()
    from django.core.management import call_command

    t = time.monotonic()
    call_command("migrate", verbosity=0)
    log(f"migrated {dbname} in {time.monotonic() - t:.1f}s")
    return dbname


def drop_database() -> None:
    dbname = _state.pop("dbname", None)
    if not dbname:
        return
    from django.db import connections

    connections.close_all()
    try:
        drop_now(dbname)
        log(f"dropped database {dbname}")
    except Exception as exc:  # never hide the benchmark's own result behind cleanup
        log(f"could not drop {dbname}: {exc}")


def drop_now(dbname: str, attempts: int = 10) -> None:
    """DROP DATABASE ... WITH (FORCE) as the app role. An autovacuum worker in the
    database (a freshly migrated one gets analysed) runs as the superuser, which the
    app role may not terminate: the drop then fails, so try again until it has gone."""
    import psycopg
    from psycopg import sql

    for attempt in range(attempts):
        try:
            with _server_conn() as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(dbname)))
            return
        except psycopg.errors.InsufficientPrivilege:
            if attempt == attempts - 1:
                raise
            time.sleep(1.0)


# ---------------------------------------------------------------------------------------
# Memory: this process (ru_maxrss) and the PostgreSQL server processes (/proc sampling)
# ---------------------------------------------------------------------------------------


def _status_kb(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssShmem", "RssFile"):
                    out[key] = int(rest.split()[0])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return out


def _postmaster_pid() -> int | None:
    from memhouse.core.embedded_db import default_data_dir

    data_dir = Path(os.environ.get("MEMHOUSE_DATA_DIR") or default_data_dir())
    try:
        return int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def children_map() -> dict[int, list[int]]:
    """Every live process's children, by parent pid, read from /proc."""
    out: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out[ppid].append(int(entry))
    return out


def _server_processes(postmaster: int) -> list[tuple[int, str]]:
    procs = [(postmaster, "postmaster")]
    for pid in children_map().get(postmaster, []):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (FileNotFoundError, ProcessLookupError):
            continue
        procs.append((pid, cmd))
    return procs


def process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name (fields[11:15] = utime stime cutime cstime)."""
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()


def child_pids(pid: int) -> list[int]:
    """Live children of `pid`, forked by any of its threads."""
    out: list[int] = []
    with contextlib.suppress(FileNotFoundError, ProcessLookupError, PermissionError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with (contextlib.suppress(FileNotFoundError, ProcessLookupError),
                  open(f"/proc/{pid}/task/{tid}/children") as fh):
                out.extend(int(c) for c in fh.read().split())
    return out


def tree_cpu(pid: int) -> tuple[float, float] | None:
    """user+sys seconds of a process and of its descendants: (its own, the descendants'
    live and reaped: cutime/cstime count children it has waited for). None when `pid` is
    gone. A descendant that exits between two reads is counted in its parent's cutime
    the next time, once reaped."""
    tick = os.sysconf("SC_CLK_TCK")
    try:
        fields = _stat_fields(pid)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    own = sum(int(x) for x in fields[11:13]) / tick
    below = sum(int(x) for x in fields[13:15]) / tick
    for child in child_pids(pid):
        sub = tree_cpu(child)
        if sub is not None:
            below += sub[0] + sub[1]
    return own, below


def postgres_cpu() -> float | None:
    """user+sys seconds of this benchmark's PostgreSQL server: the postmaster, its live
    children, and the children it has reaped (cutime/cstime: backends that closed)."""
    pid = _postmaster_pid()
    if pid is None:
        return None
    cpu = tree_cpu(pid)
    return None if cpu is None else cpu[0] + cpu[1]


class MemorySampler:
    """Samples the embedded PostgreSQL server's processes every `interval` seconds.

    RSS of a PostgreSQL process includes the shared buffers it has touched (RssShmem),
    so summing VmRSS over processes double-counts shared memory. We therefore keep:
    - backends_anon_kb: peak over samples of the sum of RssAnon (private memory) over the
      backends connected to the benchmark database;
    - server_anon_kb: the same over every server process (postmaster, checkpointer, ...,
      and backends of other databases);
    - shmem_kb: peak RssShmem of any one process (shared buffers actually touched);
    - backend_hwm_kb: the largest VmHWM (kernel peak RSS, shared pages included) of any
      benchmark backend seen.
    Short-lived backends (the engine opens one connection per strategy) that start and
    end between two samples are missed; the numbers are lower bounds.
    """

    def __init__(self, dbname: str, interval: float = 0.5) -> None:
        self.dbname = dbname
        self.interval = interval
        self.postmaster = _postmaster_pid()
        self.peak = {"backends_anon_kb": 0, "server_anon_kb": 0, "shmem_kb": 0,
                     "backend_hwm_kb": 0, "backends_seen": 0, "max_concurrent_backends": 0}
        self._seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> MemorySampler:
        if self.postmaster is not None:
            self._thread.start()
        return self

    def sample(self) -> None:
        if self.postmaster is None:
            return
        backends_anon = server_anon = shmem = hwm = n = 0
        for pid, cmd in _server_processes(self.postmaster):
            st = _status_kb(pid)
            server_anon += st.get("RssAnon", 0)
            shmem = max(shmem, st.get("RssShmem", 0))
            if f" {self.dbname} " in f" {cmd} ":
                n += 1
                self._seen.add(pid)
                backends_anon += st.get("RssAnon", 0)
                hwm = max(hwm, st.get("VmHWM", 0))
        p = self.peak
        p["backends_anon_kb"] = max(p["backends_anon_kb"], backends_anon)
        p["server_anon_kb"] = max(p["server_anon_kb"], server_anon)
        p["shmem_kb"] = max(p["shmem_kb"], shmem)
        p["backend_hwm_kb"] = max(p["backend_hwm_kb"], hwm)
        p["max_concurrent_backends"] = max(p["max_concurrent_backends"], n)
        p["backends_seen"] = len(self._seen)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # sampling must never break a benchmark
                self.sample()

    def stop(self) -> dict[str, Any]:
        self.sample()
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        return self.report()

    def report(self) -> dict[str, Any]:
        p = self.peak
        return {
            "method": "sampled /proc/<pid>/status of the postmaster and its children every "
                      f"{self.interval}s; lower bounds (short-lived backends can be missed)",
            "measured": self.postmaster is not None,
            "bench_backends_private_peak_mb": round(p["backends_anon_kb"] / 1024, 1),
            "bench_backend_vmhwm_max_mb": round(p["backend_hwm_kb"] / 1024, 1),
            "server_private_peak_mb": round(p["server_anon_kb"] / 1024, 1),
            "shared_buffers_touched_peak_mb": round(p["shmem_kb"] / 1024, 1),
            "bench_backends_seen": p["backends_seen"],
            "max_concurrent_bench_backends": p["max_concurrent_backends"],
        }


def python_peak_rss_mb() -> float:
    # Linux reports ru_maxrss in KiB.
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def scale_deadlines(factor: float) -> dict[str, int]:
    """Multiply every base profile's deadline (and rerank reserve) by `factor` for this
    process: a quality run on a busy machine (another job on the cores) then measures the
    ranking, not which lanes a loaded CPU let finish. Latency is measured with factor 1.
    Returns the deadlines now in force, to record with the figures."""
    import dataclasses

    from retrieval import profiles
    from retrieval.strategies import semantic

    if factor != 1:
        for name, p in list(profiles.BASE_PROFILES.items()):
            profiles.BASE_PROFILES[name] = dataclasses.replace(
                p, deadline_ms=int(p.deadline_ms * factor),
                rerank_reserve_ms=int(p.rerank_reserve_ms * factor))
        # Semantic's lanes have a time of their own per statement: scaled alike.
        semantic.LANE_STATEMENT_MS = int(semantic.LANE_STATEMENT_MS * factor)
    return {name: p.deadline_ms for name, p in profiles.BASE_PROFILES.items()}


def embedder_threads(override: int | None = None) -> dict[str, int | None]:
    """Load the configured embedder; with `override`, set its intra-op threads (torch's
    global setting for minilm-torch, a fresh session for the ONNX default). Returns the
    thread counts to record: `embedder_threads`, and `torch_threads` (None without torch)."""
    from retrieval import embedding

    embedder = embedding.get_embedder()
    if isinstance(embedder, embedding.OnnxEmbedder):
        if override:
            embedder = embedding.OnnxEmbedder(query_prefix=embedder.query_prefix,
                                              num_threads=override)
            embedding._embedder = embedder  # the process-wide embedder the engine uses
        embedder.embed_query("load the model")
        return {"embedder_threads": embedder.num_threads, "torch_threads": None}
    embedder.embed_query("load the model")
    import torch

    if override:
        torch.set_num_threads(override)
    return {"embedder_threads": torch.get_num_threads(),
            "torch_threads": torch.get_num_threads()}


def server_settings() -> dict[str, str]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT name, setting, unit FROM pg_settings WHERE name IN "
                    "('shared_buffers','work_mem','maintenance_work_mem','max_connections',"
                    "'max_parallel_maintenance_workers','max_parallel_workers_per_gather')")
        rows = cur.fetchall()
        cur.execute("SELECT version(), (SELECT extversion FROM pg_extension "
                    "WHERE extname = 'vector')")
        version, vector = cur.fetchone()
    out = {n: f"{s}{(' ' + u) if u else ''}" for n, s, u in rows}
    out["server_version"] = version.split(" on ")[0]
    out["pgvector"] = vector
    return out


# ---------------------------------------------------------------------------------------
# LoCoMo
# ---------------------------------------------------------------------------------------

_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


def normalise_evidence(raw: Any) -> list[str]:
    """LoCoMo evidence lists hold a few malformed entries ("D8:6; D9:17", "D:11:26", "D"):
    extract every D<session>:<turn> they contain; drop what names no turn."""
    out: list[str] = []
    for item in raw or []:
        for a, b in _EVIDENCE.findall(str(item)):
            dia = f"D{int(a)}:{int(b)}"
            if dia not in out:
                out.append(dia)
    return out


def parse_session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> 2023-05-08 13:56 UTC (LoCoMo gives no time zone)."""
    cleaned = " ".join(text.replace(",", ", ").split()).replace(" ,", ",")
    return datetime.strptime(cleaned, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int
    occurred_at: datetime


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    qa: list[dict[str, Any]]
    scope_path: str = ""
    scope_id: Any = None
    peer_keys: dict[str, str] = field(default_factory=dict)


def turn_with_image(text: str, speaker: str, caption: str | None) -> str:
    """A LoCoMo turn as a chat transcript that keeps what was shown: a turn that shares a
    picture carries its caption in the dataset (`blip_caption`, BLIP-2's description,
    which is how the dataset's authors give images to text-only models: "[shares ...]").
    Said in the third person, as a chat client's line for an attachment would be, so the
    extractor reads it as the speaker's act, not as something the speaker said."""
    caption = (caption or "").strip()
    if not caption:
        return text
    return f"{text} [{speaker} shares {caption}]".strip()


def load_locomo(path: str | Path, limit: int | None = None, *,
                image_captions: bool = False) -> list[Conversation]:
    """`image_captions`: append each shared image's caption to its turn
    (`turn_with_image`); off, a turn is its `text` alone (as every figure before
    2026-12-05 was measured)."""
    data = json.loads(Path(path).read_text())
    convs: list[Conversation] = []
    for sample in data[: limit or None]:
        c = sample["conversation"]
        sessions = sorted(int(m.group(1)) for k in c
                          if (m := re.fullmatch(r"session_(\d+)", k)) and c[k])
        turns: list[Turn] = []
        for n in sessions:
            when = parse_session_date(c[f"session_{n}_date_time"])
            for t in c[f"session_{n}"]:
                text = (turn_with_image(t["text"], t["speaker"], t.get("blip_caption"))
                        if image_captions else t["text"])
                turns.append(Turn(t["dia_id"], t["speaker"], text, n, when))
        convs.append(Conversation(sample["sample_id"], (c["speaker_a"], c["speaker_b"]),
                                  turns, sample["qa"]))
    return convs


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def attach_locomo(convs: list[Conversation], *, account_name: str = "LoCoMo bench"
                  ) -> Any | None:
    """In a reused database: the Account an earlier `ingest_locomo` made, with each
    conversation's scope and peer keys filled in as ingest would; None when there is none
    (or it misses a conversation), so the caller ingests afresh."""
    from knowledge.accounts import list_account_ids
    from knowledge.models import Account, Peer, Scope
    from memhouse.core.tenancy import account_context

    # Accounts are readable only inside their own context (RLS): look in each.
    account = None
    for account_id in list_account_ids():
        with account_context(account_id):
            account = Account.objects.filter(slug=_slug(account_name)).first()
        if account is not None:
            break
    if account is None:
        return None
    with account_context(account.id):
        for conv in convs:
            conv.scope_path = f"/locomo/{conv.sample_id}"
            scope = Scope.objects.filter(path=conv.scope_path).first()
            if scope is None:
                return None
            conv.scope_id = scope.id
            for name in conv.speakers:
                key = f"{conv.sample_id}:{_slug(name)}"
                if not Peer.objects.filter(key=key).exists():
                    return None
                conv.peer_keys[name] = key
    return account.id


def locomo_account(convs: list[Conversation], *, account_name: str = "LoCoMo bench"
                   ) -> tuple[Any, Any]:
    """The bench Account: one scope per conversation, one human peer per speaker, and
    the agent peer `bench-importer` whose principal posts every batch. Fills each
    conversation's scope and peer keys; returns (account id, principal)."""
    from knowledge import services
    from memhouse.core.principal import Principal
    from memhouse.core.tenancy import account_context

    account = services.account_create(name=account_name, slug=_slug(account_name))
    account_id = account.id
    with account_context(account_id):
        importer = services.peer_create(account_id=account_id, key="bench-importer",
                                        kind="agent", display_name="bench importer")
        for conv in convs:
            conv.scope_path = f"/locomo/{conv.sample_id}"
            conv.scope_id = services.scope_ensure(account_id=account_id,
                                                  path=conv.scope_path).id
            for name in conv.speakers:
                key = f"{conv.sample_id}:{_slug(name)}"
                services.peer_create(account_id=account_id, key=key, kind="human",
                                     display_name=name)
                conv.peer_keys[name] = key
    principal = Principal(account_id=account_id, peer=importer, via="api_key",
                          scope_paths=("/",), act_for_all=True)
    return account_id, principal


def session_batches(conv: Conversation, batch_size: int = 100) -> list[tuple[int, list[Any]]]:
    """A conversation's `messages_ingest` batches in order: (session, IncomingMessages),
    one per session, split at `batch_size`; empty turns left out."""
    from knowledge.ingest.services import IncomingMessage

    by_session: dict[int, list[Turn]] = defaultdict(list)
    for t in conv.turns:
        by_session[t.session].append(t)
    out: list[tuple[int, list[Any]]] = []
    for session, turns in sorted(by_session.items()):
        for i in range(0, len(turns), batch_size):
            out.append((session, [IncomingMessage(
                text=t.text, occurred_at=t.occurred_at,
                client_message_id=f"{conv.sample_id}:{t.dia_id}",
                peer_key=conv.peer_keys[t.speaker], metadata={"dia_id": t.dia_id})
                for t in turns[i:i + batch_size] if t.text.strip()]))
    return out


def ingest_locomo(convs: list[Conversation], *, batch_size: int = 100,
                  account_name: str = "LoCoMo bench", workers: int = 1
                  ) -> tuple[Any, dict[str, Any]]:
    """Every turn as a Message through messages_ingest (eager pipeline). Returns the
    Account id and the ingest statistics (see bench/README.md for the keys)."""
    from django.db import connection

    from knowledge.ingest.services import messages_ingest
    from knowledge.models import Knowledge, KnowledgeSource, Message
    from memhouse.core.tenancy import account_context
    from retrieval.embedding import get_embedder
    from retrieval.models import EntityMention, KnowledgeVector

    t0 = time.monotonic()
    embedder = get_embedder()
    embedder.embed_documents(["warm up the embedding model"])
    model_load_s = time.monotonic() - t0
    log(f"embedder {embedder.identity.key} loaded in {model_load_s:.1f}s")

    account_id, principal = locomo_account(convs, account_name=account_name)

    total = sum(len(c.turns) for c in convs)
    done = 0
    batches: list[dict[str, Any]] = []
    lock = threading.Lock()

    def ingest_conversation(conv: Conversation) -> None:
        nonlocal done
        for session, msgs in session_batches(conv, batch_size):
            bt = time.monotonic()
            with account_context(account_id):
                # on_commit hooks (the eager pipeline) run when this block commits.
                messages_ingest(principal=principal, scope_path=conv.scope_path,
                                messages=msgs,
                                session_id=f"{conv.sample_id}:session_{session}")
            elapsed = time.monotonic() - bt
            with lock:
                done += len(msgs)
                batches.append({"conversation": conv.sample_id, "session": session,
                                "messages": len(msgs), "seconds": round(elapsed, 3)})
                rate = done / (time.monotonic() - started)
                log(f"ingest {conv.sample_id} session {session}: {len(msgs)} msgs in "
                    f"{elapsed:.2f}s ({len(msgs) / elapsed:.1f}/s) - {done}/{total} "
                    f"overall {rate:.1f} msgs/s")

    def worker(queue: list[Conversation]) -> None:
        # Like one Celery worker process: its own connection, conversations in turn.
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    conv = queue.pop(0)
                ingest_conversation(conv)
        finally:
            connection.close()

    sampler = MemorySampler(connection.settings_dict["NAME"]).start()
    started = time.monotonic()
    if workers <= 1:
        for conv in convs:
            ingest_conversation(conv)
    else:
        # Conversations are independent (one scope each); the longest go first so the
        # workers finish close together. Within a conversation sessions stay in order.
        queue = sorted(convs, key=lambda c: -len(c.turns))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(worker, queue) for _ in range(workers)]:
                future.result()
    wall = time.monotonic() - started
    server_mem = sampler.stop()

    with account_context(account_id):
        states = dict(Counter(Knowledge.objects.values_list("state", flat=True)))
        kinds_active = dict(Counter(Knowledge.objects.filter(state="active")
                                    .values_list("kind", flat=True)))
        n_messages = Message.objects.count()
        n_extracted = Message.objects.filter(extracted_at__isnull=False).count()
        n_vectors = KnowledgeVector.objects.count()
        n_mentions = EntityMention.objects.count()
        n_sources = KnowledgeSource.objects.count()
        per_conv = {}
        for conv in convs:
            per_conv[conv.sample_id] = {
                "turns": len(conv.turns),
                "knowledge_by_state": dict(Counter(Knowledge.objects.filter(
                    scope_id=conv.scope_id).values_list("state", flat=True))),
            }
    proposals = sum(states.values())
    stats = {
        "messages": n_messages,
        "messages_extracted": n_extracted,
        "wall_seconds": round(wall, 2),
        "messages_per_second": round(n_messages / wall, 2) if wall else None,
        "model_load_seconds": round(model_load_s, 2),
        "batches": len(batches),
        "batch_seconds_p50": _pct([b["seconds"] for b in batches], 50),
        "batch_seconds_max": max((b["seconds"] for b in batches), default=None),
        "knowledge_by_state": states,
        "active_by_kind": kinds_active,
        "proposals": proposals,
        "claims_per_turn": round(proposals / n_messages, 3) if n_messages else None,
        "active_per_turn": round(states.get("active", 0) / n_messages, 3) if n_messages else None,
        "knowledge_sources": n_sources,
        "vectors": n_vectors,
        "entity_mentions_after_pipeline": n_mentions,
        "python_peak_rss_mb": python_peak_rss_mb(),
        "postgres": server_mem,
        "per_conversation": per_conv,
    }
    return account_id, stats


def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    import numpy as np

    return round(float(np.percentile(np.asarray(values, dtype=float), p)), 3)


def rebuild_entity_index(account_id: Any) -> dict[str, Any]:
    """The operator/dream-time entity rebuild (retrieval.entities.rebuild_entities): the
    ingest pipeline does not index entities itself (see bench/README.md)."""
    from retrieval.entities import rebuild_entities

    t = time.monotonic()
    counts = rebuild_entities(account_id)
    return {**counts, "seconds": round(time.monotonic() - t, 2)}


def write_json(path: str | Path, payload: dict[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)


def fix_sys_path() -> None:
    """Scripts run as `python bench/x.py` get bench/ as sys.path[0], where retrieval.py
    would shadow the `retrieval` app. Put the repo root there instead."""
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))


# ---------------------------------------------------------------------------------------
# Ranking metrics (pure; definitions in bench/README.md, "Metrics")
# ---------------------------------------------------------------------------------------
#
# A ranked result is a list of items, each given as the set of LoCoMo dia_ids it stands
# for: a raw turn is {its dia_id}; a MemHouse statement is the dia_ids of its source
# messages (KnowledgeSource provenance), possibly several, possibly none.


def session_of(dia_id: str) -> int:
    """'D3:12' -> 3 (LoCoMo's dia_id is D<session>:<turn>)."""
    return int(dia_id.split(":", 1)[0].lstrip("D"))


def item_sessions(ranked: list[set[str]]) -> list[set[int]]:
    """Each item's sessions: the sessions of the turns it stands for."""
    return [{session_of(d) for d in dias} for dias in ranked]


def sessions_dedup(ranked_sessions: list[set[int]], items: int) -> list[int]:
    """The distinct sessions of the top `items` items in first-seen order (an item with
    several sessions lists them ascending)."""
    out: list[int] = []
    for sessions in ranked_sessions[:items]:
        for s in sorted(sessions):
            if s not in out:
                out.append(s)
    return out


def recall_share(relevant: set[Any], ranked: list[set[Any]], k: int) -> float:
    """|relevant ∩ union of the top k items| / |relevant| (turn-level recall@k)."""
    found: set[Any] = set()
    for unit in ranked[:k]:
        found |= unit
    return len(relevant & found) / len(relevant)


def recall_any(relevant: set[Any], ranked: list[set[Any]], k: int) -> float:
    """1.0 when some relevant unit is among the top k items (LongMemEval recall_any@k)."""
    return 1.0 if any(relevant & unit for unit in ranked[:k]) else 0.0


def recall_all(relevant: set[Any], ranked: list[set[Any]], k: int) -> float:
    """1.0 when every relevant unit is among the top k items (LongMemEval recall_all@k)."""
    return 1.0 if recall_share(relevant, ranked, k) == 1.0 else 0.0


def ndcg(relevant: set[Any], ranked: list[set[Any]], k: int) -> float:
    """Binary-relevance NDCG@k where each relevant unit is credited once, at the rank of the
    first item that holds it: DCG = sum 1/log2(1 + rank), IDCG = the same with the
    relevant units at ranks 1..min(|relevant|, k). For one unit per item (raw turns, a
    session list) this is the textbook NDCG. One statement can hold several evidence
    turns, so DCG can exceed IDCG there; the value is capped at 1."""
    import math

    if not relevant:
        raise ValueError("ndcg needs at least one relevant unit")
    seen: set[Any] = set()
    dcg = 0.0
    for rank, unit in enumerate(ranked[:k], start=1):
        new = (relevant & unit) - seen
        dcg += len(new) / math.log2(1 + rank)
        seen |= new
    idcg = sum(1 / math.log2(1 + r) for r in range(1, min(len(relevant), k) + 1))
    return min(1.0, dcg / idcg)


def rrf(lists: list[list[str]], k: int = 60) -> list[str]:
    """Reciprocal-rank fusion (Cormack et al. 2009): score(d) = sum over the lists that
    hold d of 1 / (k + rank), rank from 1. Ties by best single rank, then first-seen
    order, so equal inputs give the same list. A list is deduplicated (first occurrence
    kept) before ranks are counted, as retrieval.fusion does."""
    score: dict[str, float] = defaultdict(float)
    best: dict[str, int] = {}
    order: dict[str, int] = {}
    for items in lists:
        for rank, doc in enumerate(dict.fromkeys(items), start=1):
            score[doc] += 1.0 / (k + rank)
            best[doc] = min(best.get(doc, rank), rank)
            order.setdefault(doc, len(order))
    return sorted(score, key=lambda d: (-score[d], best[d], order[d]))


# ---------------------------------------------------------------------------------------
# Lifecycle report: final state distribution and transition counts (issue 19 item 6)
# ---------------------------------------------------------------------------------------

from collections.abc import Iterable  # noqa: E402  (this section is appended)


def lifecycle_summary(states: Iterable[str],
                      transitions: Iterable[tuple[str | None, str, str]]) -> dict[str, Any]:
    """Pure: the final state distribution of `states` (every lifecycle state listed, in
    the model's order, zeros included, so runs compare key by key; shares of the total)
    and the transitions counted per (from, to, reason), most frequent first. `from` is
    None for a statement's creation event."""
    from knowledge.lifecycle import STATES

    counted = Counter(states)
    known = list(STATES)
    distribution = {s: counted.get(s, 0) for s in known}
    distribution.update({s: n for s, n in counted.items() if s not in distribution})
    total = sum(distribution.values())
    edges = Counter((f, t, r) for f, t, r in transitions)
    return {
        "statements": total,
        "final_state_distribution": distribution,
        "final_state_share": {s: round(n / total, 4) if total else 0.0
                              for s, n in distribution.items()},
        "transition_total": sum(edges.values()),
        "transitions": [{"from": f, "to": t, "reason": r, "count": n}
                        for (f, t, r), n in sorted(edges.items(), key=lambda e: (
                            -e[1], e[0][0] or "", e[0][1], e[0][2]))],
    }


def lifecycle_report(account_id: Any) -> dict[str, Any]:
    """The Account's internal lifecycle picture for bench outputs: every statement's final
    state and every LifecycleEvent (from_state -> to_state with its reason)."""
    from knowledge.models import Knowledge, LifecycleEvent
    from memhouse.core.tenancy import account_context

    with account_context(account_id):
        states = list(Knowledge.objects.values_list("state", flat=True))
        events = list(LifecycleEvent.objects.values_list("from_state", "to_state", "reason"))
    return lifecycle_summary(states, events)
