"""`manage.py serve` runs the beat schedule in-process (issue 33, item 5): the entries of
memhouse/core/celery_schedule.py, published by Celery's own scheduler to serve's in-process
worker; one serve per database ticks (a PostgreSQL advisory lock), the others stand by;
`--no-beat` / MEMHOUSE_SERVE_BEAT=false turns it off; the banner and /readyz say which."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from celery.signals import task_prerun
from django.utils import timezone

from tests.governance.helpers import active_about
from tests.served import (
    ROOT,
    Served,
    _interruptible,
    cleanup,
    free_port,
    manage_env,
    start_serve,
)


def _wait(predicate: Any, timeout: float = 90) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.3)
    return False


@pytest.mark.django_db(transaction=True)
def test_in_process_beat_publishes_the_schedule_to_the_worker_and_leads_alone(
        committed_world, tmp_path):
    from governance.models import PeerQuestion
    from knowledge.models import Knowledge
    from memhouse.celery import app
    from memhouse.core.celery_schedule import BEAT_SCHEDULE, beat_report, report_beat
    from memhouse.core.tenancy import account_context
    from memhouse.management.beat import InProcessBeat
    from memhouse.management.commands.serve import start_background_work

    w = committed_world
    past = timezone.now() - timedelta(days=1)
    with account_context(w.account.id):
        ending = active_about(w, "Alice is at the Lisbon offsite.", expires_at=past)
        old = active_about(w, "Alice likes jazz.", revalidate_after=past)
    ran: list[tuple[str, str]] = []

    def record(task: Any = None, **_: Any) -> None:
        ran.append((task.name, threading.current_thread().name))

    # The scheduler's clock (the tasks keep the real one): a weekday at 10:00 UTC, so the
    # next two hours hold the sweep (*/10), expiry (:05) and revalidation (:20), and no
    # dream-time entry.
    clock = [datetime(2026, 12, 7, 10, 0, tzinfo=UTC)]
    schedule_file = tmp_path / "serve-beat-schedule"
    task_prerun.connect(record, weak=False)
    work = start_background_work(sweep_every=3600)  # the in-process worker (memory broker)
    first = InProcessBeat(app, schedule_file=schedule_file, clock=lambda: clock[0])
    second = InProcessBeat(app, schedule_file=schedule_file, clock=lambda: clock[0])
    try:
        first.step()
        assert first.leading and first.published == 0  # entries start now: nothing due
        status = beat_report()
        assert status["state"] == "running" and status["entries"] == len(BEAT_SCHEDULE)
        assert status["next_due"]["entry"] == "governance-expire-due"
        assert status["next_due"]["at"] == "2026-12-07T10:05:00+00:00"

        # Another serve on the same database stands by: it does not tick.
        second.step()
        assert not second.leading and second.scheduler is None
        assert beat_report()["state"] == "standby"

        clock[0] += timedelta(hours=2)
        first.step()
        names = {e["task"] for e in BEAT_SCHEDULE.values() if e["schedule"].hour == {
            *range(24)}}
        assert names == {"governance.sweep_unprocessed", "governance.expire_due",
                         "governance.revalidate_due", "governance.reconfirm_supported"}
        assert first.published == 4  # each entry once, however many runs it missed

        def swept() -> bool:
            with account_context(w.account.id):
                return (Knowledge.objects.get(pk=ending.pk).state == "expired"
                        and PeerQuestion.objects.filter(knowledge_id=old.pk,
                                                        kind="revalidation").exists())

        assert _wait(swept), ran
        with account_context(w.account.id):
            ending.refresh_from_db()
            old.refresh_from_db()
        assert (ending.state, ending.state_reason) == ("expired", "f4_expiry_due")
        assert (old.state, old.state_reason) == ("needs_revalidation", "f4_revalidation_due")
        # Each on the worker thread, once (their follow-ups, such as the deduction
        # check after a statement leaves `active`, run there too).
        assert sorted(n for n, _ in ran if n in names) == sorted(names)
        assert {thread for _, thread in ran} == {"memhouse-worker"}

        # Nothing more is due until the next occurrence; the leader then steps down (its
        # process exits) and the standby takes over with the stored schedule.
        first.step()
        assert first.published == 4
        first.close()
        second.step()
        assert second.leading and second.published == 0
        assert beat_report()["state"] == "running"

        # The machine was off overnight: at the next start every entry whose occurrence
        # passed meanwhile runs once (the stored last runs), dream-time included.
        second.close()
        clock[0] += timedelta(days=1)
        ran.clear()
        third = InProcessBeat(app, schedule_file=schedule_file, clock=lambda: clock[0])
        try:
            third.step()
        finally:
            third.close()
        assert third.published == len(BEAT_SCHEDULE)
        every = {e["task"] for e in BEAT_SCHEDULE.values()}
        assert _wait(lambda: every <= {n for n, _ in ran}), ran
    finally:
        first.close()
        second.close()
        work.stop()
        task_prerun.disconnect(record)
        report_beat(None)
    assert app.conf.task_always_eager  # restored for the rest of the suite


def _start(data_dir: Path, *args: str, timeout: float = 120) -> Served:
    """`manage.py serve` with extra arguments, on `data_dir` (as tests.served does)."""
    port = free_port()
    log = data_dir / f"serve-{port}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "manage.py", "serve", f"127.0.0.1:{port}",
                                 *args], cwd=ROOT, env=manage_env(data_dir), stdout=out,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                preexec_fn=_interruptible)
    served = Served(proc=proc, url=f"http://127.0.0.1:{port}", data_dir=data_dir, log=log)
    assert _wait(lambda: _answers(served), timeout), served.text
    return served


def _answers(served: Served) -> bool:
    if served.proc.poll() is not None:
        raise AssertionError(f"serve exited with {served.proc.returncode}:\n{served.text}")
    try:
        return httpx.get(f"{served.url}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _beat(served: Served) -> dict[str, Any]:
    r = httpx.get(f"{served.url}/readyz", timeout=120)
    assert r.status_code == 200, r.text
    return dict(r.json()["beat"])


def test_serve_runs_one_beat_per_database_and_says_so(tmp_path):
    data_dir = tmp_path / "data"
    first = start_serve(data_dir)
    others: list[Served] = []
    try:
        assert "Beat:           in-process, the 10 entries of memhouse/core/celery_schedule.py" \
            in first.text
        assert _wait(lambda: _beat(first)["state"] == "running", 60), first.text
        beat = _beat(first)
        assert beat["last_tick"] and beat["next_due"]["entry"] in {
            "sweep-unprocessed-messages", "governance-expire-due",
            "governance-revalidate-due", "governance-reconfirm-supported"}
        assert (data_dir / "serve-beat-schedule").exists() or list(
            data_dir.glob("serve-beat-schedule*"))

        # A second serve on the same database (the same embedded server): standby.
        second = _start(data_dir)
        others.append(second)
        assert "Beat:           in-process" in second.text
        assert _wait(lambda: _beat(second)["state"] == "standby", 60), second.text
        assert _beat(first)["state"] == "running"

        # One started with --no-beat runs none and says how to run it.
        third = _start(data_dir, "--no-beat")
        others.append(third)
        assert "Beat:           off (--no-beat)" in third.text
        beat = _beat(third)
        assert beat["state"] == "disabled" and "celery -A memhouse beat" in beat["detail"]
    finally:
        for served in reversed(others):
            if served.proc.poll() is None:
                served.stop()
        first.stop()
        cleanup(first)
