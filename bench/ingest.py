"""LoCoMo ingest throughput through the whole MemHouse pipeline.

    .venv/bin/python bench/ingest.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --out bench/results/ingest.json [--limit-conversations N] [--keep-db]

Every turn becomes a Message (one Account, one scope /locomo/<sample_id> per conversation,
peers = the two speakers), ingested per session through knowledge.ingest.services.
messages_ingest with the eager Celery setting, so each batch runs extraction, gates and
embedding before the call returns. Output keys: see bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

from bench import common  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit-conversations", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=100,
                    help="max messages per messages_ingest call (a session is split)")
    ap.add_argument("--workers", type=int, default=1,
                    help="ingest conversations on N threads, like N Celery worker "
                         "processes (compose runs --concurrency 2); default 1")
    ap.add_argument("--keep-db", action="store_true")
    ap.add_argument("--db-name", default="ingest")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="override the embedder's intra-op threads (default: "
                         "MEMHOUSE_EMBEDDER_THREADS, 1)")
    args = ap.parse_args(argv)

    dbname = common.bootstrap(args.db_name, keep_db=args.keep_db)
    import logging

    logging.getLogger("celery").setLevel(logging.WARNING)  # one line per task otherwise
    threads = common.embedder_threads(args.torch_threads)

    loadavg_start = os.getloadavg()
    convs = common.load_locomo(args.dataset, args.limit_conversations)
    common.log(f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns")
    cpu0, pg0 = _process_cpu(), _postgres_cpu()
    account_id, stats = common.ingest_locomo(convs, batch_size=args.batch_size,
                                              workers=args.workers)
    cpu1, pg1 = _process_cpu(), _postgres_cpu()
    # CPU seconds, unlike wall, barely depend on what else loads the shared machine.
    stats["python_cpu_seconds"] = round(cpu1 - cpu0, 2)
    stats["python_cpu_ms_per_message"] = round(1000 * (cpu1 - cpu0) / stats["messages"], 2)
    if pg0 is not None and pg1 is not None:
        stats["postgres_cpu_seconds"] = round(pg1 - pg0, 2)
    from django.conf import settings

    payload = {
        "benchmark": "ingest",
        "dataset": str(Path(args.dataset).resolve()),
        "conversations": [c.sample_id for c in convs],
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **stats,
        "lifecycle": common.lifecycle_report(account_id),
        "config": {
            "database": dbname,
            "kept_database": args.keep_db,
            "batch_size": args.batch_size,
            "workers": args.workers,
            "celery_eager": settings.CELERY_TASK_ALWAYS_EAGER,
            "extractor": _extractor_name(),
            "embedder": _embedder_key(),
            "server": common.server_settings(),
            "cpu_count": os.cpu_count(),
            **threads,
            "loadavg_start": loadavg_start,
            "loadavg_end": os.getloadavg(),
        },
    }
    common.write_json(args.out, payload)
    common.log(f"{stats['messages']} messages in {stats['wall_seconds']}s = "
               f"{stats['messages_per_second']} msgs/s; states {stats['knowledge_by_state']}; "
               f"python peak RSS {stats['python_peak_rss_mb']} MB; CPU python "
               f"{stats['python_cpu_seconds']}s, postgres {stats.get('postgres_cpu_seconds')}s"
               f" -> {args.out}")
    return 0


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _postgres_cpu() -> float | None:
    """user+sys seconds of this benchmark's PostgreSQL server: the postmaster, its live
    children, and the children it has reaped (cutime/cstime: backends that closed)."""
    pid = common._postmaster_pid()
    if pid is None:
        return None
    tick = os.sysconf("SC_CLK_TCK")

    def stat(p: int) -> list[str]:
        with open(f"/proc/{p}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()

    try:
        fields = stat(pid)  # fields[11:15] = utime stime cutime cstime
        total = sum(int(x) for x in fields[11:15])
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            children = [int(c) for c in fh.read().split()]
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    for child in children:
        # One that exited in between is counted in the postmaster's cutime next time.
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            total += sum(int(x) for x in stat(child)[11:13])
    return total / tick


def _extractor_name() -> str:
    from governance.intake.pipeline import get_extractor

    e = get_extractor()
    return f"{e.name}/{e.version}"


def _embedder_key() -> str:
    from retrieval.embedding import get_embedder

    return get_embedder().identity.key


if __name__ == "__main__":
    raise SystemExit(main())
