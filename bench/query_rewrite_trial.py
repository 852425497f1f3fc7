"""Trial, not shipped: does a declarative rewrite of the question help the dense lists?

    .venv/bin/python bench/query_rewrite_trial.py --lam 1.0 -- \
        --dataset /work/shared/eval/locomo/locomo_dev.json --skip-scale --reuse-db \
        --keep-db --db-name final --out /tmp/rewrite_1.json

Everything after `--` goes to bench/retrieval.py, whose LoCoMo part runs as usual except
that the engine's query vector becomes normalise(v(question) + lam * v(rewrite)), where
the rewrite drops the wh-word and the auxiliary ("When did Melanie paint a sunrise?" ->
"Melanie paint a sunrise"; "What books has Melanie read?" -> "Melanie read books"; "Would
Caroline pursue writing?" -> "Caroline pursue writing"), the form statements are stored
in. Lexical and the other strategies still read the question. `--show N` prints the
rewrites of the first N dev questions and stops. Results: bench/README.md, "Current
figures" (2026-12-05): not adopted.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

from bench import retrieval as rb  # noqa: E402

AUX = r"(is|are|was|were|do|does|did|has|have|had|can|could|would|will|should|might|may)"
WH = re.compile(r"^\s*(?:(?:in|on|at|for|with|from|to|by)\s+)?(what|which|who|whom|whose|when"
                r"|where|why|how(?:\s+(?:many|much|long|often|old|far))?)\b(.*?)\b" + AUX
                + r"\b\s+(.*?)\??\s*$", re.I)
YES_NO = re.compile(r"^\s*" + AUX + r"\s+(.*?)\??\s*$", re.I)


def declarative(question: str) -> str:
    """The question without its wh-word and auxiliary; the wh-phrase's noun goes last."""
    m = WH.match(question)
    if m:
        _, phrase, _, rest = m.groups()
        return f"{rest} {phrase.strip()}".strip()
    yn = YES_NO.match(question)
    return yn.group(2) if yn else question.rstrip("?")


def patch(lam: float) -> None:
    """Wrap bench/retrieval.py's run_profiles so every search embeds the mix."""
    original = rb.run_profiles

    def run_profiles(*args: Any, **kwargs: Any) -> Any:
        import numpy as np

        from retrieval import engine
        from retrieval.embedding import get_embedder

        space_and_vector = engine._space_and_vector

        def mixed(reader: Any, query: str) -> tuple[Any, tuple[float, ...]]:
            space, vec = space_and_vector(reader, query)
            rewrite = declarative(query)
            if not vec or rewrite == query:
                return space, vec
            v = np.asarray(vec) + lam * np.asarray(get_embedder().embed_query(rewrite))
            return space, tuple(float(x) for x in v / np.linalg.norm(v))

        engine._space_and_vector = mixed
        try:
            return original(*args, **kwargs)
        finally:
            engine._space_and_vector = space_and_vector

    rb.run_profiles = run_profiles


def main() -> int:
    argv = sys.argv[1:]
    ours, rest = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv \
        else (argv, [])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--show", type=int, default=0)
    ap.add_argument("--dataset", default="/work/shared/eval/locomo/locomo_dev.json")
    args = ap.parse_args(ours)
    if args.show:
        qa = [q for c in json.loads(Path(args.dataset).read_text()) for q in c["qa"]]
        for q in qa[:args.show]:
            print(f"{q['question']} => {declarative(q['question'])}")
        return 0
    patch(args.lam)
    return rb.main(rest)


if __name__ == "__main__":
    raise SystemExit(main())
