"""The encoder on an ingest's own batches: CPU per message and per text.

    .venv/bin/python bench/ingest.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --out /tmp/ingest.json --keep-db --db-name enc
    .venv/bin/python bench/encoder_batches.py --db-name enc [--only conv-26] \
        [--threads 1] [--batch-tokens 320] [--mode joint|split] [--spin]

Reads every session of a kept `bench/ingest.py` database (its messages and the
statements they support in an embeddable state) and embeds each session as the pipeline
does: its messages and statements in one `embed_documents` call (`joint`), or the
statements and then the messages (`split`, as before issue 37). Prints one JSON line:
CPU (time.process_time, all of the encoder's threads) and wall per message and per text.
`--spin` lets onnxruntime's idle intra-op threads spin (its default; MemHouse turns it
off). No vectors are written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db-name", required=True, help="the --db-name of a --keep-db ingest")
    ap.add_argument("--only", default="", help="sessions whose id starts with this")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-tokens", type=int, default=None,
                    help="retrieval.embedding.ONNX_BATCH_TOKENS for this run")
    ap.add_argument("--mode", choices=("joint", "split"), default="joint")
    ap.add_argument("--spin", action="store_true")
    args = ap.parse_args(argv)

    os.environ["MEMHOUSE_BENCH_DB"] = f"bench_{args.db_name}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()
    from django.db import connection

    from knowledge.accounts import list_account_ids
    from memhouse.core.tenancy import account_context
    from retrieval import embedding

    if args.batch_tokens:
        embedding.ONNX_BATCH_TOKENS = args.batch_tokens
    # Every text through the network: the encoder's own cost, not its cache's.
    embedding.ONNX_DOCUMENT_CACHE = 0
    if args.spin:
        import onnxruntime as ort

        def spinning(model_path: str, num_threads: int) -> object:
            options = ort.SessionOptions()
            options.intra_op_num_threads = num_threads
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.log_severity_level = 3
            return ort.InferenceSession(model_path, sess_options=options,
                                        providers=["CPUExecutionProvider"])

        embedding._load_session = spinning  # type: ignore[assignment]
    batches: dict[str, tuple[list[str], list[str]]] = {}
    for account_id in list_account_ids():
        with account_context(account_id), connection.cursor() as cur:
            cur.execute(
                """SELECT s.external_id, m.text,
                          coalesce(array_agg(k.statement) FILTER (WHERE k.id IS NOT NULL), '{}')
                     FROM memhouse_message m JOIN memhouse_session s ON s.id = m.session_id
                     LEFT JOIN memhouse_knowledge_source ks ON ks.message_id = m.id
                     LEFT JOIN memhouse_knowledge k ON k.id = ks.knowledge_id
                          AND k.state IN ('active', 'provisional', 'held')
                    GROUP BY s.external_id, m.id, m.text
                    ORDER BY s.external_id, min(m.inserted_at)""")
            for session, text, statements in cur.fetchall():
                if session.startswith(args.only):
                    msgs, stmts = batches.setdefault(session, ([], []))
                    msgs.append(text)
                    stmts.extend(statements)
    encoder = embedding.OnnxEmbedder(num_threads=args.threads)
    encoder.embed_documents(["warm up the encoder"])
    messages = sum(len(m) for m, _ in batches.values())
    texts = sum(len(m) + len(s) for m, s in batches.values())
    if not messages:
        raise SystemExit("no messages: is --db-name a kept ingest database?")
    cpu, wall = time.process_time(), time.monotonic()
    for msgs, stmts in batches.values():
        if args.mode == "joint":
            encoder.embed_documents(msgs + stmts)
        else:
            encoder.embed_documents(stmts)
            encoder.embed_documents(msgs)
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    print(json.dumps({
        "threads": args.threads, "batch_tokens": embedding.ONNX_BATCH_TOKENS,
        "mode": args.mode, "spin": args.spin, "sessions": len(batches),
        "messages": messages, "texts": texts,
        "cpu_ms_per_message": round(1000 * cpu / messages, 2),
        "cpu_ms_per_text": round(1000 * cpu / texts, 3),
        "wall_ms_per_message": round(1000 * wall / messages, 2),
        "loadavg": os.getloadavg()[0]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
