"""Print the headline figures of bench/results/*.json as Markdown (for bench/README.md).

    .venv/bin/python bench/report.py [--ingest bench/results/ingest.json]
        [--retrieval bench/results/retrieval.json] [--control FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

SYSTEMS = ("balanced", "thorough", "dense_baseline", "dense_baseline_speaker",
           "fts_baseline", "fts_baseline_speaker", "hybrid_baseline_speaker")
PEER_KEYS = ("recall_at_10", "session_recall_any_at_5", "session_recall_any_at_10",
             "session_recall_all_at_5", "session_recall_all_at_10", "ndcg_at_10",
             "session_ndcg_at_10", "session_recall_any_at_5_dedup10")


def _f(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def _la(v: Any) -> str:
    return f"{v[0]:.1f}" if v else "?"


def recall_table(r: dict[str, Any], title: str) -> list[str]:
    out = [f"**{title}** (questions: {r['systems']['balanced']['questions']})", "",
           "| system | k | overall | 1 multi-hop | 2 temporal | 3 open-domain | 4 single-hop |",
           "|---|---|---|---|---|---|---|"]
    for s in SYSTEMS:
        if s not in r["systems"]:
            continue
        for k in (5, 10, 20):
            v = r["systems"][s][f"recall_at_{k}"]
            out.append(f"| {s} | {k} | {_f(v['overall'])} | {_f(v['1'])} | {_f(v['2'])} | "
                       f"{_f(v['3'])} | {_f(v['4'])} |")
    c = r.get("governed_ceiling", {}).get("evidence_share_with_searchable_knowledge")
    if c:
        out.append(f"| ceiling: evidence turns with searchable knowledge | - | {_f(c['overall'])}"
                   f" | {_f(c['1'])} | {_f(c['2'])} | {_f(c['3'])} | {_f(c['4'])} |")
    out.append("")
    out += ["| profile | p50 ms | p95 ms | p99 ms | searches with a dropped strategy (timeout) "
            "| query embedding p50/p95 ms |", "|---|---|---|---|---|---|"]
    for p in ("balanced", "thorough"):
        v = r["systems"].get(p)
        if not v:
            continue
        lat = v["latency_ms"]
        drops = max([n for k, n in v["dropped_strategies"].items() if k.endswith(":timeout")],
                    default=0)
        qv = v["strategy_timings"]["strategy_body_ms"].get("phase:query_vector", {})
        out.append(f"| {p} | {lat['p50']} | {lat['p95']} | {lat['p99']} | {drops} "
                   f"(max over strategies) | {qv.get('p50')}/{qv.get('p95')} |")
    out.append("")
    return out


def peer_table(r: dict[str, Any]) -> list[str]:
    """Turn- and session-level metrics side by side (overall, categories 1-4)."""
    if "session_recall_any_at_5" not in r["systems"].get("balanced", {}):
        return []
    out = ["**Peer-comparable metrics** (overall over categories 1-4)", "",
           "| system | " + " | ".join(PEER_KEYS) + " |", "|---" * (len(PEER_KEYS) + 1) + "|"]
    for s in SYSTEMS:
        if s in r["systems"]:
            out.append(f"| {s} | " + " | ".join(_f(r["systems"][s][k]["overall"])
                                                  for k in PEER_KEYS) + " |")
    cv = r.get("cross_validation")
    if cv:
        out += ["", f"**Leave-one-conversation-out, balanced** ({cv['grid_points']} grid "
                    f"points, re-fusion matches engine {cv['refusion_matches_engine']})", "",
                "| parameters | " + " | ".join(PEER_KEYS) + " |",
                "|---" * (len(PEER_KEYS) + 1) + "|"]
        for name in ("shipped", "in_sample_optimum", "cross_validated"):
            out.append(f"| {name} | " + " | ".join(_f(cv[name][k]["overall"])
                                                    for k in PEER_KEYS) + " |")
        out += ["", "| held out | chosen head / rrf_k / semantic / entity_match | train "
                    "recall@10 | held-out recall@10 | shipped on held-out |",
                "|---|---|---|---|---|"]
        for f in cv["folds"]:
            c = f["chosen"]
            out.append(f"| {f['held_out']} ({f['questions']}) | {c['head']} / {c['rrf_k']} / "
                       f"{c['weights']['semantic']} / {c['weights']['entity_match']} | "
                       f"{_f(f['train_recall_at_10'])} | {_f(f['held_out_recall_at_10'])} | "
                       f"{_f(f['shipped_held_out_recall_at_10'])} |")
    out.append("")
    return out


def _threads(config: dict[str, Any]) -> Any:
    """Intra-op threads of the embedder (older results recorded only torch's)."""
    return config.get("embedder_threads", config.get("torch_threads"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingest", default="bench/results/ingest.json",
                    help="'' (or an empty file) to leave the ingest figures out")
    ap.add_argument("--retrieval", default="bench/results/retrieval.json")
    ap.add_argument("--control", default=None,
                    help="a second retrieval JSON (e.g. --torch-threads 2) to print too")
    args = ap.parse_args()
    lines: list[str] = []
    if args.ingest and Path(args.ingest).is_file() and Path(args.ingest).stat().st_size:
        i = json.loads(Path(args.ingest).read_text())
        pg = i["postgres"]
        lines += ["**Ingest** (`bench/results/ingest.json`)", "",
                  f"- {i['messages']} turns in {i['wall_seconds']} s = "
                  f"**{i['messages_per_second']} messages/s** through the whole pipeline "
                  f"(1-min load average {_la(i['config'].get('loadavg_start'))} -> "
                  f"{_la(i['config'].get('loadavg_end'))} on {i['config']['cpu_count']} cores, "
                  f"embedder threads {_threads(i['config'])})",
                  f"- knowledge by state: {i['knowledge_by_state']}; claims per turn "
                  f"{i['claims_per_turn']}, active per turn {i['active_per_turn']}",
                  f"- peak RSS: benchmark process {i['python_peak_rss_mb']} MB; PostgreSQL "
                  f"backend private peak {pg['bench_backends_private_peak_mb']} MB "
                  f"(VmHWM {pg['bench_backend_vmhwm_max_mb']} MB incl. shared), whole server "
                  f"private {pg['server_private_peak_mb']} MB, shared buffers touched "
                  f"{pg['shared_buffers_touched_peak_mb']} MB", ""]
    if Path(args.retrieval).exists():
        r = json.loads(Path(args.retrieval).read_text())
        lines += recall_table(r, f"LoCoMo evidence recall (`{args.retrieval}`)")
        lines += peer_table(r)
        if r.get("scale"):
            lines += ["**Scale: balanced search over synthetic statements**", "",
                      "| statements in the Account (all Accounts) | p50 ms | p95 ms | p99 ms | "
                      "searches dropping a strategy | semantic uses HNSW | query embedding "
                      "p50/p95 ms | HNSW build s | load avg after |",
                      "|---|---|---|---|---|---|---|---|---|"]
            for n, v in r["scale"].items():
                if "latency_ms" not in v:
                    lines.append(f"| {n} | {v.get('error', 'not finished')} |")
                    continue
                lat, qe = v["latency_ms"], v["query_embedding_ms"]
                hnsw = v["explain"].get("semantic", {}).get("uses_hnsw_index")
                la = ", ".join(f"{x:.1f}" for x in v.get("loadavg_after", []))
                lines.append(f"| {n} ({v['total_rows_all_accounts']}) | {lat['p50']} | "
                             f"{lat['p95']} | {lat['p99']} | "
                             f"{v['searches_with_timeout_drop']}/{v['searches']} | {hnsw} | "
                             f"{qe['p50']}/{qe['p95']} | {v['hnsw_build_seconds']} | {la} |")
            lines.append("")
    if args.control and Path(args.control).exists():
        c = json.loads(Path(args.control).read_text())
        lines += recall_table(c, f"Control run (`{args.control}`, embedder threads "
                                 f"{_threads(c['config'])})")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
