"""The real `manage.py serve` as a subprocess, on its own data directory (so its own
embedded PostgreSQL) and static root: what a user gets from the README, not live_server
(which serves static files itself and shares the test run's database)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def manage_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh install: the production settings (DEBUG off), the
    embedded server under `data_dir`, nothing from the test run's database."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL",
                                                             "DATABASE_REPLICA_URL",
                                                             "MEMHOUSE_TEST_DB_NAME"}}
    env.update(DJANGO_SETTINGS_MODULE="memhouse.settings", MEMHOUSE_DEBUG="false",
               MEMHOUSE_DATA_DIR=str(data_dir), MEMHOUSE_STATIC_ROOT=str(data_dir / "static"),
               MEMHOUSE_RATE_LIMIT_PER_MINUTE="0",
               MEMHOUSE_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE="0", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def manage(data_dir: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, text=True,
                          env=manage_env(data_dir), capture_output=True, timeout=timeout)


def postgres_pids(data_dir: Path) -> list[int]:
    """PostgreSQL processes (postmaster and backends) serving `data_dir`'s pgdata."""
    pgdata = str((data_dir / "pgdata").resolve())
    found = []
    for proc in psutil.process_iter(attrs=("name", "cmdline")):
        if proc.info["name"] == "postgres" and pgdata in (proc.info["cmdline"] or []):
            found.append(proc.pid)
    return found


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    data_dir: Path
    log: Path

    @property
    def text(self) -> str:
        return self.log.read_text()

    def curator_password(self) -> str:
        match = re.search(r"demo-curator / (\S+)", self.text)
        assert match, self.text
        return match.group(1)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60) -> int:
        """Send `sig` to the serve process (only to it: Ctrl-C in a terminal reaches the
        foreground group, but pg_ctl detaches the postmaster from it anyway)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"serve did not exit on {sig!r}:\n{self.text}") from None


def _interruptible() -> None:
    """In the child before exec: SIGINT back to its default. A test run started in the
    background of a non-interactive shell (`pytest &`) ignores SIGINT, a child inherits
    that, and Python then installs no KeyboardInterrupt handler: serve would never see
    the Ctrl-C these tests send, as a terminal's foreground process does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_serve(data_dir: Path, *, timeout: float = 120) -> Served:
    """Start `manage.py serve` and wait until it answers /healthz."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = data_dir / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "manage.py", "serve", f"127.0.0.1:{port}"],
                                cwd=ROOT, env=manage_env(data_dir), stdout=out,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                preexec_fn=_interruptible)
    served = Served(proc=proc, url=f"http://127.0.0.1:{port}", data_dir=data_dir, log=log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited with {proc.returncode}:\n{served.text}")
        try:
            if httpx.get(f"{served.url}/healthz", timeout=2).status_code == 200:
                return served
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    served.stop(signal.SIGKILL)
    raise AssertionError(f"serve did not answer within {timeout}s:\n{served.text}")


def cleanup(served: Served) -> None:
    """Whatever a test left: the serve process and its PostgreSQL."""
    if served.proc.poll() is None:
        served.proc.kill()
        served.proc.wait(10)
    if postgres_pids(served.data_dir):
        manage(served.data_dir, "db", "stop", "--force")
