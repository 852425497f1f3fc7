"""Regenerate docs/reliability.md: the release suite's outcome plus the load benchmark.

    .venv/bin/python bench/reliability_report.py [--skip-load] \
        [--load-json bench/results/load.json] --out docs/reliability.md

1. Runs pytest on the release suite (the paths of RELEASE_SUITE that exist) with
   --junitxml to a temporary file and reads it with xml.etree: per test file the tests
   passed / failed / skipped with names, durations and `record_property` properties
   (numeric ones such as `inputs_tried` are summed; `facts` strings are quoted).
2. Reads the load result: runs bench/load.py first (to bench/results/load.json) unless
   --skip-load or --load-json is given.
3. Writes the Markdown report and exits 1 if a test failed or errored, pytest could not
   run, or a message was lost (sent - stored > 0), so CI can gate on it.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_LOAD_JSON = "bench/results/load.json"
RELEASE_SUITE = [
    "tests/security",
    "tests/reliability",
    "tests/knowledge/test_rls.py",
    "tests/knowledge/test_audit.py",
    "tests/knowledge/test_lifecycle.py",
    "tests/governance/test_erasure.py",
    "tests/governance/test_archive.py",
    "tests/knowledge/test_queue.py",
]

# Area of a test file: the first area whose pattern matches its path. Unmatched files are
# listed under "Other".
AREAS: list[tuple[str, str, str]] = [
    ("isolation", "Isolation and row-level security",
     r"test_rls|cross_account|tenan|catalog|isolation|pool|connection_hygiene"),
    ("reader", "Reader matrix", r"reader|visib|posture|diagnos|matrix"),
    ("lifecycle", "Lifecycle and audit", r"lifecycle|audit|tamper"),
    ("faults", "Faults",
     r"fault|test_queue|redis|worker|provider|restart|hang|chaos|outage|failure|crash|kill"),
    ("input", "Bad input and fuzzing", r"bad_input|fuzz|schemathesis|unicode|oversize|input"),
    ("erasure", "Erasure and backup", r"erasure|archive|backup|restore"),
]
OTHER = ("other", "Other release tests")


# ---------------------------------------------------------------------------------------
# JUnit XML
# ---------------------------------------------------------------------------------------


@dataclass
class Case:
    file: str
    name: str
    outcome: str  # passed, failed, error, skipped
    seconds: float
    message: str = ""
    properties: list[tuple[str, str]] = field(default_factory=list)


_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def _file_of(classname: str, name: str, root: Path) -> tuple[str, str]:
    """tests.security.test_x.TestY -> (tests/security/test_x.py, TestY): the longest
    prefix that is a file. Collection errors carry the module in `name`, no classname."""
    parts = (classname or name).split(".")
    for n in range(len(parts), 0, -1):
        candidate = "/".join(parts[:n]) + ".py"
        if (root / candidate).is_file():
            return candidate, ".".join(parts[n:])
    return "/".join(parts) + ".py", ""


def parse_junit(path: str | Path, root: Path = REPO) -> list[Case]:
    tree = ET.parse(path)
    cases: dict[tuple[str, str], Case] = {}
    for tc in tree.iter("testcase"):
        classname, name = tc.get("classname", ""), tc.get("name", "")
        outcome, message = "passed", ""
        for tag in ("error", "failure", "skipped"):
            el = tc.find(tag)
            if el is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                message = (el.get("message") or el.text or "").strip()
                break
        props = [(p.get("name", ""), p.get("value", ""))
                 for p in tc.iter("property")]
        # xunit1 names the file (for generated tests, e.g. schemathesis, the generator's)
        if tc.get("file", "").endswith(".py") and (root / tc.get("file", "")).is_file() \
                and not tc.get("file", "").startswith((".venv", "/")):
            file = tc.get("file", "")
            module = file[:-3].replace("/", ".")
            cls = classname[len(module) + 1:] if classname.startswith(module + ".") else ""
        else:
            file, cls = _file_of(classname, name, root)
        shown = f"{cls}::{name}" if cls else name
        case = Case(file, shown, outcome, float(tc.get("time") or 0), message, props)
        key = (file, shown)
        old = cases.get(key)
        if old is None:
            cases[key] = case
        elif case.outcome == "error" and re.search(r"setup|teardown", case.message, re.I):
            # an error at setup/teardown is a second <testcase> for the same test
            old.seconds += case.seconds
            old.properties += case.properties
            old.outcome, old.message = case.outcome, case.message
        else:  # generated cases with one name (schemathesis: one per API operation)
            n = 2
            while (file, f"{shown} #{n}") in cases:
                n += 1
            case.name = f"{shown} #{n}"
            cases[(file, case.name)] = case
    return list(cases.values())


def area_of(file: str) -> tuple[str, str]:
    for key, title, pattern in AREAS:
        if re.search(pattern, file):
            return key, title
    return OTHER


def numeric(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------
# Running things
# ---------------------------------------------------------------------------------------


def run_pytest(paths: list[str], extra: list[str], xml_path: str) -> tuple[int, float, str]:
    cmd = [sys.executable, "-m", "pytest", *paths, f"--junitxml={xml_path}",
           "-o", "junit_family=xunit1", "-q", "-p", "no:cacheprovider", *extra]
    print("$ " + shlex.join(cmd), flush=True)
    t = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, text=True, capture_output=True)
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
    print(tail, flush=True)
    return proc.returncode, time.monotonic() - t, tail


def run_load(out: str, extra: list[str]) -> int:
    cmd = [sys.executable, "bench/load.py", "--dataset",
           os.environ.get("MEMHOUSE_LOCOMO", "/work/shared/eval/locomo/locomo_dev.json"),
           "--out", out, *extra]
    print("$ " + shlex.join(cmd), flush=True)
    return subprocess.run(cmd, cwd=REPO).returncode


def git_describe() -> str:
    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + (" with uncommitted changes" if dirty else "")


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def load_figures(load: dict[str, Any] | None) -> dict[str, Any]:
    if not load:
        return {}
    m, t = load.get("messages", {}), load.get("totals", {})
    sent = int(m.get("sent", 0))
    stored = int(m.get("stored", 0)) + int(m.get("stored_from_failed_requests", 0))
    return {"requests": t.get("requests", 0), "ok": t.get("requests_ok", 0),
            "errors": t.get("errors", 0), "rate_limited": t.get("rate_limited_429", 0),
            "sent": sent, "stored": stored, "lost": max(0, sent - stored),
            "accepted_lost": int(m.get("lost", 0))}


def render(cases: list[Case], load: dict[str, Any] | None, *, load_note: str,
           pytest_info: dict[str, Any], argv: list[str]) -> str:
    by_area: dict[str, list[Case]] = defaultdict(list)
    titles = {k: t for k, t, _ in AREAS} | {OTHER[0]: OTHER[1]}
    for c in cases:
        by_area[area_of(c.file)[0]].append(c)
    count = {o: sum(1 for c in cases if c.outcome == o) for o in _RANK}
    sums: dict[str, float] = defaultdict(float)
    facts: dict[str, list[str]] = defaultdict(list)
    for c in cases:
        for k, v in c.properties:
            num = numeric(v)
            if num is not None:
                sums[k] += num
            elif k == "facts" or k.endswith("_fact"):
                facts[area_of(c.file)[0]].append(v)
    faults = by_area.get("faults", [])
    lf = load_figures(load)
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cmd = ".venv/bin/python bench/reliability_report.py " + " ".join(
        shlex.quote(a) for a in argv)
    lines = [
        "# Reliability and security report",
        "",
        "<!-- generated file: do not edit by hand -->",
        f"Regenerate with `{cmd.strip()}` (add `--skip-load` to leave the load "
        "benchmark out, `--load-json FILE` to reuse a result). It runs the release suite "
        "with pytest, reads its JUnit XML and the load benchmark's JSON "
        "(`bench/load.py`, keys in `bench/README.md`).",
        "",
        f"Generated {now} at commit {git_describe()} on {os.cpu_count()} CPUs "
        f"({platform.system()} {platform.machine()}, Python {platform.python_version()}); "
        + (f"pytest took {pytest_info['seconds']:.0f} s" if not pytest_info.get("from_xml")
           else "test results read from a saved JUnit XML")
        + (f" (exit code {pytest_info['returncode']})" if pytest_info["returncode"] else "")
        + ".",
        "",
        "## Headline",
        "",
        "| figure | value |",
        "|---|---|",
        f"| tests held | {count['passed']} of {count['passed'] + count['failed'] + count['error']}"
        f" ({count['failed']} failed, {count['error']} errors, {count['skipped']} skipped) |",
        f"| faults survived | {sum(1 for c in faults if c.outcome == 'passed')} of "
        f"{sum(1 for c in faults if c.outcome != 'skipped')} fault tests passed |",
        f"| inputs tried | {int(sums.get('inputs_tried', 0))} |",
    ]
    if lf:
        lines += [
            f"| load requests held | {lf['ok']} of {lf['requests']} |",
            f"| load errors | {lf['errors']} (and {lf['rate_limited']} rate-limited 429s) |",
            f"| messages lost (sent - stored) | {lf['lost']} ({lf['sent']} sent, "
            f"{lf['stored']} stored) |",
        ]
    else:
        lines += [f"| load | {load_note} |"]
    extra_sums = {k: v for k, v in sums.items() if k != "inputs_tried"}
    for k, v in sorted(extra_sums.items()):
        lines.append(f"| {_md(k)} (recorded by tests) | {v:g} |")
    lines += ["", "Release suite: " + ", ".join(f"`{p}`" for p in pytest_info["paths"])
              + "." + (" Not present (yet): " + ", ".join(f"`{p}`" for p in
                                                           pytest_info["missing"]) + "."
                       if pytest_info["missing"] else "")]
    if not cases:
        lines += ["", "**No test results**: pytest produced no JUnit XML. Its output:", "",
                  "```", pytest_info.get("tail", ""), "```"]

    for key in [k for k, _, _ in AREAS] + [OTHER[0]]:
        area = by_area.get(key, [])
        if not area and key == OTHER[0]:
            continue
        lines += ["", f"## {titles[key]}", ""]
        if not area:
            lines += ["No tests in this area yet."]
            continue
        held = sum(1 for c in area if c.outcome == "passed")
        lines += [f"{held} of {len(area)} passed.", ""]
        for fact in facts.get(key, []):
            lines.append(f"* {_md(fact)}")
        if facts.get(key):
            lines.append("")
        by_file: dict[str, list[Case]] = defaultdict(list)
        for c in area:
            by_file[c.file].append(c)
        for file, fcases in sorted(by_file.items()):
            n = {o: sum(1 for c in fcases if c.outcome == o) for o in _RANK}
            lines += [f"### `{file}`: {n['passed']} passed, {n['failed']} failed, "
                      f"{n['error']} errors, {n['skipped']} skipped "
                      f"({sum(c.seconds for c in fcases):.1f} s)", "",
                      "| test | outcome | s | recorded |", "|---|---|---|---|"]
            for c in fcases:
                rec = ", ".join(f"{k}={_short(v, 60)}" for k, v in c.properties
                                if k != "facts")
                note = f" ({_short(c.message, 120)})" if c.outcome != "passed" and c.message \
                    else ""
                lines.append(f"| `{_md(c.name)}` | {c.outcome}{_md(note)} | "
                             f"{c.seconds:.2f} | {_md(rec)} |")
            lines.append("")
    lines += ["", "## Load", "", *render_load(load, load_note)]
    return "\n".join(line.rstrip() for line in lines).rstrip() + "\n"


def render_load(load: dict[str, Any] | None, note: str) -> list[str]:
    if not load:
        return [note]
    cfg, ops, m, p = load["config"], load["operations"], load["messages"], load["pipeline"]
    la0, la1 = cfg.get("loadavg_start", [0])[0], cfg.get("loadavg_end", [0])[0]
    out = [
        f"`bench/load.py` ({load.get('generated_at', '?')}, commit "
        f"{(load.get('git_commit') or '?')[:12]}): {load['load_wall_seconds']} s of "
        f"concurrent ingest ({cfg['ingest_workers']} threads, target "
        f"{cfg['ingest_rate_target_msgs_per_s']} messages/s, {cfg['batch_size']} per "
        f"request) and search ({cfg['search_workers']} threads, closed loop) over "
        f"loopback HTTP through `memhouse.client`; server {cfg['server']}, "
        f"{cfg['worker']} on Redis ({cfg['broker']}), {cfg['cpu_count']} CPUs shared, "
        f"load average {la0:.2f} at start and {la1:.2f} at the end.",
        "",
        "| operation | requests ok / sent | req/s | p50 ms | p95 ms | p99 ms | errors | 429 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for op in ("ingest", "search"):
        o = ops[op]
        lat = o["latency_ms"]
        errs = ", ".join(f"{k}: {v}" for k, v in o["errors"].items()) or "0"
        out.append(f"| {op} | {o['ok']} / {o['requests']} | {o['requests_per_second']} | "
                   f"{lat['p50']} | {lat['p95']} | {lat['p99']} | {_md(errs)} | "
                   f"{o['rate_limited_429']} |")
    ing, sea = ops["ingest"], ops["search"]
    kn = ", ".join(f"{k} {v}" for k, v in sorted(load.get("knowledge_by_state", {}).items()))
    mem = load.get("memory", {})
    out += [
        "",
        f"* Messages: {m['sent']} sent, {m['accepted']} accepted "
        f"({ing.get('messages_per_second')} messages/s), {m['stored']} of those stored, "
        f"**{m['lost']} lost**; {m.get('stored_from_failed_requests', 0)} stored from "
        "requests that failed on the client side.",
        f"* Pipeline: {p['at_end_of_load']['extracted']} finished by the end of the load, "
        f"{p['finished']} after draining {p['drain_seconds']} s "
        f"({'drained' if p['drained'] else 'NOT drained'}), {p['pending']} pending, "
        f"{p['after_drain'].get('embeddable_without_vector', '?')} statements without a "
        "vector.",
        f"* Knowledge by state: {kn}.",
        f"* Search server time p50/p95 {sea['server_elapsed_ms']['p50']} / "
        f"{sea['server_elapsed_ms']['p95']} ms; {sea['searches_with_dropped_strategy']} of "
        f"{sea['ok']} searches dropped a strategy at the deadline "
        f"({_md(', '.join(f'{k} {v}' for k, v in sea.get('dropped_strategies', {}).items()))}"
        f"); {sea['empty_results']} empty.",
        f"* Peak RSS: server {mem.get('server', {}).get('peak_rss_mb')} MB, worker "
        f"{mem.get('worker', {}).get('peak_rss_mb')} MB (process trees, sampled).",
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs/reliability.md")
    ap.add_argument("--skip-load", action="store_true", help="leave the load bench out")
    ap.add_argument("--load-json", default=None, help="read this load result, do not run")
    ap.add_argument("--load-args", default="", help="extra arguments for bench/load.py, "
                    "e.g. '--duration 60'")
    ap.add_argument("--pytest-args", default="", help="extra pytest arguments")
    ap.add_argument("--junit-xml", default=None,
                    help="read this JUnit XML instead of running pytest")
    ap.add_argument("--save-junit", default=None, help="keep pytest's JUnit XML here")
    args = ap.parse_args(raw)

    present = [p for p in RELEASE_SUITE if (REPO / p).exists()]
    missing = [p for p in RELEASE_SUITE if p not in present]
    info: dict[str, Any] = {"paths": present, "missing": missing, "returncode": 0,
                            "seconds": 0.0, "tail": ""}
    cases: list[Case] = []
    if args.junit_xml:
        cases = parse_junit(args.junit_xml)
        info["from_xml"] = True
    elif present:
        with tempfile.TemporaryDirectory(prefix="memhouse_report_") as tmp:
            xml_path = os.path.join(tmp, "junit.xml")
            rc, secs, tail = run_pytest(present, shlex.split(args.pytest_args), xml_path)
            info.update(returncode=rc, seconds=secs, tail=tail)
            if os.path.exists(xml_path):
                cases = parse_junit(xml_path)
                if args.save_junit:
                    import shutil

                    shutil.copyfile(xml_path, args.save_junit)

    load: dict[str, Any] | None = None
    note = "not run (`--skip-load`)"
    load_path = args.load_json
    if not args.skip_load and not load_path:
        load_path = DEFAULT_LOAD_JSON
        rc = run_load(load_path, shlex.split(args.load_args))
        if rc:
            print(f"bench/load.py exited with {rc}", flush=True)
    if load_path:
        import json

        try:
            load = json.loads((REPO / load_path).read_text())
        except (OSError, ValueError) as exc:
            note = f"no load result: cannot read `{load_path}` ({exc})"

    # The command shown in the header is the one that regenerates this file as it is.
    shown = ["--out", args.out] + (["--skip-load"] if args.skip_load else []) \
        + (["--load-json", args.load_json] if args.load_json else []) \
        + (["--load-args", args.load_args] if args.load_args else [])
    text = render(cases, load, load_note=note, pytest_info=info, argv=shown)
    out = REPO / args.out if not os.path.isabs(args.out) else Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)

    failed = sum(1 for c in cases if c.outcome in ("failed", "error"))
    lost = load_figures(load).get("lost", 0) if load else 0
    pytest_broken = bool(present) and not cases and not args.junit_xml
    print(f"wrote {out}: {len(cases)} tests, {failed} failed/errors, messages lost {lost}",
          flush=True)
    if pytest_broken:
        print("pytest produced no results", flush=True)
    if info["returncode"] not in (0, 1, 5) and not cases:
        pytest_broken = True
    return 1 if (failed or lost or pytest_broken) else 0


if __name__ == "__main__":
    raise SystemExit(main())
