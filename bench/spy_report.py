"""Read a py-spy raw profile of an ingest: where the samples under a function go.

    py-spy record -r 250 -f raw -o /tmp/ingest.spy -- .venv/bin/python bench/ingest.py \
        --dataset /work/shared/eval/locomo/locomo_dev.json --out /tmp/i.json \
        --limit-conversations 2
    .venv/bin/python bench/spy_report.py /tmp/ingest.spy                  # own code, flat
    .venv/bin/python bench/spy_report.py /tmp/ingest.spy --under "BatchPlacer.place "

A sampling profile (py-spy, `pip install py-spy`) weighs a function by the time it runs,
where cProfile's per-call overhead inflates code of many small calls (the update rule's
readings looked 3x heavier under cProfile than they are). Without --under: the share of
samples inside the batch path (`process_messages_batch`) by the deepest frame of MemHouse
code, the encoder's and the database wait's left out (--keep-encoder keeps them). With
--under NAME: the first frame starting with NAME, and the share of samples under each of
its direct callees. Shares are of all samples (wall time at the sampling rate while the
thread was not idle).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

_LINE = re.compile(r":\d+\)")
_OWN = re.compile(r"\((?:governance|knowledge|retrieval|memhouse|console)/")
LEFT_OUT = ("OnnxEmbedder.embed_documents", "Connection.wait", "wait_c")


def read(path: str) -> list[tuple[list[str], int]]:
    stacks = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            stack, _, count = line.rstrip().rpartition(" ")
            stacks.append(([_LINE.sub(")", f) for f in stack.split(";")], int(count)))
    return stacks


def under(stacks: list[tuple[list[str], int]], name: str) -> tuple[int, Counter[str]]:
    children: Counter[str] = Counter()
    inside = 0
    for frames, count in stacks:
        at = next((i for i, f in enumerate(frames) if f.startswith(name)), None)
        if at is None:
            continue
        inside += count
        children[frames[at + 1] if at + 1 < len(frames) else "<self>"] += count
    return inside, children


def own_frames(stacks: list[tuple[list[str], int]], keep_encoder: bool) -> Counter[str]:
    out: Counter[str] = Counter()
    for frames, count in stacks:
        if not any(f.startswith("process_messages_batch") for f in frames):
            continue
        if not keep_encoder and any(f.startswith(LEFT_OUT) for f in frames):
            continue
        own = [f for f in frames if _OWN.search(f)]
        out[own[-1] if own else "?"] += count
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--under", default=None)
    ap.add_argument("--keep-encoder", action="store_true")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args(argv)
    stacks = read(args.profile)
    total = sum(count for _, count in stacks) or 1
    if args.under:
        inside, children = under(stacks, args.under)
        print(f"{100 * inside / total:6.2f}% {args.under}")
        rows = children.most_common(args.top)
    else:
        rows = own_frames(stacks, args.keep_encoder).most_common(args.top)
    for frame, count in rows:
        print(f"{100 * count / total:6.2f}%   {frame}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
