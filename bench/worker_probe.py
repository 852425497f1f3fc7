"""Loaded into the Celery workers `bench/ingest.py --processes` starts
(`celery -A memhouse worker -I bench.worker_probe`); nothing else imports it.

In each pool process, before it takes a task (``worker_process_init``): load the
embedding model, as the in-process bench does before its clock starts, so the figures
do not carry one model load per process; then time the encoder's own CPU around every
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
import resource
from typing import Any

from celery.signals import task_postrun, worker_process_init

from bench.common import EXTRACTED_KEY, PROBE_KEY

_state: dict[str, Any] = {"encoder_cpu_seconds": 0.0, "tasks": 0, "client": None}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
            _state["encoder_cpu_seconds"] += _cpu() - t

    embedder.embed_documents = timed  # type: ignore[method-assign]
    _publish()


@task_postrun.connect
def _after_task(task: Any = None, args: Any = None, kwargs: Any = None,
                state: str | None = None, **_: Any) -> None:
    _state["tasks"] += 1
    if getattr(task, "name", None) == "governance.process_messages" and state == "SUCCESS":
        ids = (kwargs or {}).get("message_ids") or (list(args)[1] if args and len(args) > 1
                                                     else [])
        # Lost, the paced feed waits out its timeout and says which messages are left.
        with contextlib.suppress(Exception):
            _client().rpush(EXTRACTED_KEY, json.dumps([str(i) for i in ids]))
    _publish()
