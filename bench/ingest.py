"""LoCoMo ingest throughput through the whole MemHouse pipeline.

    .venv/bin/python bench/ingest.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --out bench/results/ingest.json [--limit-conversations N] [--keep-db] [--split]
        [--profile FILE]
    .venv/bin/python bench/ingest.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --out bench/results/ingest_long.json --long-texts [--profile FILE]
    .venv/bin/python bench/ingest.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --out bench/results/ingest_processes.json --processes 1,2,4

Every turn becomes a Message (one Account, one scope /locomo/<sample_id> per conversation,
peers = the two speakers), ingested per session through knowledge.ingest.services.
messages_ingest with the eager Celery setting, so each batch runs extraction, gates and
embedding before the call returns. With --processes the pipeline runs in real Celery
worker processes instead (bench/ingest_processes.py). Output keys: see bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

from bench import common, ingest_split  # noqa: E402


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
    ap.add_argument("--long-texts", action="store_true",
                    help="instead of LoCoMo chat: one message and one document per size "
                         "(--sizes, characters of LoCoMo turns joined) through the pipeline, "
                         "CPU seconds each, so the cost per length is visible")
    ap.add_argument("--sizes", default="1000,10000,100000",
                    help="--long-texts: text lengths in characters (a message longer than "
                         "MEMHOUSE_MAX_MESSAGE_CHARS is measured at that limit)")
    ap.add_argument("--profile", default=None,
                    help="write a cProfile (CPU time) here, read with python -m pstats: "
                         "of the LoCoMo ingest, or with --long-texts of the largest "
                         "size's runs")
    ap.add_argument("--split", action="store_true",
                    help="report CPU per message by part of the pipeline (encoder, "
                         "extraction, gates, placement, SQL, ...; bench/ingest_split.py) "
                         "as `split`")
    ap.add_argument("--processes", default=None,
                    help="process counts, e.g. 1,2,4: for each, N real Celery worker "
                         "processes (`celery -A memhouse worker`, concurrency 1, every "
                         "queue) against Redis and this PostgreSQL do the pipeline; "
                         "messages/s and CPU per process (bench/README.md, 'Worker "
                         "processes')")
    ap.add_argument("--feed", choices=("paced", "all"), default="paced",
                    help="--processes: post a conversation's next batch when its previous "
                         "one is extracted (paced: the in-process decisions), or every "
                         "batch at once (all)")
    ap.add_argument("--broker-url", default="redis://127.0.0.1:6379/9",
                    help="--processes: the Redis database of the runs (purged before and "
                         "after each)")
    ap.add_argument("--reference", default="",
                    help="--processes: compare with this in-process ingest.json instead of "
                         "running the in-process bench first; 'none' for no comparison")
    ap.add_argument("--timeout", type=float, default=3600.0,
                    help="--processes: seconds one run (and the reference) may take before "
                         "the bench stops its workers and fails")
    ap.add_argument("--worker-pool", choices=("prefork", "threads"), default="prefork",
                    help="--processes: each worker's pool (prefork: one pool process; "
                         "threads: the tasks run on threads of the worker process, so the "
                         "encoder of one batch, which releases the GIL, overlaps the "
                         "Python of another)")
    ap.add_argument("--worker-concurrency", type=int, default=1,
                    help="--processes: each worker's --concurrency (pool processes or "
                         "threads)")
    ap.add_argument("--worker-logs", default=None,
                    help="--processes: directory for the workers' logs (default: a new "
                         "temporary directory, named in the output)")
    args = ap.parse_args(argv)

    if args.processes:
        from bench import ingest_processes

        args.db_name = args.db_name if args.db_name != "ingest" else "ingest_procs"
        return ingest_processes.main(args)
    dbname = common.bootstrap(args.db_name, keep_db=args.keep_db)
    if args.long_texts:
        return _long_texts(args, dbname)
    import logging

    logging.getLogger("celery").setLevel(logging.WARNING)  # one line per task otherwise
    threads = common.embedder_threads(args.torch_threads)

    loadavg_start = os.getloadavg()
    convs = common.load_locomo(args.dataset, args.limit_conversations)
    common.log(f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns")
    with _measured(args) as measure:
        cpu0, pg0 = common.process_cpu(), common.postgres_cpu()
        account_id, stats = common.ingest_locomo(convs, batch_size=args.batch_size,
                                                  workers=args.workers)
        cpu1, pg1 = common.process_cpu(), common.postgres_cpu()
    if measure is not None:
        stats["split"] = measure.report(
            messages=stats["messages"], process_cpu=cpu1 - cpu0,
            postgres_cpu=pg1 - pg0 if pg0 is not None and pg1 is not None else None)
        common.log(ingest_split.line(stats["split"]))
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


@contextlib.contextmanager
def _measured(args: argparse.Namespace) -> Iterator[ingest_split.Split | None]:
    """--split and --profile around the LoCoMo ingest (the profile in CPU time)."""
    import cProfile

    split = ingest_split.Split().install() if args.split else None
    profiler = cProfile.Profile(time.process_time) if args.profile else None
    if profiler is not None:
        profiler.enable()
    try:
        yield split
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
            common.log(f"profile of the ingest -> {args.profile}")
        if split is not None:
            split.uninstall()


def _long_text(turns: list[str], size: int) -> str:
    """LoCoMo turns joined by spaces up to ``size`` characters (cut at a word boundary),
    from the first conversation on (each turn once up to the dataset's length)."""
    parts: list[str] = []
    length = 0
    i = 0
    while length < size:
        turn = turns[i % len(turns)].strip()
        i += 1
        if turn:
            parts.append(turn)
            length += len(turn) + 1
    text = " ".join(parts)
    return text if len(text) <= size else text[:size].rsplit(" ", 1)[0]


def _long_texts(args: argparse.Namespace, dbname: str) -> int:
    """One message and one document per size through the eager pipeline (extraction,
    gates, placement, embedding), each in a fresh scope: CPU seconds of this process and
    of PostgreSQL, and the encoder's share measured around its calls."""
    import cProfile
    import logging

    from django.conf import settings

    from knowledge import services
    from knowledge.ingest.services import IncomingMessage, document_create, messages_ingest
    from knowledge.models import Knowledge
    from memhouse.core.principal import Principal
    from memhouse.core.tenancy import account_context
    from retrieval.embedding import get_embedder

    logging.getLogger("celery").setLevel(logging.WARNING)  # one line per task otherwise
    threads = common.embedder_threads(args.torch_threads)
    convs = common.load_locomo(args.dataset)
    conv = convs[0]  # its speakers are the peers; the text runs on through the others
    turns = [t.text for c in convs for t in c.turns]
    speaker = conv.speakers[0]
    embedder = get_embedder()
    encoder = {"seconds": 0.0}
    embed_documents = embedder.embed_documents

    def timed(texts: Any, *args: Any, **kwargs: Any) -> Any:  # the encoder's own CPU
        t = common.process_cpu()
        try:
            return embed_documents(texts, *args, **kwargs)
        finally:
            encoder["seconds"] += common.process_cpu() - t

    embedder.embed_documents = timed  # type: ignore[method-assign,assignment]
    account = services.account_create(name="long texts", slug="long-texts")
    with account_context(account.id):
        importer = services.peer_create(account_id=account.id, key="bench-importer",
                                        kind="agent", display_name="bench importer")
        keys = {}
        for name in conv.speakers:
            keys[name] = services.peer_create(account_id=account.id, key=common._slug(name),
                                              kind="human", display_name=name).key
    principal = Principal(account_id=account.id, peer=importer, via="api_key",
                          scope_paths=("/",), act_for_all=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    profiler = cProfile.Profile(time.process_time) if args.profile else None  # CPU, not wall
    rows: list[dict[str, Any]] = []
    for size in sizes:
        for kind in ("message", "document"):
            limit = settings.MEMHOUSE_MAX_MESSAGE_CHARS if kind == "message" else size
            text = _long_text(turns, min(size, limit))
            path = f"/long/{kind}-{size}"
            with account_context(account.id):
                services.scope_ensure(account_id=account.id, path=path)
            encoder["seconds"] = 0.0
            profiling = size == max(sizes) and profiler is not None
            cpu0, pg0, wall0 = common.process_cpu(), common.postgres_cpu(), time.monotonic()
            if profiling and profiler is not None:
                profiler.enable()
            with account_context(account.id):  # the eager pipeline runs on commit
                if kind == "message":
                    messages_ingest(principal=principal, scope_path=path, messages=[
                        IncomingMessage(text=text, occurred_at=conv.turns[0].occurred_at,
                                        peer_key=keys[speaker])], session_id=path)
                else:
                    document_create(principal=principal, scope_path=path, title=path,
                                    content=text.encode())
            if profiling and profiler is not None:
                profiler.disable()
            cpu1, pg1, wall1 = common.process_cpu(), common.postgres_cpu(), time.monotonic()
            with account_context(account.id):
                statements = Knowledge.objects.filter(scope__path=path).count()
            row: dict[str, Any] = {"kind": kind, "size": size, "characters": len(text),
                   "statements": statements,
                   "python_cpu_seconds": round(cpu1 - cpu0, 3),
                   "encoder_cpu_seconds": round(encoder["seconds"], 3),
                   "python_cpu_seconds_excluding_encoder":
                       round(cpu1 - cpu0 - encoder["seconds"], 3),
                   "postgres_cpu_seconds": (round(pg1 - pg0, 3)
                                            if pg0 is not None and pg1 is not None else None),
                   "wall_seconds": round(wall1 - wall0, 3)}
            rows.append(row)
            common.log(f"{kind} {len(text)} chars: {statements} statements, CPU python "
                       f"{row['python_cpu_seconds']}s (encoder {row['encoder_cpu_seconds']}s), "
                       f"postgres {row['postgres_cpu_seconds']}s, wall {row['wall_seconds']}s")
    if profiler is not None:
        profiler.dump_stats(args.profile)
        common.log(f"profile of the {max(sizes)}-character runs -> {args.profile}")
    common.write_json(args.out, {
        "benchmark": "ingest-long-texts",
        "dataset": str(Path(args.dataset).resolve()),
        "conversation": conv.sample_id,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
        "config": {"database": dbname, "extractor": _extractor_name(),
                   "embedder": _embedder_key(), "max_message_chars":
                       settings.MEMHOUSE_MAX_MESSAGE_CHARS, "cpu_count": os.cpu_count(),
                   **threads, "loadavg": os.getloadavg()},
    })
    return 0


def _extractor_name() -> str:
    from governance.intake.pipeline import get_extractor

    e = get_extractor()
    return f"{e.name}/{e.version}"


def _embedder_key() -> str:
    from retrieval.embedding import get_embedder

    return get_embedder().identity.key


if __name__ == "__main__":
    raise SystemExit(main())
