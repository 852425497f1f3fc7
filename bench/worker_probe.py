"""Loaded into the Celery workers `bench/ingest.py --processes` starts
(`celery -A memhouse worker -I bench.worker_probe`); nothing else imports it.

In each pool process, before it takes a task (``worker_process_init``; with the threads
pool, ``worker_ready`` of the worker process): load the embedding model, as the in-process
bench does before its clock starts, so the figures do not carry one model load per
process; then time the encoder's own CPU (the calling thread's) around every
``embed_documents`` call. After each task it publishes, in the broker's Redis (the
bench's own database), its pid's tasks and encoder CPU seconds, and ``warm`` once the
model is loaded: the bench starts the clock when every process is warm. After each
extraction task that succeeded (its transaction committed) it pushes the task's message
ids, so the bench's paced feed hears that a batch is done without polling PostgreSQL.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from typing import Any

from celery.signals import task_postrun, worker_process_init, worker_ready

from bench.common import EXTRACTED_KEY, PROBE_KEY

_state: dict[str, Any] = {"encoder_cpu_seconds": 0.0, "tasks": 0, "client": None}
_lock = threading.Lock()  # the threads pool runs tasks side by side


def _cpu() -> float:
    # The calling thread's CPU: with the threads pool another task's thread runs in the
    # same process meanwhile (the encoder's one intra-op thread is the caller's).
    return time.thread_time()


def _client() -> Any:
    if _state["client"] is None:
        import redis

        from memhouse.celery import app

        _state["client"] = redis.Redis.from_url(app.conf.broker_url)
    return _state["client"]


def _publish() -> None:
    with contextlib.suppress(Exception):  # a probe never fails a task
        _client().hset(PROBE_KEY, str(os.getpid()), json.dumps({
            "warm": True, "tasks": _state["tasks"],
            "encoder_cpu_seconds": round(_state["encoder_cpu_seconds"], 4)}))


@worker_ready.connect
def _warm_threads(**_: Any) -> None:
    # The threads pool runs tasks in the worker process itself, which gets no
    # worker_process_init (and this module is imported after worker_init); the bench
    # says which pool it started (a prefork parent's pool processes warm themselves).
    if os.environ.get("MEMHOUSE_BENCH_WORKER_POOL") == "threads":
        _warm()


@worker_process_init.connect
def _warm(**_: Any) -> None:
    from retrieval.embedding import get_embedder

    embedder = get_embedder()
    embedder.embed_documents(["warm up the embedding model"])
    original = embedder.embed_documents

    def timed(texts: Any, *args: Any, **kwargs: Any) -> Any:
        t = _cpu()
        try:
            return original(texts, *args, **kwargs)
        finally:
            spent = _cpu() - t
            with _lock:
                _state["encoder_cpu_seconds"] += spent

    embedder.embed_documents = timed  # type: ignore[method-assign]
    _publish()


@task_postrun.connect
def _after_task(task: Any = None, args: Any = None, kwargs: Any = None,
                state: str | None = None, **_: Any) -> None:
    with _lock:
        _state["tasks"] += 1
    if getattr(task, "name", None) == "governance.process_messages" and state == "SUCCESS":
        ids = (kwargs or {}).get("message_ids") or (list(args)[1] if args and len(args) > 1
                                                     else [])
        # Lost, the paced feed waits out its timeout and says which messages are left.
        with contextlib.suppress(Exception):
            _client().rpush(EXTRACTED_KEY, json.dumps([str(i) for i in ids]))
    _publish()
