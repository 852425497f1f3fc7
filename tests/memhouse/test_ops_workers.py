"""Worker lag metrics and the worker/beat health checks, against the real Redis on a
private database (13) and a private queue, with real `celery worker` / `celery beat`
subprocesses started with the commands compose.yaml gives them."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis as redis_lib
from prometheus_client import generate_latest

from memhouse import celery as mh_celery
from memhouse.observability import broker_metrics
from tests.memhouse.test_ops_compose import ROOT, command_words, compose

pytestmark = pytest.mark.queue
BROKER = "redis://127.0.0.1:6379/13"
CELERY = str(Path(sys.executable).with_name("celery"))


@pytest.fixture
def broker() -> Any:
    client = redis_lib.Redis.from_url(BROKER)
    try:
        client.ping()
    except redis_lib.RedisError:
        pytest.skip("no Redis on 127.0.0.1:6379")
    before = set(client.keys("*"))
    yield client
    created = set(client.keys("*")) - before
    if created:
        client.delete(*created)
    client.hdel(mh_celery.TASK_LAG_KEY, *[k for k in client.hkeys(mh_celery.TASK_LAG_KEY)
                                          if b"celery.accumulate" in k] or [b"-"])


def worker_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMHOUSE_", "CELERY_"))}
    env.update(REDIS_URL=BROKER, MEMHOUSE_CELERY_EAGER="false", **extra)
    return env


def scrape(url: str = BROKER) -> str:
    return generate_latest(broker_metrics(url)).decode()


def sample(text: str, name: str, **labels: str) -> float | None:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pattern = rf"^{re.escape(name)}(?:\{{{re.escape(want)}\}})? (\S+)$" if want else \
        rf"^{re.escape(name)} (\S+)$"
    match = re.search(pattern, text, re.M)
    return float(match.group(1)) if match else None


def publish(queue: str) -> None:
    with mh_celery.app.connection_for_write(BROKER) as conn:
        mh_celery.app.send_task("celery.accumulate", args=[1], queue=queue, connection=conn)


def wait_for(predicate: Any, seconds: float, what: str, proc: Any = None,
             log: Path | None = None) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: process exited\n{log.read_text() if log else ''}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: timed out\n{log.read_text() if log else ''}")
        time.sleep(0.3)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_published_tasks_carry_their_enqueue_time_and_the_oldest_age_is_scraped(broker):
    queue = f"mh-test-{uuid.uuid4().hex[:8]}"
    publish(queue)
    time.sleep(0.2)
    publish(queue)
    raw = broker.lindex(queue, -1)  # the oldest message
    stamp = json.loads(raw)["headers"][mh_celery.ENQUEUED_HEADER]
    assert abs(time.time() - stamp) < 30
    text = generate_latest(broker_metrics(BROKER, now=stamp + 42)).decode()
    assert sample(text, "memhouse_queue_oldest_message_age_seconds", queue=queue) == 42.0
    assert sample(text, "memhouse_queue_depth", queue=queue) == 2.0
    from django.conf import settings

    for named in settings.MEMHOUSE_QUEUE_TASKS:  # reported before their first message
        assert sample(text, "memhouse_queue_depth", queue=named) is not None, named
    # Empty queues report 0 s; a stranger's queue without our header reports NaN.
    broker.delete(queue)
    broker.lpush(queue, json.dumps({"headers": {}, "body": ""}))
    text = scrape()
    assert str(sample(text, "memhouse_queue_oldest_message_age_seconds", queue=queue)) == "nan"
    broker.delete(queue)
    assert sample(scrape(), "memhouse_queue_oldest_message_age_seconds", queue=queue) == 0.0


def test_a_real_worker_records_start_lag_and_answers_its_compose_health_check(broker,
                                                                              tmp_path):
    queue = f"mh-test-{uuid.uuid4().hex[:8]}"
    publish(queue)  # waits before any worker exists: a measurable start lag
    time.sleep(1.0)
    service = compose()["services"]["worker-extraction"]
    words = command_words(service)
    assert words[0] == "celery"
    at = words.index("-Q")  # its named queue, replaced by the test's private one below
    words = words[:at] + words[at + 2:]
    host = f"mhtest{uuid.uuid4().hex[:8]}"
    # The compose command, plus a private queue and a single process for the test.
    args = [CELERY, *words[1:], "-Q", queue, "-P", "solo", "--without-mingle",
            "--without-gossip"]
    args = [a.replace("%h", host) for a in args]
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(args, cwd=ROOT, env=worker_env(), stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: broker.llen(queue) == 0 and sample(
            scrape(), "memhouse_task_start_lag_seconds_count", task="celery.accumulate"),
            120, "worker consumed the task", proc, log)
        text = scrape()
        assert sample(text, "memhouse_task_start_lag_seconds_count",
                      task="celery.accumulate") >= 1
        assert sample(text, "memhouse_task_start_lag_last_seconds",
                      task="celery.accumulate") >= 1.0
        assert sample(text, "memhouse_queue_oldest_message_age_seconds", queue=queue) == 0.0
        check = service["healthcheck"]["test"]
        assert check[0] == "CMD-SHELL"
        shell = check[1].replace("$$", "$").replace("celery ", f"{CELERY} ", 1)
        ok = subprocess.run(["sh", "-c", shell], cwd=ROOT, env=worker_env(HOSTNAME=host),
                            capture_output=True, timeout=120)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        other = subprocess.run(["sh", "-c", shell.replace("-t 10", "-t 2")], cwd=ROOT,
                               env=worker_env(HOSTNAME=f"{host}x"), capture_output=True,
                               timeout=120)
        assert other.returncode != 0  # another node's name gets no answer
    finally:
        stop(proc)


def test_beat_heartbeat_and_its_health_check(broker, tmp_path):
    heartbeat = tmp_path / "heartbeat"
    service = compose()["services"]["beat"]
    check = service["healthcheck"]["test"]
    assert check[:2] == ["CMD", "python"]

    def run_check() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, *check[2:]], cwd=ROOT, timeout=60,
                              capture_output=True,
                              env=worker_env(MEMHOUSE_BEAT_HEARTBEAT_FILE=str(heartbeat)))

    assert run_check().returncode == 1  # never stamped
    words = command_words(service)
    assert "/var/lib/memhouse/celerybeat-schedule" in words  # on the beatstate volume
    args = [CELERY, *(str(tmp_path / "schedule") if w.startswith("/var/lib/memhouse") else w
                      for w in words[1:])]
    log = tmp_path / "beat.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                env=worker_env(MEMHOUSE_BEAT_HEARTBEAT_FILE=str(heartbeat)))
    try:
        wait_for(heartbeat.exists, 90, "beat stamped its heartbeat", proc, log)
        result = run_check()
        assert result.returncode == 0, result.stdout
        age = sample(scrape(), "memhouse_beat_heartbeat_age_seconds")
        assert age is not None and 0 <= age < 60
        node = json.loads(broker.get(mh_celery.BEAT_HEARTBEAT_KEY))["node"]
        assert node.startswith(socket.gethostname())
    finally:
        stop(proc)
    heartbeat.write_text(f"{time.time() - 600}\n")  # a beat that stopped ticking
    assert run_check().returncode == 1
    assert mh_celery.check_beat(path=heartbeat, max_age=3600) == 0
