"""A real Celery worker subprocess is SIGKILLed while it runs an ingest pipeline task; a
new worker gets the task again from Redis and finishes it, and the outcome is idempotent.

The task is slow in a real way: the batch's second message waits on the (loopback fake)
generation provider, which holds that first request open. By then the first message of
the batch is already extracted and committed. Settings under test: acks_late (the task
stays unacknowledged in Redis while it runs), reject-on-worker-lost, and a short Redis
visibility timeout (MEMHOUSE_CELERY_VISIBILITY_TIMEOUT) after which the unacknowledged
task is delivered again. Redelivery must process each message exactly once: no second
model call and no duplicate knowledge for the message done before the crash, one
statement for the interrupted one, and an audit chain that verifies.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection

from knowledge import audit, services
from knowledge.models import Knowledge, KnowledgeSource, Message
from memhouse.core.tenancy import account_context
from tests.fake_llm import FakeOpenAI, Reply, ok
from tests.queue_support import real_broker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.queue]
REPO = Path(__file__).resolve().parents[2]
BROKER = "redis://127.0.0.1:6379/13"  # its own database, emptied by the test
QUEUE = "memhouse-crash-test"
VISIBILITY_TIMEOUT = 3
CLAIMS = {"greyhound": "Caroline adopted a greyhound named Pixel.",
          "cello": "Caroline started learning the cello."}


class SlowModel:
    """The fake provider (tests.fake_llm) answering every request at once with one claim,
    except the first about the cello, which hangs until released."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.release = threading.Event()
        self.hanging = threading.Event()
        self.fake = FakeOpenAI(default=self._answer).start()
        self.url = self.fake.base_url

    def _answer(self, request: dict[str, Any]) -> Reply:
        # The cello message also shows the greyhound claim as a current statement.
        topic = "cello" if "cello" in json.dumps(request["json"]) else "greyhound"
        self.seen.append(topic)
        if topic == "cello" and self.seen.count("cello") == 1:
            self.hanging.set()
            self.release.wait(120)
        return ok({"claims": [{
            "statement": CLAIMS[topic], "subject": "speaker", "kind": "event",
            "confidence": 0.8, "sensitivity": "internal", "relative_date": None,
            "absolute_from": None, "absolute_until": None, "evidence": topic,
            "replaces": None}]})

    def close(self) -> None:
        self.release.set()
        self.fake.close()


@pytest.fixture
def broker():
    yield from real_broker(BROKER, QUEUE)


@pytest.fixture
def model():
    fake = SlowModel()
    yield fake
    fake.close()


def _start_worker(name: str, model: SlowModel, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ,
           "DJANGO_SETTINGS_MODULE": "tests.reliability.worker_settings",
           "MEMHOUSE_WORKER_DB_NAME": str(connection.settings_dict["NAME"]),
           "MEMHOUSE_WORKER_DEFAULT_QUEUE": f"{QUEUE}-followups",
           "CELERY_BROKER_URL": BROKER, "MEMHOUSE_CELERY_EAGER": "false",
           "MEMHOUSE_CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
           "MEMHOUSE_LLM_BASE_URL": model.url, "MEMHOUSE_LLM_MODEL": "fake-extractor",
           "MEMHOUSE_LLM_TIMEOUT": "120", "PYTHONUNBUFFERED": "1"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "memhouse", "worker", "-P", "solo",
             "-Q", QUEUE, "-n", f"{name}@%h", "--without-gossip", "--without-mingle",
             "--without-heartbeat", "-l", "INFO"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait(predicate: Any, seconds: float, what: str, log: Path) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}; worker log:\n{log.read_text()[-4000:]}")


def _stop(worker: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    if worker.poll() is None:
        os.killpg(worker.pid, sig)
        worker.wait(30)


def test_a_worker_killed_mid_task_is_redelivered_and_nothing_is_done_twice(
        live_server, committed_world, broker, model, tmp_path):
    w = committed_world
    log = tmp_path / "workers.log"
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
    r = httpx.post(f"{live_server.url}/api/v1/messages", timeout=30,
                   headers={"Authorization": f"Bearer {w.agent_key}"},
                   json={"scope": "/", "messages": [
                       {"id": "m1", "peer_key": "caroline",
                        "text": "I adopted a greyhound named Pixel."},
                       {"id": "m2", "peer_key": "caroline",
                        "text": "I started learning the cello."}]})
    assert r.status_code == 202, r.text
    assert broker.llen(QUEUE) == 1  # one pipeline task for the batch

    def extracted(client_id: str) -> bool:
        with account_context(w.account.id):
            return Message.objects.filter(client_message_id=client_id,
                                          extracted_at__isnull=False).exists()

    first = _start_worker("crash1", model, log)
    try:
        _wait(model.hanging.is_set, 90, "the worker to reach the slow model call", log)
        assert extracted("m1") and not extracted("m2")  # m1 committed before the crash
        os.killpg(first.pid, signal.SIGKILL)  # the worker dies mid-task, no cleanup
        first.wait(30)
        killed_at = time.monotonic()
    finally:
        _stop(first)
    assert first.returncode == -signal.SIGKILL
    assert broker.llen(QUEUE) == 0 and broker.hlen("unacked") == 1  # held, not acked

    # Past the visibility timeout a new worker restores the task and runs it again.
    time.sleep(max(0.0, VISIBILITY_TIMEOUT + 0.5 - (time.monotonic() - killed_at)))
    second = _start_worker("crash2", model, log)
    try:
        _wait(lambda: extracted("m2"), 120, "the redelivered task to finish", log)
        _wait(lambda: broker.hlen("unacked") == 0, 30, "the redelivered task's ack", log)
    finally:
        _stop(second, signal.SIGTERM)
        _stop(second)

    # m1 was not sent to the model again; m2 was asked twice (the crash, the redelivery).
    assert sorted(model.seen) == ["cello", "cello", "greyhound"]
    with account_context(w.account.id):
        for client_id, statement in (("m1", CLAIMS["greyhound"]), ("m2", CLAIMS["cello"])):
            msg = Message.objects.get(client_message_id=client_id)
            sources = KnowledgeSource.objects.filter(message=msg)
            assert sources.count() == 1, client_id  # exactly one proposal per message
            assert Knowledge.objects.filter(statement=statement).count() == 1
        assert Knowledge.objects.count() == 2
        assert not Message.objects.filter(extracted_at__isnull=True).exists()
        result = audit.verify(w.account.id)
        assert result.ok, result
    assert broker.llen(QUEUE) == 0
