"""Where an ingest's CPU goes: exclusive thread CPU per part of the pipeline.

`bench/ingest.py --split` installs this around the LoCoMo ingest. Each part is a set of
functions; a call into one charges the CPU of its thread (time.thread_time) to that part
until it returns or calls into another part, so nested parts are not counted twice
(`sql` inside `placement` is SQL's) and the parts add up to the measured threads' CPU.
The encoder's intra-op threads beyond the calling one (MEMHOUSE_EMBEDDER_THREADS > 1) and
any thread that is not an ingest worker are not in a thread's CPU: `unattributed` is the
process CPU the parts do not cover. `sql_wall` is the wall time spent inside the
database driver (PostgreSQL's work and the round trips; its CPU is measured apart).

CPU, not wall, because the machine is shared: another session's load moves wall time,
hardly the CPU a message costs.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# part -> (module, attribute path) of the functions charged to it. A module-level function
# is replaced in every loaded module that imported it by name; a name the code does not
# have (another version of it) is skipped.
PARTS: dict[str, tuple[tuple[str, str], ...]] = {
    "encoder": (("retrieval.embedding", "OnnxEmbedder.embed_documents"),
                ("retrieval.embedding", "SentenceTransformerEmbedder.embed_documents")),
    "extraction": (("knowledge.ingest.rule_extractor", "RuleBasedExtractor.extract"),),
    "gates": (("governance.intake.gates", "gate_a_refusal"),
              ("governance.intake.gates", "gate_b_placement"),
              ("governance.intake.gates", "refusal_evidence"),
              ("governance.intake.gates", "agent_claim_about_user"),
              ("governance.intake.named", "settle_subject")),
    "placement": (("governance.intake.pipeline", "BatchPlacer.place"),
                  ("governance.intake.pipeline", "BatchPlacer.finish"),
                  ("governance.intake.supersession", "settle_update")),
    "propose": (("knowledge.services", "knowledge_propose_many"),),
    "lifecycle": (("knowledge.lifecycle", "transition_many"),
                  ("knowledge.lifecycle", "record_creation_many")),
    "audit": (("knowledge.audit", "append_many"),),
    # Embedding around the encoder: reads, vector writes (before embed_batch: _embed_missing).
    "vectors": (("retrieval.vectors", "embed_batch"), ("retrieval.vectors", "_embed_missing")),
    "recall": (("retrieval.recall", "refresh"),),
    "entities": (("retrieval.entities", "index_knowledge"),),
    # The batch's read and the Python between the parts above (ObservedMessage, proposals).
    "intake_batch": (("governance.intake.pipeline", "process_messages_batch"),),
    # The request: checks, the message insert and its commit.
    "messages_ingest": (("knowledge.ingest.services", "messages_ingest"),),
    # Celery's eager run of a task around its body.
    "task_dispatch": (("celery.app.task", "Task.apply"),),
}
OTHER = "other"


class Split:
    """Exclusive thread CPU per part; install() patches, uninstall() restores."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.sql_wall = 0.0
        self.sql_queries = 0
        self._local = threading.local()
        self._lock = threading.Lock()
        self._undo: list[tuple[Any, str, Any]] = []

    # --- accounting -------------------------------------------------------------------

    def _stack(self) -> list[list[Any]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = [[OTHER, time.thread_time()]]
        return stack

    def _charge(self, part: str, seconds: float) -> None:
        with self._lock:
            self.cpu[part] = self.cpu.get(part, 0.0) + seconds

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        stack = self._stack()
        now = time.thread_time()
        top = stack[-1]
        self._charge(top[0], now - top[1])
        stack.append([name, now])
        with self._lock:
            self.calls[name] = self.calls.get(name, 0) + 1
        try:
            yield
        finally:
            now = time.thread_time()
            done = stack.pop()
            self._charge(done[0], now - done[1])
            stack[-1][1] = now

    def thread_started(self) -> None:
        """Start charging this thread's CPU to `other` (call where a worker begins)."""
        self._stack()

    def thread_done(self) -> None:
        stack = self._stack()
        now = time.thread_time()
        self._charge(stack[-1][0], now - stack[-1][1])
        stack[-1][1] = now

    # --- patching ---------------------------------------------------------------------

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        split = self

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with split.part(name):
                return fn(*args, **kwargs)

        timed.__split_original__ = fn  # type: ignore[attr-defined]
        return timed

    def install(self) -> Split:
        import importlib

        for name, targets in PARTS.items():
            for module_name, path in targets:
                module = importlib.import_module(module_name)
                owner: Any = module
                *outer, attr = path.split(".")
                for part in outer:
                    owner = getattr(owner, part)
                if attr not in vars(owner):
                    continue  # not in this version of the code
                original = vars(owner)[attr]
                wrapped = self._wrap(name, original)
                self._set(owner, attr, original, wrapped)
                if not outer:  # `from module import fn` elsewhere: patch those names too
                    for other in list(sys.modules.values()):
                        if other is module or other is None:
                            continue
                        if getattr(other, attr, None) is original:
                            self._set(other, attr, original, wrapped)
        self._install_sql()
        return self

    def _set(self, owner: Any, attr: str, original: Any, value: Any) -> None:
        setattr(owner, attr, value)
        self._undo.append((owner, attr, original))

    def _install_sql(self) -> None:
        from django.db.backends import utils

        split = self
        for cls in (utils.CursorWrapper,):
            for attr in ("_execute", "_executemany"):
                original = cls.__dict__[attr]

                def timed(self_: Any, *args: Any, __original: Any = original,
                          **kwargs: Any) -> Any:
                    wall = time.perf_counter()
                    try:
                        with split.part("sql"):
                            return __original(self_, *args, **kwargs)
                    finally:
                        with split._lock:
                            split.sql_wall += time.perf_counter() - wall
                            split.sql_queries += 1

                self._set(cls, attr, original, timed)

    def uninstall(self) -> None:
        while self._undo:
            owner, attr, original = self._undo.pop()
            setattr(owner, attr, original)

    # --- report -----------------------------------------------------------------------

    def report(self, *, messages: int, process_cpu: float, postgres_cpu: float | None
               ) -> dict[str, Any]:
        """Milliseconds of CPU per message by part, and the totals around them."""
        per = 1000.0 / max(messages, 1)
        parts = {name: round(seconds * per, 2)
                 for name, seconds in sorted(self.cpu.items(), key=lambda kv: -kv[1])}
        threads = sum(self.cpu.values())
        encoder = self.cpu.get("encoder", 0.0)
        return {
            "cpu_ms_per_message": parts,
            "calls": dict(sorted(self.calls.items())),
            "python_cpu_ms_per_message": round(process_cpu * per, 2),
            "python_cpu_ms_per_message_excluding_encoder": round((process_cpu - encoder) * per, 2),
            "unattributed_cpu_ms_per_message": round((process_cpu - threads) * per, 2),
            "postgres_cpu_ms_per_message": (round(postgres_cpu * per, 2)
                                            if postgres_cpu is not None else None),
            "sql_wall_ms_per_message": round(self.sql_wall * per, 2),
            "sql_queries_per_message": round(self.sql_queries / max(messages, 1), 2),
        }


def line(report: dict[str, Any]) -> str:
    parts = ", ".join(f"{k} {v}" for k, v in report["cpu_ms_per_message"].items())
    return (f"CPU ms/message: python {report['python_cpu_ms_per_message']} (excluding "
            f"encoder {report['python_cpu_ms_per_message_excluding_encoder']}), postgres "
            f"{report['postgres_cpu_ms_per_message']}; by part: {parts}; sql wall "
            f"{report['sql_wall_ms_per_message']} ms, {report['sql_queries_per_message']} "
            "queries/message")
