"""The Celery application. Tasks take ids, enter their Account and call services.

Operations hooks live here too (they are signals of this app):

* every published task carries ``memhouse_enqueued_at`` (a publish-time header), so
  ``/metrics`` can report the age of the oldest message in each queue and workers can
  record how long each task waited before it started (``task_prerun``);
* a task whose signature takes ``account_id`` runs inside ``usage.metering``: the model
  calls it makes are billed to that Account;
* beat runs :class:`HeartbeatScheduler`, which stamps a heartbeat (a file in the beat
  container and a Redis key) on every tick; :func:`check_beat` is its health check (a
  worker's is ``celery -A memhouse inspect ping -d worker@$HOSTNAME``).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from celery import Celery
from celery.beat import PersistentScheduler
from celery.signals import before_task_publish, task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memhouse.settings")

log = logging.getLogger(__name__)

app = Celery("memhouse")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

from memhouse.core.celery_schedule import BEAT_SCHEDULE  # noqa: E402
from memhouse.observability import (  # noqa: E402
    BEAT_HEARTBEAT_KEY,
    ENQUEUED_HEADER,
    TASK_LAG_KEY,
)

app.conf.beat_schedule = BEAT_SCHEDULE
app.conf.beat_scheduler = "memhouse.celery:HeartbeatScheduler"
# Beat wakes at least this often (default 300 s), so its heartbeat stays fresh.
HEARTBEAT_EVERY_SECONDS = 15.0
app.conf.beat_max_loop_interval = HEARTBEAT_EVERY_SECONDS

BEAT_HEARTBEAT_MAX_AGE = 60.0


def _broker_redis() -> Any:
    import redis

    url = app.conf.broker_url or os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    return redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)


# --- publish time and worker start lag -------------------------------------------------

@before_task_publish.connect
def stamp_enqueue_time(headers: dict[str, Any] | None = None, **_: Any) -> None:
    if headers is not None:
        headers.setdefault(ENQUEUED_HEADER, time.time())


def record_start_lag(task_name: str, lag: float, client: Any = None) -> None:
    """Add one observation to the per-task start lag kept in the broker's Redis, where
    the web process reads it at scrape time (sum, count, last and max per task)."""
    lag = max(0.0, lag)
    try:
        client = client or _broker_redis()
        pipe = client.pipeline()
        pipe.hincrbyfloat(TASK_LAG_KEY, f"{task_name}|sum", lag)
        pipe.hincrby(TASK_LAG_KEY, f"{task_name}|count", 1)
        pipe.hset(TASK_LAG_KEY, f"{task_name}|last", lag)
        pipe.execute()
        # Max since the last scrape that reset it (the scraper sets it back to 0).
        current = client.hget(TASK_LAG_KEY, f"{task_name}|max")
        if current is None or float(current) < lag:
            client.hset(TASK_LAG_KEY, f"{task_name}|max", lag)
    except Exception:  # metrics never fail a task
        log.debug("could not record task start lag", exc_info=True)


_meter_tokens: dict[str, Any] = {}


def _account_argument(task: Any, args: Any, kwargs: Any) -> str | None:
    if kwargs and kwargs.get("account_id"):
        return str(kwargs["account_id"])
    try:
        names = list(inspect.signature(task.run).parameters)
    except (TypeError, ValueError):
        return None
    if "account_id" in names and args and len(args) > names.index("account_id"):
        value = args[names.index("account_id")]
        return str(value) if value else None
    return None


@task_prerun.connect
def on_task_start(task_id: str | None = None, task: Any = None, args: Any = None,
                  kwargs: Any = None, **_: Any) -> None:
    if task is None:
        return
    request = getattr(task, "request", None)
    enqueued = getattr(request, ENQUEUED_HEADER, None) if request is not None else None
    if enqueued is None and request is not None:
        enqueued = (getattr(request, "headers", None) or {}).get(ENQUEUED_HEADER)
    if enqueued is not None and not getattr(request, "is_eager", False):
        with contextlib.suppress(TypeError, ValueError):
            record_start_lag(task.name, time.time() - float(enqueued))
    account = _account_argument(task, args, kwargs)
    if account and task_id:
        import uuid

        from memhouse.core.metering import enter_meter

        try:
            uuid.UUID(account)
        except ValueError:
            return
        _meter_tokens[task_id] = enter_meter(account)


@task_postrun.connect
def on_task_end(task_id: str | None = None, **_: Any) -> None:
    token = _meter_tokens.pop(task_id or "", None)
    if token is not None:
        from memhouse.core.metering import leave_meter

        with contextlib.suppress(ValueError):  # set in another context: nothing to restore
            leave_meter(token)


# --- beat heartbeat --------------------------------------------------------------------

def heartbeat_file() -> Path:
    from memhouse.core.env import env_str

    return Path(env_str("MEMHOUSE_BEAT_HEARTBEAT_FILE", "/tmp/memhouse-beat-heartbeat"))


def beat_heartbeat(path: Path | None = None, client: Any = None) -> float:
    """Stamp the beat heartbeat: the file (checked in the beat container) and a Redis key
    (read by /metrics). Returns the stamp."""
    now = time.time()
    path = path or heartbeat_file()
    try:
        path.write_text(f"{now}\n", encoding="utf-8")
    except OSError:
        log.warning("beat heartbeat file %s is not writable", path)
    try:
        client = client or _broker_redis()
        client.set(BEAT_HEARTBEAT_KEY, json.dumps(
            {"at": now, "node": f"{socket.gethostname()}:{os.getpid()}"}), ex=3600)
    except Exception:
        log.debug("beat heartbeat: Redis unavailable", exc_info=True)
    return now


class HeartbeatScheduler(PersistentScheduler):
    """The default persistent scheduler, stamping a heartbeat on every tick."""

    def tick(self, *args: Any, **kwargs: Any) -> float:
        interval = super().tick(*args, **kwargs)
        beat_heartbeat()
        return min(float(interval), HEARTBEAT_EVERY_SECONDS)


def check_beat(max_age: float = BEAT_HEARTBEAT_MAX_AGE, path: Path | None = None) -> int:
    """Health check of the beat container: 0 when its heartbeat file is fresh, else 1.

    ``python -c "import sys, memhouse.celery as c; sys.exit(c.check_beat())"``"""
    path = path or heartbeat_file()
    try:
        age = time.time() - float(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        print(f"beat: no heartbeat at {path}")
        return 1
    if age > max_age:
        print(f"beat: heartbeat is {age:.0f}s old (limit {max_age:.0f}s)")
        return 1
    print(f"beat: ok ({age:.1f}s)")
    return 0

