"""The crash counter (issue 34 item 3): a source whose processing keeps being cut off is
set aside, not swept for ever.

A real Celery worker subprocess is SIGKILLed while it writes a poison input's statements
(a PostgreSQL trigger holds the insert on an advisory lock the test owns, so the worker
is caught mid-task at a known point, with the task's start already committed). The
sweeper re-enqueues the cut-off source until it has started MEMHOUSE_MAX_INGEST_ATTEMPTS
times, then sets it aside as `crashed_repeatedly` instead of queueing it again; messages
cut off once go back one per task, so the poison one is counted alone and the rest of
its batch is extracted. A task delivered again after the cap (a broker redelivery) sets
the source aside instead of running it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from knowledge import services
from knowledge.models import Document, DocumentVersion, Knowledge, Message
from memhouse.core.tenancy import account_context
from tests.queue_support import real_broker
from tests.reliability.helpers import api, row_trigger

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.queue]
REPO = Path(__file__).resolve().parents[2]
BROKER = "redis://127.0.0.1:6379/12"  # its own database, emptied by each test
QUEUE = "memhouse-crash-counter-test"
CAP = 2
LOCK = 734001  # the advisory lock a poison statement's insert waits on

@pytest.fixture
def broker() -> Iterator[Any]:
    yield from real_broker(BROKER, QUEUE)


@pytest.fixture
def poison(settings: Any) -> Iterator[None]:
    """The trigger, the lock held by this test's connection, and the cap (this process
    runs the sweeper; the workers get it from the environment)."""
    settings.MEMHOUSE_MAX_INGEST_ATTEMPTS = CAP
    with row_trigger("test_hold_poison", "memhouse_knowledge", "INSERT",
                     "NEW.statement LIKE '%Zanzibar%'", f"PERFORM pg_advisory_xact_lock({LOCK})"):
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", [LOCK])
        try:
            yield
        finally:
            with connection.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock_all()")


# The pools a worker may run (docs/deploy.md "Worker pools"): solo, and the threads
# pool with two threads, whose tasks run side by side in one process.
POOLS = {"solo": ["-P", "solo"], "threads": ["-P", "threads", "--concurrency", "2"]}


def _start_worker(name: str, log: Path, pool: str = "solo") -> subprocess.Popen[bytes]:
    env = {**os.environ,
           "DJANGO_SETTINGS_MODULE": "tests.reliability.worker_settings",
           "MEMHOUSE_WORKER_DB_NAME": str(connection.settings_dict["NAME"]),
           "MEMHOUSE_WORKER_DEFAULT_QUEUE": f"{QUEUE}-followups",
           "CELERY_BROKER_URL": BROKER, "MEMHOUSE_CELERY_EAGER": "false",
           "MEMHOUSE_EXTRACTOR": "rule", "MEMHOUSE_LLM_BASE_URL": "",
           "MEMHOUSE_MAX_INGEST_ATTEMPTS": str(CAP), "PYTHONUNBUFFERED": "1"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "memhouse", "worker", *POOLS[pool],
             "-Q", QUEUE, "-n", f"{name}@%h", "--without-gossip", "--without-mingle",
             "--without-heartbeat", "-l", "INFO"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait(predicate: Any, what: str, log: Path, seconds: float = 120) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}; worker log:\n{log.read_text()[-4000:]}")


def _held() -> bool:
    """A worker's insert of a poison statement waits on the test's lock."""
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND objid = %s AND NOT granted", [LOCK])
        return bool(cur.fetchone()[0])


def _kill_mid_task(name: str, log: Path, done: Any = lambda: True,
                   pool: str = "solo") -> None:
    """Start a worker, wait until it holds in the poison insert (and `done`), SIGKILL it
    (no cleanup, its task unacknowledged), then let the orphaned transaction roll back."""
    worker = _start_worker(name, log, pool)
    try:
        # A worker's start-up takes seconds, minutes on a loaded machine.
        _wait(lambda: _held() and done(), f"{name} to reach the poison insert", log, 300)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(30)
        assert worker.returncode == -signal.SIGKILL
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(30)
    with connection.cursor() as cur:  # the dead worker's backend rolls back its write
        cur.execute("SELECT pg_advisory_unlock(%s)", [LOCK])
    _wait(lambda: not _held(), "the dead worker's transaction to end", log, 60)
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s)", [LOCK])


def _admin_key(w: Any) -> str:
    with account_context(w.account.id):
        dave = services.peer_create(account_id=w.account.id, key="dave", kind="human",
                                    display_name="Dave", password="dave-pass-1234",
                                    is_admin=True)
        return services.token_issue(peer=dave)[1]


def test_a_version_cut_off_at_every_start_is_set_aside_by_the_sweeper(
        live_server: Any, committed_world: Any, broker: Any, poison: Any,
        tmp_path: Path) -> None:
    from governance.tasks import sweep_unprocessed

    w, log = committed_world, tmp_path / "workers.log"
    admin = _admin_key(w)
    r = api(live_server, w.agent_key, "POST", "documents", json={
        "scope": "/marketing/social", "title": "Moves",
        "text": "The office moves to Zanzibar in June."})
    assert r.status_code == 201, r.text
    doc, version_id = r.json()["document_id"], r.json()["version_id"]
    assert broker.llen(QUEUE) == 1

    def attempts() -> int:
        with account_context(w.account.id):
            return DocumentVersion.objects.get(pk=version_id).processing_attempts

    # Each start is counted before the work: the count survives the kill.
    for round_ in range(1, CAP + 1):
        _kill_mid_task(f"version{round_}", log)
        assert attempts() == round_
        assert broker.llen(QUEUE) == 0
        queued = sweep_unprocessed(older_than_seconds=0)
        if round_ < CAP:
            assert queued == 1 and broker.llen(QUEUE) == 1  # swept back for another try

    # At the cap the sweeper set it aside instead of queueing it a third time.
    assert queued == 0 and broker.llen(QUEUE) == 0
    assert sweep_unprocessed(older_than_seconds=0) == 0 and broker.llen(QUEUE) == 0
    detail = api(live_server, w.agent_key, "GET", f"documents/{doc}").json()
    assert detail["processing"] == "failed"
    assert detail["versions"][0]["error"] == "crashed_repeatedly"
    metrics = httpx.get(f"{live_server.url}/metrics", timeout=30).text
    assert "memhouse_document_versions_dead_lettered 1.0" in metrics
    [item] = api(live_server, admin, "GET", "admin/dead-letters").json()["items"]
    assert (item["kind"], item["id"], item["document_id"], item["version"]) == (
        "document_version", version_id, doc, 1)
    assert (item["error"], item["attempts"]) == ("crashed_repeatedly", CAP)
    assert f"started {CAP} times" in item["error_message"]
    with account_context(w.account.id):
        assert not Knowledge.objects.exists()  # every cut-off write was rolled back
        assert Document.objects.count() == 1


@pytest.mark.parametrize("pool", ["solo", "threads"])
def test_a_message_cut_off_at_every_start_is_set_aside_and_its_batch_is_not(
        live_server: Any, committed_world: Any, broker: Any, poison: Any,
        tmp_path: Path, pool: str) -> None:
    from governance.tasks import sweep_unprocessed

    w, log = committed_world, tmp_path / "workers.log"
    admin = _admin_key(w)
    r = api(live_server, w.agent_key, "POST", "messages", json={
        "scope": "/", "messages": [
            {"peer_key": "alice", "text": "I adopted a rescue greyhound named Pixel.",
             "id": "good"},
            {"peer_key": "alice", "text": "I moved to Zanzibar last year.", "id": "poison"}]})
    assert r.status_code == 202, r.text
    assert broker.llen(QUEUE) == 1  # one task for the batch

    def state(client_id: str) -> tuple[bool, bool, int]:
        with account_context(w.account.id):
            m = Message.objects.get(client_message_id=client_id)
            return m.extracted_at is not None, m.extraction_failed_at is not None, \
                m.extraction_attempts

    # The batch is cut off: both messages were started once.
    _kill_mid_task("batch", log, pool=pool)
    assert state("good") == (False, False, 1) and state("poison") == (False, False, 1)
    # Cut off before, each goes back alone: the poison one cannot take the other along.
    assert sweep_unprocessed(older_than_seconds=0) == 2
    assert broker.llen(QUEUE) == 2
    # (With two threads the good one runs beside the held poison one.)
    _kill_mid_task("alone", log, done=lambda: state("good")[0], pool=pool)
    assert state("good") == (True, False, 2)
    assert state("poison") == (False, False, 2)

    # At the cap: set aside, not re-enqueued.
    assert broker.llen(QUEUE) == 0
    assert sweep_unprocessed(older_than_seconds=0) == 0 and broker.llen(QUEUE) == 0
    assert state("poison") == (False, True, 2)
    [item] = api(live_server, admin, "GET", "admin/dead-letters").json()["items"]
    assert (item["kind"], item["client_message_id"], item["error"], item["attempts"]) == (
        "message", "poison", "crashed_repeatedly", 2)
    assert "Zanzibar" not in str(item)
    metrics = httpx.get(f"{live_server.url}/metrics", timeout=30).text
    assert "memhouse_messages_dead_lettered 1.0" in metrics
    with account_context(w.account.id):
        assert Knowledge.objects.filter(statement__icontains="greyhound").exists()
        assert not Knowledge.objects.filter(statement__icontains="Zanzibar").exists()


def test_a_task_delivered_again_past_the_cap_sets_its_source_aside(
        committed_world: Any, settings: Any) -> None:
    """A broker redelivery (the visibility timeout) after the last allowed start does
    not run the work again: the task's own start sets the source aside."""
    from governance.tasks import process_document_version, process_messages
    from knowledge.ingest.dead_letter import start_messages, start_version

    settings.MEMHOUSE_MAX_INGEST_ATTEMPTS = CAP
    w = committed_world
    text = "The office moves to Leeds in June."
    with account_context(w.account.id):  # stored, their tasks not run (as after a crash)
        msg = Message.objects.create(account=w.account, peer=w.subject, scope=w.root,
                                     text="I adopted a rescue greyhound named Pixel.",
                                     occurred_at=timezone.now())
        document = Document.objects.create(account=w.account, scope=w.scope, peer=w.agent,
                                           title="Moves")
        version = DocumentVersion.objects.create(
            account=w.account, document=document, number=1, blob=text.encode(),
            sha256="0" * 64, text=text)
    # Started CAP times and cut off each time (the count a killed worker leaves).
    for _ in range(CAP):
        assert start_messages(w.account.id, [msg.pk]) == [str(msg.pk)]
        assert start_version(w.account.id, version.pk)
    assert process_messages(str(w.account.id), [str(msg.pk)]) == 0
    assert process_document_version(str(w.account.id), str(version.pk)) == 0
    with account_context(w.account.id):
        msg.refresh_from_db()
        version.refresh_from_db()
        assert msg.extracted_at is None and msg.extraction_attempts == CAP
        assert msg.extraction_error.startswith("crashed_repeatedly:")
        assert version.processed_at is None and version.processing_attempts == CAP
        assert version.processing_error.startswith("crashed_repeatedly:")
        assert not Knowledge.objects.exists()



def test_a_model_batch_counts_each_message_when_its_turn_comes(
        committed_world: Any, fake_openai: Any) -> None:
    """With a model the batch goes one message at a time: a message counts its start
    just before its own model call, so a worker killed on the first message has not
    charged the ones after it (they go back with their attempts untouched)."""
    from governance.tasks import process_messages
    from tests.fake_llm import Reply, ok

    w = committed_world
    with account_context(w.account.id):
        ids = [str(Message.objects.create(account=w.account, peer=w.subject, scope=w.root,
                                          text=text, occurred_at=timezone.now()).pk)
               for text in ("I adopted a rescue greyhound named Pixel.",
                            "I started learning the cello.")]
    seen: list[list[int]] = []

    def answer(request: dict[str, Any]) -> Reply:
        # What the database holds while the model works on a message (a fresh
        # connection of this server thread, as another process would see it).
        from django.db import connection as thread_connection

        with account_context(w.account.id):
            seen.append([Message.objects.get(pk=i).extraction_attempts for i in ids])
        thread_connection.close()
        return ok({"claims": []})

    fake_openai.default = answer
    process_messages(str(w.account.id), ids)
    assert seen == [[1, 0], [1, 1]]
