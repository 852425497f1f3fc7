"""The embedder alone: query latency, document throughput, load time and memory.

    .venv/bin/python bench/embedding.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --out bench/results/embedding.json [--embedder minilm-onnx] [--threads 1] \
        [--compare-with minilm-torch] [--documents 2000] [--repeats 3]

No database. Queries are the dataset's questions, each embedded `--repeats` times through
`embed_query` (no query cache: every call runs the model); documents are the first
`--documents` turns, embedded in batches of 64 as ingest does. `--compare-with` embeds the
questions and documents with a second embedder too and reports the cosine agreement (the
default ONNX int8 embedder against the fp32 sentence-transformers one, which needs the
memhouse[torch] extra) and both query latencies measured interleaved, so that machine load
falls on both alike. Output keys: see bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

from bench import common  # noqa: E402


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 3)


def _latency(values_s: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values_s]
    return {"p50": round(statistics.median(ms), 3), "p95": _pct(ms, 95), "p99": _pct(ms, 99),
            "mean": round(statistics.fmean(ms), 3), "n": len(ms)}


def _agreement(a: list[list[float]], b: list[list[float]]) -> dict[str, float]:
    import numpy as np

    cos = (np.asarray(a) * np.asarray(b)).sum(axis=1)  # both L2-normalised
    return {"min": round(float(cos.min()), 5), "p1": round(float(np.percentile(cos, 1)), 5),
            "p50": round(float(np.median(cos)), 5),
            "below_0_999": int((cos < 0.999).sum()), "n": len(cos)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--embedder", default="minilm-onnx", help="a MEMHOUSE_EMBEDDER name")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    ap.add_argument("--compare-with", default=None, help="a second MEMHOUSE_EMBEDDER name")
    ap.add_argument("--documents", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    from retrieval.embedding import build_embedder

    convs = common.load_locomo(args.dataset)
    questions = [q["question"] for c in convs for q in c.qa]
    documents = [t.text for c in convs for t in c.turns][: args.documents]
    loadavg_start = os.getloadavg()

    started = time.perf_counter()
    embedder = build_embedder(args.embedder, num_threads=args.threads)
    embedder.embed_query("load the model")
    load_s = time.perf_counter() - started
    common.log(f"{embedder.identity.key} loaded in {load_s:.2f}s")

    for text in questions[:20]:  # warm-up
        embedder.embed_query(text)
    timings: list[float] = []
    for _ in range(args.repeats):
        for text in questions:
            t0 = time.perf_counter()
            embedder.embed_query(text)
            timings.append(time.perf_counter() - t0)
    query = _latency(timings)
    common.log(f"query embedding p50 {query['p50']} ms, p95 {query['p95']} ms "
               f"({len(timings)} calls)")

    t0 = time.perf_counter()
    doc_vectors = embedder.embed_documents(documents, batch_size=64)
    doc_s = time.perf_counter() - t0
    docs_per_s = round(len(documents) / doc_s, 1)
    common.log(f"{len(documents)} documents in {doc_s:.2f}s = {docs_per_s}/s")

    payload: dict[str, Any] = {
        "benchmark": "embedding",
        "dataset": str(Path(args.dataset).resolve()),
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "embedder": embedder.identity.key,
        "load_seconds": round(load_s, 3),
        "query_embedding_ms": query,
        "documents": {"count": len(documents), "batch_size": 64,
                      "seconds": round(doc_s, 3), "per_second": docs_per_s},
        "python_peak_rss_mb": common.python_peak_rss_mb(),
        "config": {"embedder": args.embedder, "threads": args.threads,
                   "questions": len(questions), "repeats": args.repeats,
                   "cpu_count": os.cpu_count(), "loadavg_start": loadavg_start},
    }
    if args.compare_with:
        other = build_embedder(args.compare_with, num_threads=args.threads)
        other.embed_query("load the model")
        # Interleaved, one question each in turn: both see the same machine load.
        mine: list[float] = []
        theirs: list[float] = []
        for text in questions:
            for model, sink in ((embedder, mine), (other, theirs)):
                t0 = time.perf_counter()
                model.embed_query(text)
                sink.append(time.perf_counter() - t0)
        payload["interleaved_query_ms"] = {embedder.identity.key: _latency(mine),
                                           other.identity.key: _latency(theirs)}
        common.log(f"interleaved query p50: {_latency(mine)['p50']} ms vs "
                   f"{_latency(theirs)['p50']} ms")
        payload["agreement"] = {
            "with": other.identity.key,
            "questions": _agreement([embedder.embed_query(q) for q in questions],
                                    [other.embed_query(q) for q in questions]),
            "documents": _agreement(doc_vectors, other.embed_documents(documents)),
        }
        common.log(f"agreement with {other.identity.key}: {payload['agreement']}")
    payload["config"]["loadavg_end"] = os.getloadavg()
    common.write_json(args.out, payload)
    common.log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
