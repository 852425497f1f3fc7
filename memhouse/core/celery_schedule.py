"""The one beat schedule: crontab entries only, each with an expiry so missed runs do not
pile up (interval schedules reset on every beat restart)."""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab

# name -> entry; expires is in seconds, about 1.5x the cadence.
BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # Every 10 minutes: re-enqueue messages whose pipeline dispatch was lost.
    "sweep-unprocessed-messages": {
        "task": "governance.sweep_unprocessed",
        "schedule": crontab(minute="*/10"),
        "options": {"expires": 900},
    },
    # Hourly at :05: current statements past expires_at -> expired.
    "governance-expire-due": {
        "task": "governance.expire_due",
        "schedule": crontab(minute=5),
        "options": {"expires": 5400},
    },
    # Hourly at :20: active statements past revalidate_after -> needs_revalidation.
    "governance-revalidate-due": {
        "task": "governance.revalidate_due",
        "schedule": crontab(minute=20),
        "options": {"expires": 5400},
    },
    # Hourly at :25: statements with no human subject that came due and that a live
    # source still supports -> active again (the rest wait in the curator queue).
    "governance-reconfirm-supported": {
        "task": "governance.reconfirm_supported",
        "schedule": crontab(minute=25),
        "options": {"expires": 5400},
    },
    # Daily at 03:00 (dream-time): held rows whose review is overdue -> rejected.
    "governance-age-overdue-reviews": {
        "task": "governance.age_overdue_reviews",
        "schedule": crontab(hour=3, minute=0),
        "options": {"expires": 129600},
    },
    # Daily at 03:10 (dream-time): unanswered confirmation/revalidation questions -> stale.
    "governance-decay-unanswered-questions": {
        "task": "governance.decay_unanswered_questions",
        "schedule": crontab(hour=3, minute=10),
        "options": {"expires": 129600},
    },
    # Daily at 02:50 (dream-time): recompute every audit chain; the audit page shows the
    # newest result instead of re-hashing the chain on each view.
    "governance-verify-audit-chains": {
        "task": "governance.verify_audit_chains",
        "schedule": crontab(hour=2, minute=50),
        "options": {"expires": 129600},
    },
    # Daily at 03:20 (dream-time): rebuild the entity mention index, then link the other
    # names of one thing (a configured model confirms each new pair).
    "governance-resolve-entities": {
        "task": "governance.resolve_entities",
        "schedule": crontab(hour=3, minute=20),
        "options": {"expires": 129600},
    },
    # Daily at 03:40 (dream-time): consolidate near-duplicate active statements.
    "governance-consolidate-duplicates": {
        "task": "governance.consolidate_duplicates",
        "schedule": crontab(hour=3, minute=40),
        "options": {"expires": 129600},
    },
    # Daily at 04:00 (dream-time): deduction over several statements (needs a provider).
    "governance-deduce": {
        "task": "governance.deduce",
        "schedule": crontab(hour=4, minute=0),
        "options": {"expires": 129600},
    },
}


# --- the in-process beat's report (manage.py serve) -------------------------------------
# `manage.py serve` runs the schedule above in-process (memhouse/management/beat.py); it
# reports here and /readyz reads it (this module is on the ground floor, which both may
# import). Outside serve (gunicorn, a worker) nothing reports: beat runs elsewhere.

_beat_report: dict[str, Any] | None = None


def report_beat(status: dict[str, Any] | None) -> None:
    """The in-process beat's current status (None: this process runs none)."""
    global _beat_report
    _beat_report = dict(status) if status is not None else None


def beat_report() -> dict[str, Any]:
    """What /readyz shows under ``beat``: ``{"state": ...}`` and, while this process's
    beat ticks, when it last did and which entry is due next."""
    if _beat_report is None:
        return {"state": "not_in_process"}
    return dict(_beat_report)
