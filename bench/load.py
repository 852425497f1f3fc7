"""Bounded load benchmark: concurrent ingest + search over real HTTP, loopback only.

    .venv/bin/python bench/load.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --out bench/results/load.json [--duration 180] [--ingest-workers 2] \
        [--search-workers 2] [--ingest-rate 20] [--keep-db] [--port 8765]

It creates its own database (bench/common.bootstrap), an Account with one scope per
LoCoMo conversation, the speakers as peers and an agent API key (through services), then
starts the real server (gunicorn when installed, else `manage.py runserver --noreload`,
threaded) and a real Celery worker (MEMHOUSE_CELERY_EAGER=false) on a private Redis
database, both as subprocesses bound to 127.0.0.1. For --duration seconds ingest threads
POST LoCoMo turns to /api/v1/messages and search threads POST LoCoMo questions to
/api/v1/search, all through memhouse.client. Afterwards it waits (bounded) for the queue
to drain and checks in the database that every accepted message was stored and how many
the pipeline finished. Output keys: see bench/README.md ("Load").
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

from bench import common  # noqa: E402

REPO = common.REPO_ROOT
PYTHON = sys.executable

# The server and the worker run with the project's settings pointed at the bench database
# (bench.settings) but with ATOMIC_REQUESTS back on, exactly as memhouse.settings has it
# (bench.settings turns it off for in-process benchmarks; the API relies on it).
SUBPROCESS_SETTINGS = '''\
from bench.settings import *  # noqa: F403
from bench.settings import DATABASES

DATABASES["default"]["ATOMIC_REQUESTS"] = True
'''


# ---------------------------------------------------------------------------------------
# Small statistics helpers (pure; tests/bench/test_load_smoke.py covers them)
# ---------------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    xs = sorted(values)
    k = (len(xs) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    if lo == hi:
        return xs[lo]
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def latency_summary(seconds: list[float]) -> dict[str, Any]:
    ms = [s * 1000 for s in seconds]
    out: dict[str, Any] = {"n": len(ms)}
    for name, p in (("p50", 50), ("p95", 95), ("p99", 99)):
        v = percentile(ms, p)
        out[name] = round(v, 1) if v is not None else None
    out["mean"] = round(sum(ms) / len(ms), 1) if ms else None
    out["max"] = round(max(ms), 1) if ms else None
    return out


def question_reader(question: str, speakers: tuple[str, str]) -> str:
    """The speaker whose first name the question contains, else speaker_a."""
    for name in speakers:
        first = name.split()[0]
        if re.search(rf"\b{re.escape(first)}\b", question, re.IGNORECASE):
            return name
    return speakers[0]


@dataclass
class Batch:
    round: int
    conv: Any
    session: int
    turns: list[Any]

    @property
    def session_key(self) -> str:
        return f"{self.conv.sample_id}:session_{self.session}"

    def client_ids(self) -> list[str]:
        return [client_message_id(self.round, self.conv.sample_id, t.dia_id)
                for t in self.turns]


def client_message_id(rnd: int, sample_id: str, dia_id: str) -> str:
    return f"load:r{rnd}:{sample_id}:{dia_id}"


def batch_plan(convs: list[Any], batch_size: int, skip_round0: frozenset[str] = frozenset()
               ) -> Iterator[Batch]:
    """Endless: every session of every conversation in chunks of batch_size non-empty
    turns; after the last conversation the next round starts with new client ids.
    Conversations in skip_round0 (preloaded) start in round 1."""
    for rnd in itertools.count():
        for conv in convs:
            if rnd == 0 and conv.sample_id in skip_round0:
                continue
            by_session: dict[int, list[Any]] = defaultdict(list)
            for t in conv.turns:
                if t.text.strip():
                    by_session[t.session].append(t)
            for session, turns in sorted(by_session.items()):
                for i in range(0, len(turns), batch_size):
                    yield Batch(rnd, conv, session, turns[i:i + batch_size])


# ---------------------------------------------------------------------------------------
# Process tree sampling (server, worker)
# ---------------------------------------------------------------------------------------


def _tree(root: int, children: dict[int, list[int]]) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class TreeSampler:
    """Peak RSS of process trees (sum of VmRSS over a root and its descendants, sampled),
    the largest VmHWM (kernel peak) of any one process, and CPU seconds (user+system of
    the live processes at the last sample)."""

    def __init__(self, roots: dict[str, int], interval: float = 0.5) -> None:
        self.roots = roots
        self.interval = interval
        self.peak_tree_kb = dict.fromkeys(roots, 0)
        self.max_hwm_kb = dict.fromkeys(roots, 0)
        self.max_procs = dict.fromkeys(roots, 0)
        self.cpu: dict[str, dict[int, float]] = {name: {} for name in roots}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def sample(self) -> None:
        children = common.children_map()
        for name, root in self.roots.items():
            pids = _tree(root, children)
            total = 0
            for pid in pids:
                st = common._status_kb(pid)
                total += st.get("VmRSS", 0)
                self.max_hwm_kb[name] = max(self.max_hwm_kb[name], st.get("VmHWM", 0))
                self.cpu[name][pid] = _cpu_seconds(pid) or self.cpu[name].get(pid, 0.0)
            self.peak_tree_kb[name] = max(self.peak_tree_kb[name], total)
            self.max_procs[name] = max(self.max_procs[name], len(pids))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):
                self.sample()

    def stop(self) -> dict[str, Any]:
        with contextlib.suppress(Exception):
            self.sample()
        self._stop.set()
        self._thread.join(timeout=2)
        return {name: {"peak_rss_mb": round(self.peak_tree_kb[name] / 1024, 1),
                       "max_process_vmhwm_mb": round(self.max_hwm_kb[name] / 1024, 1),
                       "max_processes": self.max_procs[name],
                       "cpu_seconds": round(sum(self.cpu[name].values()), 1)}
                for name in self.roots}


# ---------------------------------------------------------------------------------------
# Subprocesses
# ---------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def have_gunicorn() -> bool:
    import importlib.util

    return importlib.util.find_spec("gunicorn") is not None


def gunicorn_extra_flags() -> tuple[str, list[str]]:
    """gunicorn's version and, where it has one (>= 25), the switch that stops it from
    opening its control socket at the shared default path ~/.gunicorn/gunicorn.ctl."""
    import gunicorn
    from gunicorn.config import KNOWN_SETTINGS

    flags = {f for s in KNOWN_SETTINGS for f in (getattr(s, "cli", None) or [])}
    return gunicorn.__version__, (["--no-control-socket"] if "--no-control-socket" in flags
                                  else [])


def child_env(*, settings_dir: str, redis_url: str, rate_limit: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": os.pathsep.join([settings_dir, str(REPO)]
                                      + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])),
        "DJANGO_SETTINGS_MODULE": "memhouse_load_settings",
        "MEMHOUSE_CELERY_EAGER": "false",
        "REDIS_URL": redis_url,
        "CELERY_BROKER_URL": redis_url,
        "MEMHOUSE_RATE_LIMIT_REDIS_URL": redis_url,
        "MEMHOUSE_RATE_LIMIT_PER_MINUTE": str(rate_limit),
        "MEMHOUSE_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE": str(rate_limit),
        "MEMHOUSE_LLM_BASE_URL": "",  # rule-based extraction, no model calls
        "MEMHOUSE_ALLOW_INSECURE_LOCAL": "1",  # a loopback server with the built-in key
        "PYTHONUNBUFFERED": "1",
    })
    return env


def start_server(args: argparse.Namespace, env: dict[str, str], logdir: Path
                 ) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    addr = f"127.0.0.1:{args.port}"
    if args.server == "gunicorn" or (args.server == "auto" and have_gunicorn()):
        # The Dockerfile's command (sync workers) unless --gunicorn-threads > 1 (gthread).
        cmd = [PYTHON, "-m", "gunicorn", "memhouse.wsgi", "--bind", addr,
               "--workers", str(args.gunicorn_workers), "--timeout", "60"]
        if args.gunicorn_threads > 1:
            cmd += ["--threads", str(args.gunicorn_threads)]
        version, extra = gunicorn_extra_flags()
        cmd += extra
        kind = (f"gunicorn {version} ({args.gunicorn_workers} workers, "
                + (f"gthread x {args.gunicorn_threads} threads)" if args.gunicorn_threads > 1
                   else "sync, as in the Dockerfile)"))
    else:
        cmd = [PYTHON, "manage.py", "runserver", addr, "--noreload"]
        kind = "runserver --noreload (threaded: one thread per request)"
    out = open(logdir / "server.log", "wb")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    return proc, {"kind": kind, "command": " ".join(cmd[1:]), "log": str(logdir / "server.log")}


def start_worker(args: argparse.Namespace, env: dict[str, str], logdir: Path
                 ) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    cmd = [PYTHON, "-m", "celery", "-A", "memhouse", "worker", "--loglevel=INFO",
           f"--pool={args.worker_pool}", f"--concurrency={args.worker_concurrency}",
           "-n", f"load-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
           "--without-heartbeat"]
    out = open(logdir / "worker.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    return proc, {"kind": f"celery worker --pool={args.worker_pool} "
                          f"--concurrency={args.worker_concurrency}",
                  "command": " ".join(cmd[1:]), "log": str(logdir / "worker.log")}


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 20) -> int | None:
    """SIGTERM to the process group we started (start_new_session), then SIGKILL."""
    if proc.poll() is not None:
        return proc.returncode
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(timeout=5)


def wait_for(predicate: Any, timeout: float, what: str, procs: list[Any]) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{what}: a subprocess exited with {p.returncode}")
        with contextlib.suppress(Exception):
            if predicate():
                return
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not ready after {timeout:.0f}s")


def log_counts(path: Path) -> dict[str, int]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {}
    return {"tracebacks": text.count("Traceback (most recent call last)"),
            "lines_with_ERROR": sum(1 for line in text.splitlines() if "ERROR" in line),
            "task_retries": len(re.findall(r"Task \S+\[[^\]]+\] retry", text)),
            "task_failures": len(re.findall(r"Task \S+\[[^\]]+\] raised", text))}


# ---------------------------------------------------------------------------------------
# Load
# ---------------------------------------------------------------------------------------


@dataclass
class Result:
    op: str
    t: float            # start, seconds since the load started
    latency: float      # seconds
    outcome: str        # "ok", "http_<status>", or an exception type
    messages: int = 0
    created: int = 0
    duplicate: int = 0
    server_ms: float | None = None
    candidates: int | None = None
    dropped: tuple[str, ...] = ()


@dataclass
class Shared:
    deadline: float
    started: float
    plan: Iterator[Batch]
    ingest_rate: float
    search_rate: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    results: list[Result] = field(default_factory=list)
    accepted_ids: list[str] = field(default_factory=list)
    attempted_ids: list[str] = field(default_factory=list)
    next_ingest: float = 0.0
    next_search: float = 0.0
    error_samples: dict[str, str] = field(default_factory=dict)
    # conversations whose scope holds active knowledge; searches draw only from these
    # once there is one (the main loop refreshes it from the database)
    searchable: frozenset[str] = frozenset()

    def pace(self, kind: str, cost: float) -> bool:
        """Reserve a slot on the global schedule (rate 0 = unpaced); False past deadline."""
        rate = self.ingest_rate if kind == "ingest" else self.search_rate
        if rate > 0:
            with self.lock:
                attr = "next_" + kind
                at = max(time.monotonic(), getattr(self, attr))
                setattr(self, attr, at + cost / rate)
            delay = at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        return time.monotonic() < self.deadline


def classify(exc: BaseException) -> str:
    from memhouse.client import MemHouseError

    if isinstance(exc, MemHouseError) and exc.status is not None:
        return f"http_{exc.status}"
    if isinstance(exc, MemHouseError):
        return f"{type(exc).__name__}:{exc.code}"
    return type(exc).__name__


def ingest_worker(shared: Shared, base: str, key: str) -> None:
    from memhouse.client import MemHouseClient, Message

    with MemHouseClient(base, key, timeout=60, retries=0) as mh:
        while True:
            with shared.lock:
                batch = next(shared.plan)
            if not shared.pace("ingest", len(batch.turns)):
                return
            ids = batch.client_ids()
            msgs = [Message(t.text, peer_key=batch.conv.peer_keys[t.speaker],
                            occurred_at=t.occurred_at, id=cid,
                            metadata={"dia_id": t.dia_id, "round": batch.round})
                    for t, cid in zip(batch.turns, ids, strict=True)]
            t0 = time.monotonic()
            try:
                body = mh.ingest_messages(batch.conv.scope_path, msgs,
                                          session=batch.session_key)
                statuses = Counter(m["status"] for m in body["messages"])
                res = Result("ingest", t0 - shared.started, time.monotonic() - t0, "ok",
                             len(msgs), statuses.get("created", 0),
                             statuses.get("duplicate", 0))
                accepted = [m["client_message_id"] for m in body["messages"]]
            except Exception as exc:  # every failure is counted, none ends the run
                res = Result("ingest", t0 - shared.started, time.monotonic() - t0,
                             classify(exc), len(msgs))
                accepted = []
                shared.error_samples.setdefault(res.outcome, repr(exc)[:300])
            with shared.lock:
                shared.results.append(res)
                shared.attempted_ids.extend(ids)
                shared.accepted_ids.extend(accepted)


def search_worker(shared: Shared, base: str, key: str, questions: list[tuple[Any, str, str]],
                  offset: int, profile: str | None) -> None:
    from memhouse.client import MemHouseClient

    with MemHouseClient(base, key, timeout=60, retries=0) as mh:
        i = offset
        while True:
            if not shared.pace("search", 1):
                return
            ready = shared.searchable
            for _ in range(len(questions)):
                conv, question, speaker = questions[i % len(questions)]
                i += 1
                if not ready or conv.sample_id in ready:
                    break
            t0 = time.monotonic()
            try:
                body = mh.search(question, scope=conv.scope_path,
                                 peer_key=conv.peer_keys[speaker], profile=profile)
                res = Result("search", t0 - shared.started, time.monotonic() - t0, "ok",
                             server_ms=body.get("elapsed_ms"),
                             candidates=len(body.get("candidates", [])),
                             dropped=tuple(f"{d.get('name')}:{d.get('reason')}"
                                             if isinstance(d, dict) else str(d)
                                             for d in body.get("strategies", {})
                                             .get("dropped", [])))
            except Exception as exc:
                res = Result("search", t0 - shared.started, time.monotonic() - t0,
                             classify(exc))
                shared.error_samples.setdefault(res.outcome, repr(exc)[:300])
            with shared.lock:
                shared.results.append(res)


def op_report(results: list[Result], wall: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for op in ("ingest", "search"):
        rs = [r for r in results if r.op == op]
        ok = [r for r in rs if r.outcome == "ok"]
        outcomes = Counter(r.outcome for r in rs if r.outcome != "ok")
        rep: dict[str, Any] = {
            "requests": len(rs),
            "ok": len(ok),
            "requests_per_second": round(len(ok) / wall, 2) if wall else None,
            "latency_ms": latency_summary([r.latency for r in ok]),
            "errors": {k: v for k, v in sorted(outcomes.items()) if k != "http_429"},
            "rate_limited_429": outcomes.get("http_429", 0),
        }
        if op == "ingest":
            sent = sum(r.messages for r in ok)
            rep.update({
                "messages_accepted": sent,
                "messages_created": sum(r.created for r in ok),
                "messages_duplicate": sum(r.duplicate for r in ok),
                "messages_in_failed_requests": sum(r.messages for r in rs if r.outcome != "ok"),
                "messages_per_second": round(sent / wall, 2) if wall else None,
                "mean_batch": round(sent / len(ok), 1) if ok else None,
            })
        else:
            server = [r.server_ms for r in ok if r.server_ms is not None]
            rep.update({
                "server_elapsed_ms": latency_summary([s / 1000 for s in server]),
                "mean_candidates": (round(sum(r.candidates or 0 for r in ok) / len(ok), 2)
                                    if ok else None),
                "empty_results": sum(1 for r in ok if not r.candidates),
                "searches_with_dropped_strategy": sum(1 for r in ok if r.dropped),
                "dropped_strategies": dict(Counter(s for r in ok for s in r.dropped)),
            })
        out[op] = rep
    return out


def window_line(results: list[Result], t_from: float, t_to: float) -> str:
    parts = []
    for op in ("ingest", "search"):
        rs = [r for r in results if r.op == op and t_from <= r.t + r.latency < t_to]
        ok = [r for r in rs if r.outcome == "ok"]
        p95 = percentile([r.latency * 1000 for r in ok], 95)
        span = max(t_to - t_from, 1e-9)
        extra = f" {sum(r.messages for r in ok) / span:.1f} msg/s" if op == "ingest" else ""
        parts.append(f"{op} {len(ok) / span:.1f} req/s{extra} p95 "
                     f"{p95 if p95 is None else round(p95)} ms err {len(rs) - len(ok)}")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------
# Database checks (this process, bench.settings, RLS through account_context)
# ---------------------------------------------------------------------------------------


def pipeline_counts(account_id: Any) -> dict[str, int]:
    from django.db import connections
    from django.db.models import Exists, OuterRef

    from knowledge.models import Knowledge, Message
    from memhouse.core.tenancy import account_context
    from retrieval.models import KnowledgeVector
    from retrieval.vectors import EMBEDDABLE_STATES

    try:
        with account_context(account_id):
            stored = Message.objects.count()
            extracted = Message.objects.filter(extracted_at__isnull=False).count()
            unembedded = Knowledge.objects.filter(state__in=EMBEDDABLE_STATES).filter(
                ~Exists(KnowledgeVector.objects.filter(knowledge_id=OuterRef("pk")))).count()
    finally:
        connections.close_all()
    return {"stored": stored, "extracted": extracted, "pending": stored - extracted,
            "embeddable_without_vector": unembedded}


def searchable_conversations(account_id: Any, convs: list[Any]) -> frozenset[str]:
    from django.db import connections

    from knowledge.models import Knowledge
    from memhouse.core.tenancy import account_context

    try:
        with account_context(account_id):
            scopes = set(Knowledge.objects.filter(state="active")
                         .values_list("scope_id", flat=True).distinct())
    finally:
        connections.close_all()
    return frozenset(c.sample_id for c in convs if c.scope_id in scopes)


def preload(account_id: Any, convs: list[Any], batch_size: int) -> dict[str, Any]:
    """Ingest whole conversations in this process with the eager pipeline (the bench
    process keeps MEMHOUSE_CELERY_EAGER's default, true) before the clock starts, with
    the round-0 client ids, so searches meet a populated corpus from the first second."""
    from django.db import connections

    from knowledge.ingest.services import IncomingMessage, messages_ingest
    from knowledge.models import Peer
    from memhouse.core.principal import Principal
    from memhouse.core.tenancy import account_context

    t = time.monotonic()
    with account_context(account_id):
        agent = Peer.objects.get(key="load-agent")
    principal = Principal(account_id=account_id, peer=agent, via="api_key",
                          scope_paths=("/",), act_for_all=True)
    n = 0
    plan = batch_plan(convs, batch_size)
    for batch in plan:
        if batch.round > 0:
            break
        msgs = [IncomingMessage(text=tt.text, occurred_at=tt.occurred_at,
                                client_message_id=cid,
                                peer_key=batch.conv.peer_keys[tt.speaker],
                                metadata={"dia_id": tt.dia_id, "round": 0})
                for tt, cid in zip(batch.turns, batch.client_ids(), strict=True)]
        with account_context(account_id):  # the eager pipeline runs at this commit
            messages_ingest(principal=principal, scope_path=batch.conv.scope_path,
                            messages=msgs, session_id=batch.session_key)
        n += len(msgs)
    connections.close_all()
    return {"conversations": [c.sample_id for c in convs], "messages": n,
            "seconds": round(time.monotonic() - t, 1)}


def final_counts(account_id: Any, accepted: list[str], attempted: list[str]) -> dict[str, Any]:
    from django.db import connections
    from django.db.models import Count

    from knowledge.models import Knowledge, KnowledgeSource, Message
    from memhouse.core.tenancy import account_context
    from retrieval.models import EntityMention, KnowledgeVector

    accepted_set, attempted_set = set(accepted), set(attempted)
    try:
        with account_context(account_id):
            stored_ids: set[str] = set()
            ids = sorted(attempted_set)
            for i in range(0, len(ids), 2000):
                stored_ids.update(Message.objects.filter(
                    client_message_id__in=ids[i:i + 2000]).values_list("client_message_id",
                                                                       flat=True))
            total = Message.objects.count()
            by_state = dict(Knowledge.objects.values_list("state").annotate(n=Count("id"))
                            .values_list("state", "n"))
            out = {
                "messages_stored_total": total,
                "accepted_ids_stored": len(accepted_set & stored_ids),
                "messages_lost": len(accepted_set - stored_ids),
                "lost_ids_sample": sorted(accepted_set - stored_ids)[:20],
                "stored_from_failed_requests": len((attempted_set - accepted_set) & stored_ids),
                "knowledge_by_state": by_state,
                "knowledge_sources": KnowledgeSource.objects.count(),
                "vectors": KnowledgeVector.objects.count(),
                "entity_mentions": EntityMention.objects.count(),
            }
    finally:
        connections.close_all()
    return out


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def build_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True, help="a LoCoMo JSON file")
    ap.add_argument("--out", required=True, help="result JSON")
    ap.add_argument("--duration", type=float, default=180, help="seconds of load")
    ap.add_argument("--ingest-workers", type=int, default=2)
    ap.add_argument("--search-workers", type=int, default=2)
    ap.add_argument("--ingest-rate", type=float, default=20,
                    help="target messages/s over all ingest workers (0 = as fast as "
                         "the server answers, closed loop)")
    ap.add_argument("--search-rate", type=float, default=0,
                    help="target searches/s over all search workers (0 = closed loop)")
    ap.add_argument("--batch-size", type=int, default=20, help="turns per POST /messages")
    ap.add_argument("--profile", default=None, help="search profile (default: the server's)")
    ap.add_argument("--drain-timeout", type=float, default=600,
                    help="max seconds to wait for the pipeline after the load")
    ap.add_argument("--limit-conversations", type=int, default=None)
    ap.add_argument("--preload-conversations", type=int, default=1,
                    help="conversations ingested in-process (eager pipeline) before the "
                         "clock, so searches meet knowledge from the start (0 = none)")
    ap.add_argument("--db-name", default="load")
    ap.add_argument("--keep-db", action="store_true")
    ap.add_argument("--port", type=int, default=0, help="server port (0 = a free one)")
    ap.add_argument("--redis-db", type=int, default=12,
                    help="private Redis database number on 127.0.0.1:6379 (flushed at start)")
    ap.add_argument("--rate-limit", type=int, default=1_000_000,
                    help="MEMHOUSE_RATE_LIMIT_PER_MINUTE for the server (raised so the "
                         "bench measures the service, not the throttle)")
    ap.add_argument("--server", choices=("auto", "gunicorn", "runserver"), default="auto")
    ap.add_argument("--gunicorn-workers", type=int, default=2)
    ap.add_argument("--gunicorn-threads", type=int, default=1,
                    help="1 = sync workers (the Dockerfile); more = gthread")
    ap.add_argument("--worker-concurrency", type=int, default=1)
    ap.add_argument("--worker-pool", default="prefork")
    ap.add_argument("--progress-every", type=float, default=10)
    ap.add_argument("--seed", type=int, default=7)
    return ap.parse_args(argv)


def setup_account(convs: list[Any]) -> tuple[Any, str]:
    from django.db import connections, transaction

    from knowledge import services
    from memhouse.core.tenancy import account_context

    with transaction.atomic():
        account = services.account_create(name="Load bench", slug="load-bench")
    with account_context(account.id):
        agent = services.peer_create(account_id=account.id, key="load-agent", kind="agent",
                                     display_name="load bench agent")
        for conv in convs:
            conv.scope_path = f"/locomo/{conv.sample_id}"
            conv.scope_id = services.scope_ensure(account_id=account.id,
                                                  path=conv.scope_path).id
            for name in conv.speakers:
                key = f"{conv.sample_id}:{common._slug(name)}"
                services.peer_create(account_id=account.id, key=key, kind="human",
                                     display_name=name)
                conv.peer_keys[name] = key
        _, api_key = services.credential_create(account_id=account.id, peer=agent,
                                                name="load bench", act_for_all=True)
    connections.close_all()
    return account.id, api_key


def warm_up(base: str, key: str, questions: list[tuple[Any, str, str]], n: int) -> int:
    """Untimed searches, n at once, so every server worker process (likely) has loaded
    its embedding model before the clock starts."""
    from memhouse.client import MemHouseClient

    def one(i: int) -> None:
        conv, question, speaker = questions[i % len(questions)]
        with MemHouseClient(base, key, timeout=180, retries=0) as mh:
            mh.search(question, scope=conv.scope_path, peer_key=conv.peer_keys[speaker])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return n


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv: list[str] | None = None) -> int:
    args = build_args(argv)
    if not args.port:
        args.port = free_port()
    loadavg_start = os.getloadavg()
    generated_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    dbname = common.bootstrap(args.db_name, keep_db=args.keep_db)
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    import redis
    from django.conf import settings

    redis_url = f"redis://127.0.0.1:6379/{args.redis_db}"
    broker = redis.Redis.from_url(redis_url, socket_timeout=2)
    broker.flushdb()  # our private database only: stale tasks of an earlier run

    convs = common.load_locomo(args.dataset, args.limit_conversations)
    if not convs:
        raise SystemExit("no conversations in the dataset")
    account_id, api_key = setup_account(convs)
    turns = sum(1 for c in convs for t in c.turns if t.text.strip())
    rng = random.Random(args.seed)
    questions = [(c, qa["question"], question_reader(qa["question"], c.speakers))
                 for c in convs for qa in c.qa if qa.get("question")]
    rng.shuffle(questions)
    common.log(f"{len(convs)} conversations, {turns} turns, {len(questions)} questions")
    preloaded: dict[str, Any] = {"conversations": [], "messages": 0, "seconds": 0.0}
    if args.preload_conversations > 0:
        import logging

        logging.getLogger("celery").setLevel(logging.WARNING)
        preloaded = preload(account_id, convs[: args.preload_conversations], args.batch_size)
        common.log(f"preloaded {preloaded}")

    tmp = Path(tempfile.mkdtemp(prefix="memhouse_load_"))
    (tmp / "memhouse_load_settings.py").write_text(SUBPROCESS_SETTINGS)
    env = child_env(settings_dir=str(tmp), redis_url=redis_url, rate_limit=args.rate_limit)
    base = f"http://127.0.0.1:{args.port}"
    server, server_info = start_server(args, env, tmp)
    worker, worker_info = start_worker(args, env, tmp)
    procs = [server, worker]
    sampler = TreeSampler({"server": server.pid, "worker": worker.pid}).start()
    pg_sampler = common.MemorySampler(dbname).start()
    payload: dict[str, Any] = {}
    try:
        import httpx


        t = time.monotonic()
        wait_for(lambda: httpx.get(base + "/healthz", timeout=2).status_code == 200,
                 180, "server", procs)
        wait_for(lambda: "ready." in (tmp / "worker.log").read_text(errors="replace"),
                 180, "worker", procs)
        ready = httpx.get(base + "/readyz", timeout=30).json()
        warmups = warm_up(base, api_key, questions,
                          2 * (args.gunicorn_workers if "gunicorn" in server_info["kind"]
                               else 1))
        startup_s = time.monotonic() - t
        common.log(f"server ({server_info['kind']}) and worker ready in {startup_s:.1f}s; "
                   f"readyz {ready}")

        started = time.monotonic()
        shared = Shared(deadline=started + args.duration, started=started,
                        plan=batch_plan(convs, args.batch_size,
                                        frozenset(preloaded["conversations"])),
                        ingest_rate=args.ingest_rate, search_rate=args.search_rate,
                        searchable=searchable_conversations(account_id, convs))
        threads = [threading.Thread(target=ingest_worker, args=(shared, base, api_key),
                                    name=f"ingest-{i}", daemon=True)
                   for i in range(args.ingest_workers)]
        step = max(1, len(questions) // max(1, args.search_workers))
        threads += [threading.Thread(target=search_worker,
                                     args=(shared, base, api_key, questions, i * step,
                                           args.profile),
                                     name=f"search-{i}", daemon=True)
                    for i in range(args.search_workers)]
        for th in threads:
            th.start()
        last = 0.0
        progress: list[dict[str, Any]] = []
        while any(th.is_alive() for th in threads):
            time.sleep(0.5)
            now = time.monotonic() - started
            if now - last >= args.progress_every:
                with shared.lock:
                    snapshot = list(shared.results)
                backlog = broker.llen("celery")
                with contextlib.suppress(Exception):
                    shared.searchable = searchable_conversations(account_id, convs)
                common.log(f"t={now:5.0f}s {window_line(snapshot, last, now)}; "
                           f"broker queue {backlog}; load {os.getloadavg()[0]:.2f}")
                progress.append({"t": round(now, 1), "broker_queue": backlog,
                                 "loadavg_1m": os.getloadavg()[0],
                                 "requests_done": len(snapshot),
                                 "searchable_conversations": len(shared.searchable)})
                last = now
            for p in procs:
                if p.poll() is not None:
                    common.log(f"a subprocess exited early ({p.returncode}); stopping load")
                    shared.deadline = 0
        wall = time.monotonic() - started
        loadavg_after_load = os.getloadavg()
        at_end_of_load = pipeline_counts(account_id)
        common.log(f"load done in {wall:.1f}s; {at_end_of_load}")

        # Drain: the pipeline finished every stored message and every vector exists.
        drain_start = time.monotonic()
        drained = False
        counts = at_end_of_load
        while time.monotonic() - drain_start < args.drain_timeout:
            counts = pipeline_counts(account_id)
            queue = broker.llen("celery")
            unacked = broker.hlen("unacked")
            if (counts["pending"] == 0 and counts["embeddable_without_vector"] == 0
                    and queue == 0 and unacked == 0):
                drained = True
                break
            if worker.poll() is not None:
                break
            common.log(f"draining: {counts}, broker queue {queue}, unacked {unacked}")
            time.sleep(5)
        drain_s = time.monotonic() - drain_start
        common.log(f"drained={drained} after {drain_s:.1f}s: {counts}")

        results = shared.results
        ops = op_report(results, wall)
        final = final_counts(account_id, shared.accepted_ids, shared.attempted_ids)
        procs_mem = sampler.stop()
        pg_mem = pg_sampler.stop()
        errors_total = sum(sum(ops[o]["errors"].values()) for o in ops)
        payload = {
            "benchmark": "load",
            "dataset": str(Path(args.dataset).resolve()),
            "conversations": [c.sample_id for c in convs],
            "generated_at": generated_at,
            "git_commit": git_commit(),
            "duration_seconds": args.duration,
            "load_wall_seconds": round(wall, 2),
            "startup_seconds": round(startup_s, 1),
            "warmup_searches": warmups,
            "preloaded": preloaded,
            "operations": ops,
            "totals": {
                "requests": len(results),
                "requests_ok": sum(1 for r in results if r.outcome == "ok"),
                "requests_per_second": round(
                    sum(1 for r in results if r.outcome == "ok") / wall, 2),
                "errors": errors_total,
                "rate_limited_429": sum(ops[o]["rate_limited_429"] for o in ops),
                "error_samples": shared.error_samples,
            },
            "messages": {
                "sent": len(shared.attempted_ids),
                "accepted": ops["ingest"]["messages_accepted"],
                "stored": final["accepted_ids_stored"],
                "lost": final["messages_lost"],
                "lost_ids_sample": final["lost_ids_sample"],
                "stored_from_failed_requests": final["stored_from_failed_requests"],
                "stored_total_in_account": final["messages_stored_total"],
                "preloaded_in_process": preloaded["messages"],
                "dataset_rounds": max((int(i.split(":")[1][1:]) for i in shared.attempted_ids),
                                      default=-1) + 1,
            },
            "pipeline": {
                "at_end_of_load": at_end_of_load,
                "after_drain": counts,
                "finished": counts["extracted"],
                "pending": counts["pending"],
                "drained": drained,
                "drain_seconds": round(drain_s, 1),
                "drain_timeout_seconds": args.drain_timeout,
                "messages_per_second_incl_drain": round(
                    counts["extracted"] / (wall + drain_s), 2) if wall + drain_s else None,
            },
            "knowledge_by_state": final["knowledge_by_state"],
            "derived_rows": {k: final[k] for k in ("knowledge_sources", "vectors",
                                                    "entity_mentions")},
            "memory": {"server": procs_mem["server"], "worker": procs_mem["worker"],
                       "bench_client_peak_rss_mb": common.python_peak_rss_mb(),
                       "postgres": pg_mem},
            "logs": {"server": log_counts(tmp / "server.log"),
                     "worker": log_counts(tmp / "worker.log")},
            "progress": progress,
            "config": {
                "database": dbname,
                "kept_database": args.keep_db,
                "server": server_info["kind"],
                "server_command": server_info["command"],
                "worker": worker_info["kind"],
                "worker_command": worker_info["command"],
                "address": base,
                "broker": redis_url,
                "celery_eager": False,
                "rate_limit_per_minute": args.rate_limit,
                "ingest_workers": args.ingest_workers,
                "search_workers": args.search_workers,
                "ingest_rate_target_msgs_per_s": args.ingest_rate,
                "search_rate_target_per_s": args.search_rate,
                "batch_size": args.batch_size,
                "profile": args.profile or "server default",
                "client": "memhouse.client.MemHouseClient(retries=0, timeout=60), one per thread",
                "db_conn_max_age": settings.DATABASES["default"].get("CONN_MAX_AGE"),
                "embedder_threads": settings.MEMHOUSE_EMBEDDER_THREADS,
                "readyz": ready,
                "cpu_count": os.cpu_count(),
                "loadavg_start": loadavg_start,
                "loadavg_after_load": loadavg_after_load,
                "loadavg_end": os.getloadavg(),
                "seed": args.seed,
            },
        }
        common.write_json(args.out, payload)
        print_summary(payload, args.out)
    finally:
        with contextlib.suppress(Exception):
            sampler.stop()
        with contextlib.suppress(Exception):
            pg_sampler.stop()
        for p in (server, worker):
            stop_process(p)
        if payload:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            common.log(f"failed; subprocess logs kept in {tmp}")
    ok = (payload["totals"]["errors"] == 0 and payload["messages"]["lost"] == 0)
    return 0 if ok else 1


def print_summary(p: dict[str, Any], out: str) -> None:
    ing, sea, m = p["operations"]["ingest"], p["operations"]["search"], p["messages"]
    lines = [
        f"load: {p['load_wall_seconds']}s, {p['config']['server']}, "
        f"{p['config']['worker']}, cpus {p['config']['cpu_count']}, loadavg "
        f"{p['config']['loadavg_start'][0]:.2f} -> {p['config']['loadavg_end'][0]:.2f}",
        f"ingest: {ing['ok']}/{ing['requests']} ok, {ing['requests_per_second']} req/s, "
        f"{ing['messages_per_second']} msgs/s, p50/p95/p99 {ing['latency_ms']['p50']}/"
        f"{ing['latency_ms']['p95']}/{ing['latency_ms']['p99']} ms, errors {ing['errors']}, "
        f"429 {ing['rate_limited_429']}",
        f"search: {sea['ok']}/{sea['requests']} ok, {sea['requests_per_second']} req/s, "
        f"p50/p95/p99 {sea['latency_ms']['p50']}/{sea['latency_ms']['p95']}/"
        f"{sea['latency_ms']['p99']} ms (server {sea['server_elapsed_ms']['p50']}/"
        f"{sea['server_elapsed_ms']['p95']}), errors {sea['errors']}, "
        f"429 {sea['rate_limited_429']}, with a dropped strategy "
        f"{sea['searches_with_dropped_strategy']}",
        f"messages: sent {m['sent']}, accepted {m['accepted']}, stored {m['stored']}, "
        f"lost {m['lost']}; pipeline finished {p['pipeline']['finished']}, pending "
        f"{p['pipeline']['pending']} (drained {p['pipeline']['drained']} in "
        f"{p['pipeline']['drain_seconds']}s)",
        f"knowledge: {p['knowledge_by_state']}",
        f"peak RSS: server {p['memory']['server']['peak_rss_mb']} MB, worker "
        f"{p['memory']['worker']['peak_rss_mb']} MB -> {out}",
    ]
    for line in lines:
        common.log(line)


if __name__ == "__main__":
    raise SystemExit(main())
