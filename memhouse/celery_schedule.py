"""The one beat schedule: crontab entries only, each with an expiry so missed runs do not
pile up (interval schedules reset on every beat restart)."""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab

# name -> entry; expires is in seconds, about 1.5x the cadence.
BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # Every 10 minutes: re-enqueue messages whose pipeline dispatch was lost.
    "sweep-unprocessed-messages": {
        "task": "knowledge.sweep_unprocessed",
        "schedule": crontab(minute="*/10"),
        "options": {"expires": 900},
    },
}
