"""The beat schedule, in-process: what `manage.py serve` runs instead of `celery beat`.

Without it a single-machine install never expires statements, never asks revalidation
questions, never decays questions or ages reviews, and never runs dream-time entity
resolution, consolidation or deduction. :class:`InProcessBeat` runs Celery's own
scheduler (a :class:`~celery.beat.PersistentScheduler`) over
``memhouse.core.celery_schedule.BEAT_SCHEDULE``, the entries compose's `beat` service runs; it
only publishes them (to serve's in-process worker, or to the configured broker's workers),
exactly as `celery beat` would.

**One ticking beat per database.** Two `serve` processes on one database must not both
publish the schedule. The timer sweeps (expiry, revalidation, review aging, question
decay) and consolidation would tolerate it (they claim rows with ``FOR UPDATE SKIP
LOCKED`` plus a state filter, so a second run finds nothing left), but deduction would
ask the model about the same groups twice (billed) and entity resolution would rebuild
an Account's index twice at once; every run would also be done twice. So a beat ticks
only while it holds a session-level PostgreSQL advisory lock (``pg_try_advisory_lock``) on
its own connection: the first serve to take it ticks, the others stand by and try again
every ``max_interval`` seconds. The lock ends with its session, so when the ticking
process exits or loses the database, a standby takes over within one interval. (A
separate `celery beat` takes no such lock: with one, start serve with ``--no-beat``.)

The schedule state (each entry's last run) is kept in a shelve file beside the embedded
database (``<MEMHOUSE_DATA_DIR>/serve-beat-schedule``), opened only while leading; so a
nightly run missed while the machine was off runs once at the next start.
"""

from __future__ import annotations

import copy
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from celery.beat import PersistentScheduler

from memhouse.core.celery_schedule import BEAT_SCHEDULE, report_beat

log = logging.getLogger(__name__)

# The advisory lock's key, in PostgreSQL's two-int4 key space, which the one-bigint keys
# the audit chain and the entity index lock (hashes) never share: "mh", "beat".
LOCK_KEY = (0x6D68, 0x62656174)
# Seconds between passes; a standby tries for the lock as often. As `celery beat`'s.
MAX_INTERVAL = 15.0
SCHEDULE_FILE = "serve-beat-schedule"

Clock = Callable[[], datetime]


def default_schedule_file() -> Path:
    from django.conf import settings

    from memhouse.core.embedded_db import default_data_dir

    return Path(settings.DATA_DIR or default_data_dir()) / SCHEDULE_FILE


def _schedule(clock: Clock | None) -> dict[str, dict[str, Any]]:
    """BEAT_SCHEDULE itself, or with a clock: the same entries, each schedule a copy
    reading that clock (the scheduler's notion of now; tests advance it)."""
    if clock is None:
        return BEAT_SCHEDULE
    out = {}
    for name, entry in BEAT_SCHEDULE.items():
        schedule = copy.copy(entry["schedule"])
        schedule.nowfun = clock
        out[name] = {**entry, "schedule": schedule}
    return out


class ServeScheduler(PersistentScheduler):  # type: ignore[misc]
    """Celery's persistent scheduler over BEAT_SCHEDULE (whatever else is configured),
    on an optional clock."""

    def __init__(self, *args: Any, clock: Clock | None = None, **kwargs: Any) -> None:
        self._clock = clock
        super().__init__(*args, **kwargs)

    def merge_inplace(self, b: Any) -> None:
        super().merge_inplace(_schedule(self._clock))

    def get_schedule(self) -> Any:
        entries = super().get_schedule()
        if self._clock is not None:
            # The shelf unpickles its entries again after each sync, and a schedule
            # pickles without its clock: set it again.
            for entry in entries.values():
                entry.schedule.nowfun = self._clock
        return entries

    schedule = property(get_schedule, PersistentScheduler.set_schedule)

    def install_default_entries(self, data: Any) -> None:
        """None: Celery would add `celery.backend_cleanup`, which cleans a result backend,
        and MemHouse stores no results (CELERY_RESULT_BACKEND is None)."""


class InProcessBeat:
    """Leader election plus Celery's scheduler. `step()` is one pass (take or check the
    lock; while leading, publish every due entry); `run(stop)` loops it in a thread.

    The lock connection is opened in the thread that steps, and used only there."""

    def __init__(self, app: Any, *, schedule_file: Path | None = None,
                 clock: Clock | None = None, max_interval: float = MAX_INTERVAL,
                 heartbeat: bool = False) -> None:
        self.app = app
        self.schedule_file = Path(schedule_file or default_schedule_file())
        self.clock = clock
        self.max_interval = max_interval
        self.heartbeat = heartbeat  # stamp memhouse.celery's heartbeat (a real broker)
        self.scheduler: ServeScheduler | None = None
        self._db: Any = None  # the Django connection holding the advisory lock
        self.leading = False
        self.last_tick: float | None = None
        self.published = 0

    # --- leadership ----------------------------------------------------------------------

    def _connection(self) -> Any:
        if self._db is None:
            from django.db import connections

            default = connections["default"]
            # Its own session (not the thread's Django connection, which request and task
            # code may close): the lock lives exactly as long as this connection.
            self._db = type(default)(dict(default.settings_dict), alias="memhouse_beat_lock")
        return self._db

    def _drop_connection(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()  # ends the session, and with it the lock
            except Exception:
                log.debug("closing the beat lock connection failed", exc_info=True)

    def _lead(self) -> bool:
        """Whether this beat holds the lock (taking it when free)."""
        db = self._connection()
        try:
            with db.cursor() as cur:
                if self.leading:
                    cur.execute("SELECT 1")  # the session, and so the lock, is still there
                    return True
                cur.execute("SELECT pg_try_advisory_lock(%s, %s)", list(LOCK_KEY))
                got = bool(cur.fetchone()[0])
        except Exception:
            log.warning("in-process beat: the database is unavailable; not ticking",
                        exc_info=True)
            self._step_down()
            return False
        if not got:
            return False
        try:
            self.schedule_file.parent.mkdir(parents=True, exist_ok=True)
            self.scheduler = ServeScheduler(self.app, schedule_filename=str(self.schedule_file),
                                            clock=self.clock, max_interval=self.max_interval)
        except Exception:
            log.exception("in-process beat: cannot open its schedule %s", self.schedule_file)
            self._step_down()
            return False
        self.leading = True
        log.info("in-process beat: ticking (this process holds the beat lock)")
        return True

    def _step_down(self, *, lost: bool = True) -> None:
        scheduler, self.scheduler = self.scheduler, None
        if scheduler is not None:
            try:
                scheduler.close()
            except Exception:
                log.warning("in-process beat: closing its schedule failed", exc_info=True)
        if self.leading:
            if lost:
                log.warning("in-process beat: lost the beat lock; standing by")
            else:
                log.info("in-process beat: stopped; the beat lock is released")
        self.leading = False
        self._drop_connection()

    # --- ticking -------------------------------------------------------------------------

    def step(self) -> float:
        """One pass; returns the seconds until the next one is useful."""
        if not self._lead():
            self.report()
            return self.max_interval
        assert self.scheduler is not None
        wait = self.max_interval
        for _ in range(1000):  # Celery's tick publishes one due entry per call
            wait = float(self.scheduler.tick())
            if wait > 0:
                break
            self.published += 1
        self.last_tick = time.time()
        if self.heartbeat:
            from memhouse.celery import beat_heartbeat

            beat_heartbeat()
        self.report()
        return min(wait, self.max_interval)

    def next_due(self) -> dict[str, str] | None:
        scheduler = self.scheduler
        if scheduler is None:
            return None
        now = self.clock() if self.clock else self.app.now()
        best: tuple[float, str] | None = None
        for name, entry in list(scheduler.schedule.items()):
            try:
                due, seconds = entry.is_due()
            except Exception:
                continue
            remaining = 0.0 if due else float(seconds)
            if best is None or remaining < best[0]:
                best = (remaining, name)
        if best is None:
            return None
        at = now.timestamp() + best[0]
        return {"entry": best[1], "task": str(scheduler.schedule[best[1]].task),
                "at": datetime.fromtimestamp(at, UTC).isoformat()}

    def status(self) -> dict[str, Any]:
        node = f"{socket.gethostname()}:{os.getpid()}"
        if not self.leading:
            return {"state": "standby", "node": node,
                    "detail": "another process holds the beat lock (or the database is "
                              "unavailable); this one takes over when it is free"}
        return {"state": "running", "node": node,
                "last_tick": (datetime.fromtimestamp(self.last_tick, UTC).isoformat()
                              if self.last_tick else None),
                "last_tick_epoch": self.last_tick, "entries": len(BEAT_SCHEDULE),
                "published": self.published, "next_due": self.next_due()}

    def report(self) -> None:
        report_beat(self.status())

    def close(self) -> None:
        self._step_down(lost=False)
        report_beat({"state": "stopped"})

    def run(self, stop: threading.Event) -> None:
        """Step until `stop` is set, then release the lock (in this thread)."""
        from django.db import connection

        try:
            while not stop.is_set():
                try:
                    wait = self.step()
                except Exception:  # a bad pass must not end the beat
                    log.exception("in-process beat: a pass failed")
                    wait = self.max_interval
                stop.wait(max(wait, 0.5))
        finally:
            self.close()
            connection.close()
