"""Machine output for the learned junk gate, generated on this machine by real programs.

Runs package managers, git, a test runner, system tools and logs, an HTTP client with
verbose output against a local server, Python tracebacks, JSON / YAML / CSV / SQL / HTML
dumps and framework logs (Django's runserver, Celery, httpx / httpcore debug logging),
cuts each program's output into samples (single lines and runs of 2-5 lines, the shapes
a pasted message or a claim's evidence span has), and writes them as gzipped JSON lines
``{"group": <program>, "text": <sample>}``. The group is what cross-validation holds out
(bench/junk_train.py), so the classifier is scored on programs it never saw.

    .venv/bin/python bench/junk_corpus.py --out bench/fixtures/junk_machine.jsonl.gz

What a program prints depends on the machine (versions, dates, paths), so a rerun gives a
corpus of the same kinds, not the same bytes; the committed file is the one the shipped
weights were trained on. Nothing that can hold a secret is read: no environment dump, no
process command lines (names only), no remote URLs.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
PER_GROUP = 160  # samples kept per program family at most (balance, small on disk)


def run(
    cmd: list[str] | str,
    *,
    cwd: Path | str | None = None,
    timeout: float = 60,
    env: dict[str, str] | None = None,
    shell: bool = False,
) -> str:
    """stdout and stderr of a command (what a user would copy from the terminal)."""
    try:
        done = subprocess.run(
            cmd,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            shell=shell,
            errors="replace",
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        out = getattr(exc, "stdout", None) or ""
        return out if isinstance(out, str) else out.decode(errors="replace")
    return (done.stdout or "") + (done.stderr or "")


def tail_file(path: str, lines: int = 300) -> str:
    try:
        with open(path, errors="replace") as fh:
            return "".join(fh.readlines()[-lines:])
    except OSError:
        return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server(directory: Path) -> Iterator[tuple[int, list[str]]]:
    """python -m http.server in `directory`; yields its port and, afterwards, its log."""
    port = free_port()
    log: list[str] = []
    proc = subprocess.Popen(
        [PY, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=directory,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for _ in range(50):
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), timeout=0.2),
            ):
                break
            time.sleep(0.1)
        yield port, log
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
        log.append(out or "")


# --- the programs ---------------------------------------------------------------------


def pip_output() -> str:
    pip = [PY, "-m", "pip"]
    return "\n".join(
        run(pip + args)
        for args in (
            ["--version"],
            ["list"],
            ["list", "--outdated", "--no-index"],
            ["freeze"],
            ["show", "-f", "django"],
            ["show", "celery", "redis", "numpy"],
            ["check"],
            ["install", "--no-index", "definitely-not-a-package-xyz"],
            ["install", "--dry-run", "--no-index", "django"],
            ["config", "list", "-v"],
            ["debug", "--verbose"],
            ["download", "--no-index", "nothing-here-abc", "-d", "/tmp/x"],
        )
    )


def pip_json() -> str:
    return run([PY, "-m", "pip", "list", "--format=json"])


def apt_output() -> str:
    cmds = [
        ["apt-cache", "show", "python3"],
        ["apt-cache", "policy", "python3", "git", "curl"],
        ["apt-cache", "depends", "git"],
        ["apt-cache", "rdepends", "libpq5"],
        ["apt-cache", "search", "postgresql"],
        ["apt-cache", "stats"],
        ["apt-cache", "showpkg", "curl"],
    ]
    return "\n".join(run(c)[:6000] for c in cmds)


def dpkg_output() -> str:
    return "\n".join(
        [
            run(["dpkg", "-l"])[:8000],
            run(["dpkg", "-s", "bash"]),
            run(["dpkg", "-L", "git"])[:3000],
            tail_file("/var/log/dpkg.log", 200),
            tail_file("/var/log/apt/history.log", 120),
            tail_file("/var/log/alternatives.log", 80),
        ]
    )


def git_output() -> str:
    git = ["git", "-C", str(ROOT)]
    # Commit messages are people's prose: the shapes git adds around them are the machine
    # part, so formats keep headers, hashes and stats (indented message lines are dropped
    # by samples(), see KEEP_INDENTED).
    return "\n".join(
        run(git + args)[:8000]
        for args in (
            ["log", "--stat", "-n", "8"],
            ["log", "--format=fuller", "-n", "6"],
            ["log", "--oneline", "--decorate", "-n", "40"],
            ["status"],
            ["status", "-sb"],
            ["diff", "HEAD~1", "--stat"],
            ["show", "--format=raw", "HEAD~3", "--", "*.py"],
            ["diff", "HEAD~2", "HEAD~1", "--", "*.py"],
            ["branch", "-a", "-vv"],
            ["reflog", "-n", "30"],
            ["count-objects", "-v"],
            ["cat-file", "-p", "HEAD"],
            ["ls-tree", "HEAD"],
            ["blame", "-L", "1,40", "memhouse/settings.py"],
            ["log", "--format=%h %ad %an", "--date=iso", "-n", "30"],
            ["worktree", "list"],
            ["describe", "--always", "--dirty"],
            ["checkout", "no-such-branch-xyz"],
            ["merge-base", "--is-ancestor", "HEAD", "HEAD~1"],
        )
    )


PYTEST_FILE = """
import pytest, json

def test_ok():
    assert 1 + 1 == 2

def test_fails():
    data = {"a": 1, "b": [1, 2, 3]}
    assert data == {"a": 2, "b": [1, 2]}

@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_param(n):
    assert n % 2 == 1

@pytest.mark.skip(reason="needs a network")
def test_skipped():
    pass

def test_error(tmp_path):
    json.loads((tmp_path / "missing.json").read_text())

@pytest.mark.xfail
def test_xfail():
    assert False

def test_warns():
    import warnings
    warnings.warn("deprecated call", DeprecationWarning)
"""


def pytest_output() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "test_sample.py").write_text(PYTEST_FILE)
        base = [
            PY,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-c",
            os.devnull,
            "--rootdir",
            tmp,
            "test_sample.py",
        ]
        return "\n".join(
            run(base + extra, cwd=tmp)
            for extra in (
                ["-v"],
                ["-q"],
                ["-rA", "--tb=short"],
                ["--collect-only"],
                ["--tb=line"],
                ["-x", "--tb=long"],
                ["--durations=3"],
            )
        )


TRACEBACKS = [
    "import json; json.loads('{bad json')",
    "d = {'a': 1}; d['missing']",
    "import nosuchmodule_xyz",
    "1 / 0",
    "def f(n): return f(n + 1)\nf(0)",
    "int('forty-two')",
    "open('/nonexistent/config.yaml')",
    "import sqlite3; sqlite3.connect(':memory:').execute('select * from users')",
    "import subprocess; subprocess.run(['false'], check=True)",
    "import socket; socket.create_connection(('127.0.0.1', 9), timeout=1)",
    "import httpx; httpx.get('http://127.0.0.1:9/api', timeout=1)",
    "[].pop()",
    "None.upper()",
    "import asyncio\nasync def main(): raise RuntimeError('event loop stopped')\n"
    "asyncio.run(main())",
    "import django; from django.conf import settings; settings.DEBUG",
    "class A: pass\nA().run()",
    "import decimal; decimal.Decimal('1.2.3')",
    "assert 2 + 2 == 5, 'math is broken'",
    "import os; os.remove('/tmp/definitely-not-here.lock')",
    "x = [1, 2]; x[5]",
    "import datetime; datetime.datetime.strptime('2026-13-01', '%Y-%m-%d')",
    "import unittest\nclass T(unittest.TestCase):\n    def test_a(self): self.assertEqual"
    "([1, 2], [1, 3])\nunittest.main(argv=['x', '-v'])",
    "import logging; logging.basicConfig(level=logging.DEBUG); log = logging.getLogger"
    "('app.sync')\ntry:\n    1 / 0\nexcept Exception:\n    log.exception('sync failed')",
]


def traceback_output() -> str:
    return "\n".join(run([PY, "-c", code], cwd="/tmp") for code in TRACEBACKS)


def system_output() -> str:
    cmds = [
        ["uname", "-a"],
        ["df", "-h"],
        ["df", "-i"],
        ["free", "-m"],
        ["lscpu"],
        ["lsblk"],
        ["mount"],
        ["ip", "addr"],
        ["ip", "route"],
        ["ss", "-tln"],
        ["ps", "-eo", "pid,ppid,stat,pcpu,pmem,rss,etime,comm"],
        ["uptime"],
        ["ls", "-la", "/etc"],
        ["ls", "-la", str(ROOT)],
        ["stat", str(ROOT / "README.md")],
        ["du", "-sh", str(ROOT / "bench"), str(ROOT / "docs")],
        ["id"],
        ["date", "-u"],
        ["find", str(ROOT / "memhouse"), "-name", "*.py", "-newer", str(ROOT / "README.md")],
        ["cat", "/proc/meminfo"],
        ["cat", "/proc/loadavg"],
        ["nproc"],
        ["locale"],
        ["ls", "/no/such/dir"],
        ["systemctl", "--no-pager", "list-units"],
    ]
    return "\n".join(run(c)[:5000] for c in cmds)


def logs_output() -> str:
    parts = [run(["journalctl", "--no-pager", "-n", "300"]), run(["dmesg"])[:6000]]
    for pattern in (
        "/var/log/redis/*.log",
        "/var/log/postgresql/*.log",
        "/var/log/rabbitmq/*.log",
        "/var/log/mosquitto/*.log",
        "/var/log/nats-server.log",
        "/var/log/mysql/*.log",
        "/var/log/fontconfig.log",
    ):
        for path in sorted(Path("/").glob(pattern.lstrip("/")))[:2]:
            parts.append(tail_file(str(path), 150))
    return "\n".join(parts)


def curl_output(port: int) -> str:
    base = f"http://127.0.0.1:{port}"
    cmds = [
        ["curl", "-v", f"{base}/"],
        ["curl", "-sv", "-o", "/dev/null", f"{base}/README.md"],
        ["curl", "-I", f"{base}/docs/"],
        ["curl", "-v", f"{base}/nope"],
        [
            "curl",
            "-v",
            "-X",
            "POST",
            "-d",
            '{"a":1}',
            "-H",
            "Content-Type: application/json",
            f"{base}/",
        ],
        ["curl", "-v", "--max-time", "2", "http://127.0.0.1:9/"],
        ["curl", "-sS", "--max-time", "2", "http://127.0.0.1:6379/"],
        ["curl", "-v", "--max-time", "2", f"https://127.0.0.1:{port}/"],
    ]
    return "\n".join(run(c, timeout=20) for c in cmds)


def html_output(port: int) -> str:
    return "\n".join(
        run(["curl", "-s", f"http://127.0.0.1:{port}/{p}"])
        for p in ("", "docs/", "bench/", "missing-page", "memhouse/")
    )


def httpx_logging(port: int) -> str:
    code = textwrap.dedent(f"""
        import logging, httpx
        logging.basicConfig(level=logging.DEBUG,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        with httpx.Client() as c:
            for p in ("/", "/README.md", "/nope"):
                c.get("http://127.0.0.1:{port}" + p)
        try:
            httpx.get("http://127.0.0.1:9/", timeout=1)
        except Exception as exc:
            logging.getLogger("client").error("request failed: %r", exc)
    """)
    return run([PY, "-c", code])


def json_yaml_csv() -> dict[str, str]:
    code = textwrap.dedent("""
        import json, csv, io, sys, yaml, platform, sysconfig, importlib.metadata as md
        dists = sorted(md.distributions(), key=lambda d: d.metadata["Name"].lower())[:60]
        rows = [{"name": d.metadata["Name"], "version": d.version,
                 "requires": (d.requires or [])[:3]} for d in dists]
        paths = sysconfig.get_paths()
        doc = {"python": platform.python_version(), "platform": platform.platform(),
               "paths": paths, "packages": rows[:25]}
        out = {"json": json.dumps(doc, indent=2) + "\\n" + json.dumps(rows) + "\\n"
               + "\\n".join(json.dumps(r) for r in rows),
               "yaml": yaml.safe_dump(doc, sort_keys=False)
               + yaml.safe_dump({"services": {"web": {"image": "memhouse:dev",
                  "ports": ["8000:8000"], "env": {"DEBUG": "0"}}}})}
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["name", "version", "n_requires"])
        for r in rows:
            w.writerow([r["name"], r["version"], len(r["requires"])])
        out["csv"] = buf.getvalue()
        print(json.dumps(out))
    """)
    got = run([PY, "-c", code])
    try:
        parts = json.loads(got)
    except ValueError:
        return {}
    parts["csv"] += run(
        [
            "sqlite3",
            "-csv",
            "-header",
            ":memory:",
            "select 1 as id, 'alpha' as name, 3.5 as score union all select 2, 'beta', 7.25",
        ]
    )
    parts["json"] += run(
        ["git", "-C", str(ROOT), "log", "-n", "15", '--format={"commit": "%H", "date": "%aI"}']
    )
    with contextlib.suppress(ValueError):
        parts["json"] += json.dumps(json.loads(run(["ip", "-j", "addr"])), indent=1)
    return parts


SQL_SCRIPT = """
CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT UNIQUE NOT NULL, created_at TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER REFERENCES users(id),
  total REAL, status TEXT DEFAULT 'new');
CREATE INDEX orders_user ON orders(user_id);
INSERT INTO users VALUES (1, 'a@example.com', '2026-01-02'), (2, 'b@example.com', '2026-02-03');
INSERT INTO orders VALUES (10, 1, 19.99, 'paid'), (11, 2, 5.0, 'new'), (12, 1, 42.5, 'shipped');
.dump
.schema
.headers on
.mode column
SELECT u.email, count(o.id) AS n, sum(o.total) FROM users u JOIN orders o ON o.user_id = u.id
 GROUP BY u.email;
EXPLAIN QUERY PLAN SELECT * FROM orders WHERE user_id = 1;
.mode box
SELECT * FROM orders ORDER BY total DESC;
SELECT * FROM nonexistent;
"""


def sql_output() -> str:
    proc = subprocess.run(
        ["sqlite3", ":memory:"], input=SQL_SCRIPT, capture_output=True, text=True, timeout=20
    )
    out = proc.stdout + proc.stderr
    # Django's SQL for this project's migrations (no database connection needed).
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "memhouse.settings"}
    for app, number in (("knowledge", "0001"), ("governance", "0001")):
        out += run([PY, "manage.py", "sqlmigrate", app, number], cwd=ROOT, env=env, timeout=120)[
            :6000
        ]
    return out


def django_logs(port: int) -> str:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "memhouse.settings"}
    out = run([PY, "manage.py", "check", "--deploy"], cwd=ROOT, env=env, timeout=120)
    code = textwrap.dedent("""
        import logging, django
        logging.basicConfig(level=logging.DEBUG,
            format="[%(asctime)s] %(levelname)s [%(name)s:%(lineno)d] %(message)s")
        django.setup()
        from django.test import Client
        from django.test.utils import setup_test_environment
        setup_test_environment()
        c = Client(raise_request_exception=False)
        for path in ("/healthz", "/api/v1/me", "/api/v1/search?q=x", "/nope", "/static/x.css"):
            c.get(path)
        c.post("/api/v1/messages", data="{not json", content_type="application/json")
    """)
    out += run([PY, "-c", code], cwd=ROOT, env=env, timeout=180)
    return out


def celery_logs() -> str:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "memhouse.settings"}
    celery = [PY, "-m", "celery", "-A", "memhouse"]
    out = run([*celery, "report"], cwd=ROOT, env=env, timeout=120)
    out += run([*celery, "inspect", "ping", "--timeout", "1"], cwd=ROOT, env=env, timeout=60)
    out += run(
        [
            "timeout",
            "-s",
            "INT",
            "25",
            *celery,
            "worker",
            "--pool=solo",
            "--loglevel=DEBUG",
            "-n",
            "junkcorpus@%h",
            "-Q",
            "junk-corpus-nothing",
        ],
        cwd=ROOT,
        env=env,
        timeout=90,
    )
    return out


def redis_output() -> str:
    return "\n".join(
        run(["redis-cli", *c])
        for c in (
            ["INFO", "server"],
            ["INFO", "memory"],
            ["INFO", "clients"],
            ["PING"],
            ["CONFIG", "GET", "maxmemory*"],
            ["SLOWLOG", "GET", "5"],
            ["DBSIZE"],
            ["LATENCY", "DOCTOR"],
        )
    )


# --- samples --------------------------------------------------------------------------

KEEP_INDENTED = {"git": False}  # git's indented lines are commit messages: a person's prose


def samples(group: str, text: str, rng: random.Random) -> list[str]:
    lines = [ln.rstrip() for ln in text.splitlines()]
    if not KEEP_INDENTED.get(group, True):
        lines = [ln for ln in lines if not ln.startswith("    ")]
    lines = [ln for ln in lines if ln.strip()]
    out: list[str] = []
    for ln in lines:
        if len(ln.strip()) >= 3:
            out.append(ln.strip()[:400])
    for _ in range(len(lines)):
        k = rng.randint(2, 5)
        if len(lines) <= k:
            break
        start = rng.randrange(len(lines) - k)
        out.append("\n".join(lines[start : start + k])[:600])
    return out


def collect() -> dict[str, str]:
    got: dict[str, str] = {}
    steps = [
        ("pip", pip_output),
        ("pip_json", pip_json),
        ("apt", apt_output),
        ("dpkg", dpkg_output),
        ("git", git_output),
        ("pytest", pytest_output),
        ("traceback", traceback_output),
        ("system", system_output),
        ("syslog", logs_output),
        ("sql", sql_output),
        ("redis", redis_output),
        ("celery", celery_logs),
    ]
    for name, step in steps:
        t0 = time.time()
        got[name] = step()
        print(f"{name}: {len(got[name])} chars in {time.time() - t0:.1f}s", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        for sub in ("docs", "bench", "memhouse"):
            shutil.copytree(
                ROOT / sub,
                site / sub,
                ignore=shutil.ignore_patterns("*.png", "results", "__pycache__"),
            )
        shutil.copy(ROOT / "README.md", site / "README.md")
        with http_server(site) as (port, log):
            got["curl"] = curl_output(port)
            got["html"] = html_output(port)
            got["httpx"] = httpx_logging(port)
        got["http_server"] = "\n".join(log)
    got["django"] = django_logs(0)
    got.update(json_yaml_csv())
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench/fixtures/junk_machine.jsonl.gz"))
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for group, text in sorted(collect().items()):
        found = [s for s in samples(group, text, rng) if s not in seen]
        rng.shuffle(found)
        for s in found[:PER_GROUP]:
            seen.add(s)
            rows.append({"group": group, "text": s})
        print(f"{group}: {min(len(found), PER_GROUP)} samples", file=sys.stderr)
    with gzip.open(args.out, "wt", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} samples -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
