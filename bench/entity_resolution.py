"""Entity resolution on LoCoMo dev: what a run would ask the model, per conversation.

No model is called. For each conversation scope this reads what dream-time resolution
reads (retrieval.entity_resolution._read_scope) and reports the candidate pairs, split by
source (name containment / initials, context-embedding neighbours), the pairs and model
calls one run would make under the bounds (MAX_PAIRS, PAIRS_PER_CALL), the prompt size and
the read time. These are cost figures: whether a pair is the same entity is the model's
decision, and LoCoMo has no alias labels to score it against (see bench/README.md).

    python bench/entity_resolution.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --out bench/results/entity_resolution.json [--reuse-db NAME]

`--reuse-db NAME` measures `bench_NAME` left by `bench/retrieval.py --keep-db --db-name
NAME` (same ingest); without it the conversations are ingested afresh.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import common

common.fix_sys_path()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reuse-db", default=None, metavar="NAME")
    ap.add_argument("--limit-conversations", type=int, default=None)
    args = ap.parse_args(argv)

    common.bootstrap(args.reuse_db or "entity_resolution", reuse_db=bool(args.reuse_db))
    convs = common.load_locomo(args.dataset, limit=args.limit_conversations)
    account_id = common.attach_locomo(convs) if args.reuse_db else None
    if account_id is None:
        account_id, _ = common.ingest_locomo(convs)
        common.rebuild_entity_index(account_id)

    from memhouse.core.tenancy import account_context
    from retrieval import entity_resolution as er
    from retrieval.entity_resolution import _prompt, _read_scope, _space_id, name_candidate

    with account_context(account_id):
        space_id = _space_id()
    per_conv: dict[str, Any] = {}
    totals = {"entities": 0, "candidates": 0, "name_candidates": 0,
              "embedding_candidates": 0, "asked_per_run": 0, "model_calls_per_run": 0}
    for conv in convs:
        t = time.monotonic()
        with account_context(account_id):
            read = _read_scope(account_id, conv.scope_id, space_id, need_candidates=True)
        seconds = time.monotonic() - t
        by_name = sum(1 for c in read.pairs if name_candidate(c.a, c.b))
        asked = min(len(read.pairs), er.MAX_PAIRS)
        calls = math.ceil(asked / er.PAIRS_PER_CALL)
        prompt = _prompt(read.pairs[:er.PAIRS_PER_CALL], read.contexts, read.surfaces)
        row = {"entities": len(read.ents), "candidates": len(read.pairs),
               "name_candidates": by_name, "embedding_candidates": len(read.pairs) - by_name,
               "asked_per_run": asked, "model_calls_per_run": calls,
               "first_prompt_chars": len(prompt), "read_seconds": round(seconds, 3),
               "examples": [(read.surfaces.get(c.a, c.a), read.surfaces.get(c.b, c.b),
                             round(c.score, 3)) for c in read.pairs[:8]]}
        per_conv[conv.sample_id] = row
        for k in totals:
            totals[k] += row[k]
        common.log(f"{conv.sample_id}: {row['entities']} entities, {row['candidates']} "
                   f"candidates ({by_name} by name), {asked} asked in {calls} calls, "
                   f"read {seconds:.2f}s")
    payload = {"dataset": args.dataset, "space_found": space_id is not None,
               "bounds": {"max_entities": er.MAX_ENTITIES,
                          "embedding_neighbours": er.EMBEDDING_NEIGHBOURS,
                          "embedding_floor": er.EMBEDDING_FLOOR, "max_pairs": er.MAX_PAIRS,
                          "pairs_per_call": er.PAIRS_PER_CALL},
               "totals": totals, "conversations": per_conv}
    common.write_json(args.out, payload)
    common.log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
