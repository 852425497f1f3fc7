"""The embedded PostgreSQL's lifetime (issue 17, item 3): `manage.py db status|start|stop`,
`serve` stopping the server it started when it exits, and a test run doing the same,
each on a throwaway MEMHOUSE_DATA_DIR with its own server."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.served import ROOT, cleanup, manage, manage_env, postgres_pids, start_serve


def _pid(status_text: str) -> int:
    match = re.search(r"server:\s+running \(pid (\d+)\)", status_text)
    assert match, status_text
    return int(match.group(1))


def _holder(data_dir: Path) -> subprocess.Popen[str]:
    """Another process using the server: it loads the settings (which register it with
    pgserver as a handle holder) and stays."""
    code = "import django, time; django.setup(); print('ready', flush=True); time.sleep(300)"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=manage_env(data_dir),
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "data"
    path.mkdir()
    yield path
    if postgres_pids(path):
        manage(path, "db", "stop", "--force")


def test_db_status_start_stop_round_trip(data_dir: Path) -> None:
    status = manage(data_dir, "db", "status")
    assert status.returncode == 0, status.stderr
    assert f"data dir:  {data_dir}" in status.stdout and "server:    stopped" in status.stdout
    assert not postgres_pids(data_dir)  # status looked, it did not start anything

    started = manage(data_dir, "db", "start")
    assert started.returncode == 0, started.stderr
    pid = _pid(started.stdout)
    assert pid in postgres_pids(data_dir)  # still running after the command exited
    url = re.search(r"url:\s+(\S+)", started.stdout).group(1)
    assert url.startswith("postgresql://memhouse@/memhouse?host=") and ":@" not in url
    with psycopg.connect(url) as conn:  # the URL works as printed, as the app role
        assert conn.execute("SELECT current_user").fetchone() == ("memhouse",)
    assert _pid(manage(data_dir, "db", "status").stdout) == pid

    stopped = manage(data_dir, "db", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped (pid {pid})" in stopped.stdout and "server:    stopped" in stopped.stdout
    assert not postgres_pids(data_dir)
    assert "not running" in manage(data_dir, "db", "stop").stdout

    again = manage(data_dir, "db", "start")
    assert _pid(again.stdout) != pid and postgres_pids(data_dir)
    assert manage(data_dir, "db", "stop").returncode == 0
    assert not postgres_pids(data_dir)


def test_db_stop_refuses_while_another_process_uses_the_server(data_dir: Path) -> None:
    holder = _holder(data_dir)
    try:
        status = manage(data_dir, "db", "status")
        assert re.search(rf"used by:\s+{holder.pid}\b", status.stdout), status.stdout
        refused = manage(data_dir, "db", "stop")
        assert refused.returncode == 1
        assert str(holder.pid) in refused.stderr and "--force" in refused.stderr
        assert postgres_pids(data_dir)
    finally:
        holder.kill()  # no exit hooks: it stays in pgserver's list, but is not alive
        holder.wait(10)
    stopped = manage(data_dir, "db", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not postgres_pids(data_dir)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_stops_the_server_it_started_when_it_exits(data_dir: Path, sig: int) -> None:
    served = start_serve(data_dir)
    try:
        assert postgres_pids(data_dir)
        assert served.stop(sig) == 0
        assert "Embedded PostgreSQL: stopped." in served.text
        assert not postgres_pids(data_dir)
    finally:
        cleanup(served)


def test_serve_leaves_a_server_it_did_not_start_or_that_another_process_uses(
        data_dir: Path) -> None:
    pid = _pid(manage(data_dir, "db", "start").stdout)
    served = start_serve(data_dir)
    try:
        assert served.stop(signal.SIGINT) == 0
        assert "Embedded PostgreSQL" not in served.text  # not its server: nothing to say
        assert pid in postgres_pids(data_dir)
    finally:
        cleanup(served)
    assert manage(data_dir, "db", "stop").returncode == 0

    served = start_serve(data_dir)  # starts the server again, so owns it
    holder = _holder(data_dir)
    try:
        assert served.stop(signal.SIGINT) == 0
        assert re.search(rf"left running: .*in use by process\(es\) {holder.pid}\b",
                         served.text), served.text
        assert postgres_pids(data_dir)
    finally:
        holder.kill()
        holder.wait(10)
        cleanup(served)


def _pytest(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """A separate test run on `data_dir` (one quick test; the session still creates and
    drops its test database on that server)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly",
         "tests/console/test_browser_requirement.py::"
         "test_a_missing_chromium_skips_locally_with_the_same_message"],
        cwd=ROOT, env=manage_env(data_dir), text=True, capture_output=True, timeout=300)


def test_a_test_run_stops_the_server_it_started_but_not_one_already_running(
        data_dir: Path) -> None:
    run = _pytest(data_dir)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
    assert (data_dir / "pgdata" / "PG_VERSION").exists()  # it did use this data dir
    assert not postgres_pids(data_dir)

    pid = _pid(manage(data_dir, "db", "start").stdout)
    run = _pytest(data_dir)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
    assert pid in postgres_pids(data_dir)


def test_processes_starting_together_bootstrap_one_at_a_time():
    """serve and its workers start together on one embedded server: their superuser
    bootstrap steps (GRANT, ALTER FUNCTION ... LEAKPROOF) must not run concurrently, which
    PostgreSQL refuses with "tuple concurrently updated"."""
    import threading

    from memhouse.core import embedded_db

    db = embedded_db._cached  # the server the settings started for this run
    if db is None:
        pytest.skip("the tests run against an external DATABASE_URL")
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def boot() -> None:
        start.wait()
        try:
            for _ in range(5):
                embedded_db._bootstrap(db)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=boot) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
