"""`bench/ingest.py --processes 1,2,4`: LoCoMo ingest processed by N real Celery worker
processes (`celery -A memhouse worker`, one pool process each, every queue), a real
Redis broker and the one PostgreSQL server of MEMHOUSE_DATA_DIR; see bench/README.md
("Worker processes") for what is measured and the JSON keys.

Per N: a fresh database (a copy of the migrated empty `bench_<name>`), the Redis database
of ``--broker-url`` purged, N workers started and warmed (bench/worker_probe.py loads
the model in each pool process), then the clock: this process posts the batches through
``messages_ingest`` (as the in-process bench does, but the tasks go to Redis) and waits
until every message is processed and the broker holds no message, queued or unacked.
CPU seconds of each worker process tree, of the PostgreSQL server and of this process
(the poster) are read from /proc around the clock. The workers are stopped at the end,
on error and on SIGTERM/Ctrl-C (warm shutdown, then SIGKILL of the process group).

The outcome (statements by state, sources, vectors, transitions) is compared with an
in-process run of the same command without ``--processes`` (run first, in its own
database, its result kept as ``<out>_reference.json``), unless ``--reference FILE`` (an
earlier one) or ``--reference none``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from bench import common
from bench.common import EXTRACTED_KEY, PROBE_KEY

DEFAULT_BROKER = "redis://127.0.0.1:6379/9"
START_TIMEOUT_SECONDS = 300.0  # per worker: importing Django and loading the model
STOP_GRACE_SECONDS = 30.0      # warm shutdown, then SIGKILL
PACE_WAIT_SECONDS = 1.0        # the paced feed's longest wait for news between checks
IDLE_POLL_SECONDS = 0.1


class BenchError(RuntimeError):
    """The run cannot finish: a worker died, a timeout, the broker is down."""


# ---------------------------------------------------------------------------------------
# Worker processes
# ---------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    # If the bench is killed outright, the kernel sends the worker SIGTERM (a warm
    # shutdown that also ends its pool), so no worker outlives the bench.
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class WorkerGroup:
    """N worker processes, each the leader of its own process group (so its pool
    children can be killed with it). `stop()` is idempotent and leaves no process."""

    workers: list[Worker] = field(default_factory=list)

    def start_one(self, name: str, *, env: dict[str, str], queues: list[str],
                  log_dir: Path, pool: str = "prefork", concurrency: int = 1) -> Worker:
        log_path = log_dir / f"{name}.log"
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(
                [*worker_command(queues, pool=pool, concurrency=concurrency),
                 "-n", f"{name}@%h", "-l", "info"],
                cwd=common.REPO_ROOT, env=env, stdin=subprocess.DEVNULL,
                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent)
        worker = Worker(name, proc, log_path)
        self.workers.append(worker)
        return worker

    def check_alive(self) -> None:
        for w in self.workers:
            rc = w.proc.poll()
            if rc is not None:
                raise BenchError(f"worker {w.name} (pid {w.pid}) exited with code {rc}; "
                                 f"its log {w.log_path} ends:\n{w.log_tail()}")

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> list[str]:
        """Warm shutdown (SIGTERM), then SIGKILL of each process group still there.
        Returns what had to be killed."""
        killed: list[str] = []
        for w in self.workers:
            if w.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    w.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for w in self.workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        for w in self.workers:
            # The group outlives its leader while a pool child is still there.
            try:
                os.killpg(w.pid, 0)
            except (ProcessLookupError, PermissionError):
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(w.pid, signal.SIGKILL)
            killed.append(w.name)
        for w in self.workers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(timeout=5)
        self.workers = []
        return killed


def worker_command(queues: list[str], *, pool: str, concurrency: int) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "memhouse", "worker",
            "-I", "bench.worker_probe", "-Q", ",".join(queues),
            "--pool", pool, "--concurrency", str(concurrency)]


def worker_env(*, dbname: str, broker_url: str, threads: int | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "MEMHOUSE_BENCH_DB": dbname,
        "MEMHOUSE_CELERY_EAGER": "false",
        "CELERY_BROKER_URL": broker_url,
        "REDIS_URL": broker_url,
        "PYTHONPATH": os.pathsep.join([str(common.REPO_ROOT),
                                       *filter(None, [os.environ.get("PYTHONPATH")])]),
        # compose.yaml's workers keep their connection (a task does not reconnect).
        "MEMHOUSE_DB_CONN_MAX_AGE": os.environ.get("MEMHOUSE_DB_CONN_MAX_AGE", "60"),
    })
    if threads:
        env["MEMHOUSE_EMBEDDER_THREADS"] = str(threads)
    return env


def consumed_queues() -> list[str]:
    """Every queue a task is sent to: the default and the named ones (as serve's
    in-process worker consumes them)."""
    from django.conf import settings

    from memhouse.celery import app

    return [app.conf.task_default_queue, *settings.MEMHOUSE_QUEUE_TASKS]


# ---------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat, all cores)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def worker_cpu(group: WorkerGroup) -> dict[str, dict[str, Any]]:
    """Per worker: its main process's CPU and its pool's (live and reaped children)."""
    out: dict[str, dict[str, Any]] = {}
    for w in group.workers:
        cpu = common.tree_cpu(w.pid)
        out[w.name] = {"pid": w.pid, "pool_pids": common.child_pids(w.pid),
                       "main": cpu[0] if cpu else None, "pool": cpu[1] if cpu else None}
    return out


def probe_values(client: Any) -> dict[int, dict[str, Any]]:
    return {int(pid): json.loads(raw) for pid, raw in client.hgetall(PROBE_KEY).items()}


class ActivitySampler:
    """Every `interval` s: the run database's backends in pg_stat_activity (active,
    waiting on a heavyweight lock, on an LWLock, on IO) and the 1-minute load average.
    What the means say: how many backends work at once, and whether they queue on
    locks (PostgreSQL, not the workers, the limit) or not."""

    def __init__(self, dbname: str, interval: float = 0.5) -> None:
        self.dbname = dbname
        self.interval = interval
        self.samples: list[tuple[int, int, int, int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> ActivitySampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        with contextlib.suppress(Exception), common._server_conn(self.dbname) as conn:
            while not self._stop.wait(self.interval):
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE state = 'active'),"
                    " count(*) FILTER (WHERE wait_event_type = 'Lock'),"
                    " count(*) FILTER (WHERE wait_event_type = 'LWLock'),"
                    " count(*) FILTER (WHERE wait_event_type = 'IO')"
                    " FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                    [self.dbname]).fetchone()
                self.samples.append((*row, os.getloadavg()[0]))

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(timeout=5)
        n = len(self.samples)

        def mean(i: int) -> float | None:
            return round(sum(s[i] for s in self.samples) / n, 2) if n else None

        return {"samples": n, "interval_seconds": self.interval,
                "active_backends_mean": mean(0), "lock_waiters_mean": mean(1),
                "lwlock_waiters_mean": mean(2), "io_waiters_mean": mean(3),
                "share_of_samples_with_lock_wait": (
                    round(sum(1 for s in self.samples if s[1]) / n, 3) if n else None),
                "loadavg_1min_mean": mean(4)}


# ---------------------------------------------------------------------------------------
# Outcome and comparison (pure parts tested in tests/bench/test_ingest_processes.py)
# ---------------------------------------------------------------------------------------

# The decisions: what the pipeline wrote and how it placed each statement.
COMPARED = ("messages", "messages_extracted", "statements", "knowledge_by_state",
            "knowledge_sources", "transition_total", "transitions")
# The indexes fed after it. They may differ without a different decision: the embedding
# task embeds the statements still embeddable when it runs, so one a later batch
# superseded before a worker reached its embedding gets no vector, where the in-process
# run embedded it before the next batch was posted.
INDEXES = ("vectors", "entity_mentions")


def reference_outcome(payload: dict[str, Any]) -> dict[str, Any]:
    """The compared keys of an in-process `bench/ingest.py` result file."""
    life = payload["lifecycle"]
    return {"messages": payload["messages"],
            "messages_extracted": payload["messages_extracted"],
            "statements": life["statements"],
            "knowledge_by_state": life["final_state_distribution"],
            "knowledge_sources": payload["knowledge_sources"],
            "vectors": payload["vectors"],
            "entity_mentions": payload["entity_mentions_after_pipeline"],
            "transition_total": life["transition_total"],
            "transitions": life["transitions"]}


def compare_outcomes(reference: dict[str, Any], run: dict[str, Any],
                     keys: tuple[str, ...] = COMPARED) -> dict[str, Any]:
    """What differs between two outcomes, key by key ({} when the same decisions were
    made): states per state, transitions per (from, to, reason)."""
    diffs: dict[str, Any] = {}
    for key in keys:
        if key not in reference or key not in run:
            continue
        a, b = reference[key], run[key]
        if key == "knowledge_by_state":
            for state in sorted(set(a) | set(b)):
                if a.get(state, 0) != b.get(state, 0):
                    diffs[f"state:{state}"] = {"reference": a.get(state, 0),
                                               "run": b.get(state, 0)}
        elif key == "transitions":
            ca = Counter({(t["from"], t["to"], t["reason"]): t["count"] for t in a})
            cb = Counter({(t["from"], t["to"], t["reason"]): t["count"] for t in b})
            for edge in sorted(set(ca) | set(cb), key=lambda e: tuple(x or "" for x in e)):
                if ca[edge] != cb[edge]:
                    diffs[f"transition:{edge[0]}->{edge[1]}:{edge[2]}"] = {
                        "reference": ca[edge], "run": cb[edge]}
        elif a != b:
            diffs[key] = {"reference": a, "run": b}
    return diffs


def run_outcome(account_id: Any) -> dict[str, Any]:
    from knowledge.models import AuditEntry, KnowledgeSource, Message
    from memhouse.core.tenancy import account_context
    from retrieval.models import EntityMention, KnowledgeVector, MessageVector

    life = common.lifecycle_report(account_id)
    with account_context(account_id):
        messages = Message.objects.count()
        extracted = Message.objects.filter(extracted_at__isnull=False).count()
        failed = Message.objects.filter(extraction_failed_at__isnull=False).count()
        out = {"messages": messages, "messages_extracted": extracted,
               "messages_failed": failed, "statements": life["statements"],
               "knowledge_by_state": life["final_state_distribution"],
               "knowledge_sources": KnowledgeSource.objects.count(),
               "vectors": KnowledgeVector.objects.count(),
               "message_vectors": MessageVector.objects.count(),
               "entity_mentions": EntityMention.objects.count(),
               "audit_entries": AuditEntry.objects.count(),
               "transition_total": life["transition_total"],
               "transitions": life["transitions"]}
    return out


# ---------------------------------------------------------------------------------------
# Feeding and waiting
# ---------------------------------------------------------------------------------------


def feed_order(plans: dict[str, list[Any]]) -> list[tuple[str, Any]]:
    """`--feed all`: every batch at once, round robin over the conversations (the first
    batch of each, then the second, ...), so a conversation's next batch is queued as
    far behind its previous one as the conversations allow."""
    queues = {k: deque(v) for k, v in plans.items()}
    out: list[tuple[str, Any]] = []
    while any(queues.values()):
        for key, q in queues.items():
            if q:
                out.append((key, q.popleft()))
    return out


def _queues(client: Any) -> list[bytes]:
    """The lists in the database that are queues (not the probe's keys)."""
    return [key for key in client.scan_iter(count=1000)
            if not key.startswith(b"memhouse-bench:") and client.type(key) == b"list"]


def broker_idle(client: Any) -> bool:
    """No task queued (any list in the database) and none delivered but unacknowledged
    (kombu's `unacked` hash: with acks_late a task is acknowledged after it ran, and
    the tasks it sends are published before that)."""
    if client.hlen("unacked"):
        return False
    return not any(client.llen(key) for key in _queues(client))


def broker_sizes(client: Any) -> dict[str, int]:
    out = {key.decode(errors="replace"): client.llen(key) for key in _queues(client)}
    out["unacked"] = client.hlen("unacked")
    return out


@dataclass
class Feeder:
    """Posts the LoCoMo batches as the in-process bench does (`messages_ingest` in the
    Account's context; the tasks go to the broker when it commits).

    `paced` (default): a conversation's next batch is posted when its previous one is
    extracted (a conversation's sessions happen one after the other, and the update
    rule reads what the batch before wrote), several conversations in flight at once,
    so the workers make the in-process run's decisions. The workers' probe pushes the
    message ids of each extraction task that committed (EXTRACTED_KEY); the feed waits
    on that list, so pacing costs no database query. `all`: every batch at once."""

    account_id: Any
    principal: Any
    convs: list[Any]
    batch_size: int
    client: Any  # the broker's Redis
    check: Any  # called at least every PACE_WAIT_SECONDS: raises when the run must stop
    posted: int = 0

    def _post(self, conv: Any, session: int, msgs: list[Any]) -> list[str]:
        from knowledge.ingest.services import messages_ingest
        from memhouse.core.tenancy import account_context

        with account_context(self.account_id):
            rows = messages_ingest(principal=self.principal, scope_path=conv.scope_path,
                                   messages=msgs,
                                   session_id=f"{conv.sample_id}:session_{session}")
        self.posted += len(rows)
        return [r["id"] for r in rows]

    def unprocessed(self) -> int:
        """Messages neither extracted nor set aside (dead-lettered)."""
        from knowledge.models import Message
        from memhouse.core.tenancy import account_context

        with account_context(self.account_id):
            return Message.objects.filter(extracted_at__isnull=True,
                                          extraction_failed_at__isnull=True).count()

    def run(self, mode: str) -> None:
        plans = {c.sample_id: common.session_batches(c, self.batch_size) for c in self.convs}
        by_id = {c.sample_id: c for c in self.convs}
        if mode == "all":
            for key, (session, msgs) in feed_order(plans):
                self._post(by_id[key], session, msgs)
            return
        todo = {k: deque(v) for k, v in plans.items()}
        inflight: dict[str, set[str]] = {}  # conversation -> its batch's unextracted ids
        owner: dict[str, str] = {}  # message id -> conversation
        while True:
            for key, q in todo.items():
                if key not in inflight and q:
                    ids = self._post(by_id[key], *q.popleft())
                    inflight[key] = set(ids)
                    owner.update(dict.fromkeys(ids, key))
            if not inflight:
                return
            self.check()
            news = self.client.blpop([EXTRACTED_KEY], timeout=PACE_WAIT_SECONDS)
            raw = news[1] if news is not None else None
            while raw is not None:  # this news and whatever else came meanwhile
                for mid in json.loads(raw):
                    if mid in owner:
                        inflight[owner.pop(mid)].discard(mid)
                raw = self.client.lpop(EXTRACTED_KEY)
            for key in [k for k, ids in inflight.items() if not ids]:
                del inflight[key]


# ---------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------


def _run_reference(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The in-process bench (eager pipeline in the posting process), same dataset,
    batches and limit, in its own database."""
    cmd = [sys.executable, str(common.REPO_ROOT / "bench" / "ingest.py"),
           "--dataset", args.dataset, "--out", str(out), "--db-name", f"{args.db_name}_ref",
           "--batch-size", str(args.batch_size)]
    if args.limit_conversations:
        cmd += ["--limit-conversations", str(args.limit_conversations)]
    if args.torch_threads:
        cmd += ["--torch-threads", str(args.torch_threads)]
    env = dict(os.environ, MEMHOUSE_CELERY_EAGER="true")
    common.log(f"reference: the in-process run ({' '.join(cmd[1:])})")
    try:
        subprocess.run(cmd, env=env, check=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"the in-process reference run took over {args.timeout}s") from exc
    except subprocess.CalledProcessError as exc:
        raise BenchError(f"the in-process reference run failed ({exc.returncode})") from exc
    return json.loads(out.read_text())


def reference_path(out: str | Path) -> Path:
    """Where the in-process reference run writes its ingest.json: beside `out`."""
    out = Path(out)
    return out.with_name(f"{out.stem}_reference{out.suffix or '.json'}")


def _reference_summary(payload: dict[str, Any], source: str) -> dict[str, Any]:
    python = payload.get("python_cpu_seconds")
    pg = payload.get("postgres_cpu_seconds")
    n = payload["messages"]
    total = (python or 0) + (pg or 0)
    def per_msg(seconds: float | None) -> float | None:
        return round(1000 * seconds / n, 2) if seconds is not None and n else None

    return {"source": source, "messages": n, "wall_seconds": payload.get("wall_seconds"),
            "messages_per_second": payload.get("messages_per_second"),
            "python_cpu_seconds": python, "postgres_cpu_seconds": pg,
            "python_cpu_ms_per_message": per_msg(python),
            "postgres_cpu_ms_per_message": per_msg(pg),
            "cpu_ms_per_message": per_msg(total) if python is not None else None,
            "loadavg": [payload.get("config", {}).get("loadavg_start"),
                        payload.get("config", {}).get("loadavg_end")],
            "outcome": reference_outcome(payload)}


def _clone_database(template: str, name: str) -> None:
    from django.db import connections
    from psycopg import sql

    connections.close_all()  # a template must have no connection while it is copied
    with common._server_conn() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template)))
    connections.settings["default"]["NAME"] = name  # the next query connects there


def _drop_database(name: str, template: str) -> None:
    from django.db import connections

    connections.close_all()
    connections.settings["default"]["NAME"] = template
    common.drop_now(name)


def _one_run(n: int, args: argparse.Namespace, *, template: str, client: Any,
             log_dir: Path, group: WorkerGroup) -> dict[str, Any]:
    dbname = f"{template}_p{n}"
    _clone_database(template, dbname)
    client.flushdb()
    convs = common.load_locomo(args.dataset, args.limit_conversations)
    account_id, principal = common.locomo_account(convs)
    sampler: ActivitySampler | None = None
    try:
        t_start = time.monotonic()
        env = worker_env(dbname=dbname, broker_url=args.broker_url, threads=args.torch_threads)
        env["MEMHOUSE_BENCH_WORKER_POOL"] = args.worker_pool  # bench/worker_probe.py
        queues = consumed_queues()
        # One after the other, each once the one before is warm (its pool process has
        # loaded the model, so it is past start-up): every process bootstraps the embedded
        # server on start (memhouse.core.embedded_db._bootstrap, as superuser), and four
        # at once can fail there with "tuple concurrently updated".
        for i in range(n):
            group.start_one(f"bench-n{n}-{i + 1}", env=env, queues=queues, log_dir=log_dir,
                            pool=args.worker_pool, concurrency=args.worker_concurrency)
            while True:
                group.check_alive()
                warm = [v for v in probe_values(client).values() if v.get("warm")]
                if len(warm) >= i + 1:
                    break
                if time.monotonic() - t_start > START_TIMEOUT_SECONDS * n:
                    raise BenchError(f"{n} workers not ready within "
                                     f"{START_TIMEOUT_SECONDS * n:.0f}s ({len(warm)} warm); "
                                     f"logs in {log_dir}")
                time.sleep(0.2)
        common.log(f"N={n}: {n} workers ready in {time.monotonic() - t_start:.1f}s "
                   f"(pids {[w.pid for w in group.workers]})")

        deadline = time.monotonic() + args.timeout
        feeder = Feeder(account_id, principal, convs, args.batch_size, client=client,
                        check=lambda: None)

        def check() -> None:
            group.check_alive()
            if time.monotonic() > deadline:
                raise BenchError(
                    f"timeout: N={n} did not finish within {args.timeout:.0f}s "
                    f"({feeder.posted} messages posted, {feeder.unprocessed()} not processed, "
                    f"broker {broker_sizes(client)}); logs in {log_dir}")

        feeder.check = check
        sampler = ActivitySampler(dbname).start()
        cpu0, pg0, self0 = worker_cpu(group), common.postgres_cpu(), common.process_cpu()
        probe0, busy0, load0 = probe_values(client), machine_busy_seconds(), os.getloadavg()
        started = time.monotonic()
        feeder.run(args.feed)
        posted_s = time.monotonic() - started
        common.log(f"N={n}: {feeder.posted} messages posted in {posted_s:.1f}s")
        while True:
            check()
            if broker_idle(client) and not feeder.unprocessed():
                ended = time.monotonic()
                time.sleep(0.2)  # a task between the list and `unacked`: look again
                if broker_idle(client) and not feeder.unprocessed():
                    break
            time.sleep(IDLE_POLL_SECONDS)
        wall = ended - started
        cpu1, pg1, self1 = worker_cpu(group), common.postgres_cpu(), common.process_cpu()
        probe1, busy1, load1 = probe_values(client), machine_busy_seconds(), os.getloadavg()
        activity = sampler.stop()
        sampler = None
        outcome = run_outcome(account_id)
    finally:
        if sampler is not None:
            sampler.stop()
        killed = group.stop()
        if killed:
            common.log(f"N={n}: killed after the grace period: {killed}")
        if not args.keep_db:
            _drop_database(dbname, template)
        client.flushdb()

    messages = outcome["messages"]
    workers = []
    for name, end in cpu1.items():
        start = cpu0[name]
        # The threads pool runs tasks in the worker process itself (no pool processes).
        pids = set(start["pool_pids"]) | set(end["pool_pids"]) or {end["pid"]}
        probes = [(probe1.get(p, {}), probe0.get(p, {})) for p in pids]
        main = end["main"] - start["main"]
        pool = end["pool"] - start["pool"]
        workers.append({
            "node": name, "pid": end["pid"], "pool_pids": sorted(pids),
            "main_cpu_seconds": round(main, 2), "pool_cpu_seconds": round(pool, 2),
            "cpu_seconds": round(main + pool, 2),
            "tasks": sum(a.get("tasks", 0) - b.get("tasks", 0) for a, b in probes),
            "encoder_cpu_seconds": round(sum(a.get("encoder_cpu_seconds", 0)
                                             - b.get("encoder_cpu_seconds", 0)
                                             for a, b in probes), 2)})
    worker_total = sum(w["cpu_seconds"] for w in workers)
    encoder = sum(w["encoder_cpu_seconds"] for w in workers)
    pg = (pg1 - pg0) if pg0 is not None and pg1 is not None else None
    poster = self1 - self0
    ours = worker_total + (pg or 0) + poster
    busy = busy1 - busy0

    def per_msg(seconds: float | None) -> float | None:
        return round(1000 * seconds / messages, 2) if seconds is not None and messages else None

    return {
        "processes": n, "database": dbname, "messages": messages,
        "wall_seconds": round(wall, 2),
        "messages_per_second": round(messages / wall, 2) if wall else None,
        "post_seconds": round(posted_s, 2),
        "workers": workers,
        "worker_cpu_seconds": round(worker_total, 2),
        "worker_cpu_ms_per_message": per_msg(worker_total),
        "encoder_cpu_seconds": round(encoder, 2),
        "encoder_cpu_ms_per_message": per_msg(encoder),
        "worker_cpu_ms_per_message_excluding_encoder": per_msg(worker_total - encoder),
        "postgres_cpu_seconds": round(pg, 2) if pg is not None else None,
        "postgres_cpu_ms_per_message": per_msg(pg),
        "poster_cpu_seconds": round(poster, 2),
        "poster_cpu_ms_per_message": per_msg(poster),
        "cpu_ms_per_message": per_msg(ours),
        "cores_used": {"workers": round(worker_total / wall, 2),
                       "postgres": round(pg / wall, 2) if pg is not None else None,
                       "poster": round(poster / wall, 2)},
        "machine": {"cpu_count": os.cpu_count(),
                    "busy_cpu_seconds": round(busy, 2),
                    "others_cpu_seconds": round(max(0.0, busy - ours), 2),
                    "loadavg_start": load0, "loadavg_end": load1,
                    "loadavg_1min_mean": activity.pop("loadavg_1min_mean")},
        "postgres_activity": activity,
        "outcome": outcome,
    }


def _table(reference: dict[str, Any] | None, runs: list[dict[str, Any]]) -> str:
    """The runs side by side (and the in-process reference first): speed, CPU per
    message, the outcome, and whether it is the reference's."""
    cols = ([("in-process", reference)] if reference else []) + [
        (f"N={r['processes']}", r) for r in runs]
    first = (reference or runs[0])["outcome"]["knowledge_by_state"]
    states = [s for s in first if any(c[1]["outcome"]["knowledge_by_state"].get(s)
                                      for c in cols)]

    def fig(*keys: str) -> list[Any]:
        values = []
        for _, c in cols:
            v: Any = c
            for k in keys:
                v = v.get(k) if isinstance(v, dict) else None
            values.append(v)
        return values

    rows: list[tuple[str, list[Any]]] = [
        ("messages/s", fig("messages_per_second")),
        ("wall s", fig("wall_seconds")),
        ("CPU ms/message, all", fig("cpu_ms_per_message")),
        ("  python in-process", fig("python_cpu_ms_per_message")),
        ("  workers", fig("worker_cpu_ms_per_message")),
        ("  of which encoder", fig("encoder_cpu_ms_per_message")),
        ("  postgres", fig("postgres_cpu_ms_per_message")),
        ("  poster", fig("poster_cpu_ms_per_message")),
        ("cores used: workers", fig("cores_used", "workers")),
        ("cores used: postgres", fig("cores_used", "postgres")),
        ("others' CPU s", fig("machine", "others_cpu_seconds")),
        ("load 1 min (mean)", fig("machine", "loadavg_1min_mean")),
        ("lock waiters (mean)", fig("postgres_activity", "lock_waiters_mean")),
        ("messages", fig("outcome", "messages")),
        ("extracted", fig("outcome", "messages_extracted")),
        ("statements", fig("outcome", "statements")),
        *[(f"  {s}", fig("outcome", "knowledge_by_state", s)) for s in states],
        ("sources", fig("outcome", "knowledge_sources")),
        ("vectors", fig("outcome", "vectors")),
        ("entity mentions", fig("outcome", "entity_mentions")),
        ("transitions", fig("outcome", "transition_total")),
    ]
    if reference:
        rows.append(("same decisions", ["-", *[
            "yes" if not r["differences"] else f"NO ({len(r['differences'])} keys)"
            for r in runs]]))
        rows.append(("same indexes", ["-", *[
            "yes" if not r.get("index_differences") else ", ".join(
                f"{k} {v['run'] - v['reference']:+d}" for k, v in r["index_differences"].items())
            for r in runs]]))
    width = max(len(r[0]) for r in rows)
    lines = [" " * width + "".join(f"{c[0]:>13}" for c in cols)]
    lines += [label.ljust(width) + "".join(f"{'' if v is None else v!s:>13}" for v in values)
              for label, values in rows]
    return "\n".join(lines)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the workers as Ctrl-C does


def main(args: argparse.Namespace) -> int:
    import redis

    counts = list(dict.fromkeys(int(x) for x in str(args.processes).split(",") if x.strip()))
    if not counts or min(counts) < 1:
        raise SystemExit("--processes takes process counts >= 1, e.g. 1,2,4")
    client = redis.Redis.from_url(args.broker_url, socket_timeout=10)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise SystemExit(f"--processes needs Redis at {args.broker_url}: {exc}") from exc
    signal.signal(signal.SIGTERM, _interrupt)
    loadavg_start = os.getloadavg()

    reference = None
    if args.reference != "none":
        if args.reference:
            reference = _reference_summary(json.loads(Path(args.reference).read_text()),
                                           str(Path(args.reference).resolve()))
        else:  # kept next to --out: `--reference` of a later run (another --feed)
            out = reference_path(args.out)
            reference = _reference_summary(_run_reference(args, out), str(out.resolve()))
        common.log(f"reference: {reference['messages']} messages, "
                   f"{reference['messages_per_second']} msgs/s in-process")

    # This process posts; the pipeline runs in the workers.
    os.environ.update({"MEMHOUSE_CELERY_EAGER": "false", "CELERY_BROKER_URL": args.broker_url,
                       "REDIS_URL": args.broker_url})
    template = common.bootstrap(args.db_name)  # migrated, empty: each run copies it
    import logging

    logging.getLogger("celery").setLevel(logging.WARNING)
    from django.conf import settings

    if settings.CELERY_TASK_ALWAYS_EAGER:
        raise SystemExit("--processes: Celery is still eager in the posting process")
    log_dir = Path(args.worker_logs or tempfile.mkdtemp(prefix="memhouse-bench-workers-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    convs = common.load_locomo(args.dataset, args.limit_conversations)
    payload: dict[str, Any] = {
        "benchmark": "ingest-processes",
        "dataset": str(Path(args.dataset).resolve()),
        "conversations": [c.sample_id for c in convs],
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "processes": {"counts": counts, "feed": args.feed, "reference": reference,
                      "runs": []},
        "config": {"database_template": template, "kept_databases": args.keep_db,
                   "batch_size": args.batch_size, "broker_url": args.broker_url,
                   "worker_command": " ".join(worker_command(
                       ["<every queue>"], pool=args.worker_pool,
                       concurrency=args.worker_concurrency)[1:]),
                   "worker_pool": args.worker_pool,
                   "worker_concurrency": args.worker_concurrency,
                   "queues": consumed_queues(), "timeout_seconds": args.timeout,
                   "worker_logs": str(log_dir),
                   "conn_max_age": worker_env(dbname="", broker_url="", threads=None)[
                       "MEMHOUSE_DB_CONN_MAX_AGE"],
                   "embedder_threads": args.torch_threads or settings.MEMHOUSE_EMBEDDER_THREADS,
                   "server": common.server_settings(), "cpu_count": os.cpu_count(),
                   "loadavg_start": loadavg_start,
                   "shared_machine_note": "CPU ms per message is the load-independent "
                                          "figure; wall and messages/s move with what "
                                          "else runs (machine.others_cpu_seconds)"},
    }
    group = WorkerGroup()
    runs: list[dict[str, Any]] = payload["processes"]["runs"]
    try:
        for n in counts:
            run = _one_run(n, args, template=template, client=client, log_dir=log_dir,
                           group=group)
            run["differences"] = (compare_outcomes(reference["outcome"], run["outcome"])
                                  if reference else None)
            run["matches_reference"] = (not run["differences"]) if reference else None
            run["index_differences"] = (compare_outcomes(
                reference["outcome"], run["outcome"], INDEXES) if reference else None)
            runs.append(run)
            common.log(f"N={n}: {run['messages']} messages in {run['wall_seconds']}s = "
                       f"{run['messages_per_second']} msgs/s; CPU ms/message: workers "
                       f"{run['worker_cpu_ms_per_message']} (encoder "
                       f"{run['encoder_cpu_ms_per_message']}), postgres "
                       f"{run['postgres_cpu_ms_per_message']}, poster "
                       f"{run['poster_cpu_ms_per_message']}; load "
                       f"{run['machine']['loadavg_1min_mean']}; "
                       f"same decisions as in-process: {run['matches_reference']}")
            if run["differences"]:
                common.log(f"N={n} decided differently from the in-process run: "
                           f"{run['differences']}")
            if run["index_differences"]:
                common.log(f"N={n} indexes differ from the in-process run (timing, not "
                           f"decisions): {run['index_differences']}")
            payload["config"]["loadavg_end"] = os.getloadavg()
            common.write_json(args.out, payload)
    except BenchError as exc:
        common.log(f"error: {exc}")
        payload["error"] = str(exc)
        common.write_json(args.out, payload)
        return 2
    finally:
        group.stop()
        with contextlib.suppress(Exception):
            client.flushdb()
    print(_table(reference, runs), flush=True)
    common.log(f"-> {args.out} (the machine was shared: compare CPU ms/message, and read "
               f"wall and messages/s with machine.loadavg_1min_mean)")
    return 0
