"""The audit lock and foreign-key checks never deadlock (issue #16, Low).

Every audited write holds the Account's audit advisory lock until it commits, and the
foreign keys are DEFERRABLE INITIALLY DEFERRED, so their checks (FOR KEY SHARE on the row
referred to) run at commit, after the audit lock. A web request that inserted a row
referring to a statement and appended to the audit therefore checked that key while
holding the audit lock, and a worker moving the same statement along its lifecycle had
locked it FOR UPDATE (which conflicts with KEY SHARE) and waited for the audit lock:
PostgreSQL aborted one (deadlock detected) and the web answered 503
database_unavailable. A transition changes only non-key columns, so it now locks FOR NO
KEY UPDATE, which KEY SHARE does not wait for.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, transaction

from governance import services as gs
from knowledge import audit
from knowledge.lifecycle import transition
from knowledge.models import AuditEntry, Knowledge, Relation
from memhouse.core.tenancy import account_context, set_account
from tests.governance.helpers import active_about

pytestmark = pytest.mark.django_db(transaction=True)


def _run(target: Any, errors: list[BaseException]) -> threading.Thread:
    def body() -> None:
        try:
            target()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def test_a_transition_does_not_deadlock_with_a_foreign_key_check(committed_world):
    w = committed_world
    with account_context(w.account.id):
        target = active_about(w, "Alice likes jazz.")
        other = active_about(w, "Alice likes blues.")
    web_holds_audit = threading.Event()
    errors: list[BaseException] = []

    def web() -> None:
        with transaction.atomic():
            set_account(w.account.id)
            # The FK check (FOR KEY SHARE on `target`) is deferred to this commit.
            Relation.objects.create(account_id=w.account.id, source=other, target=target,
                                    type="related")
            audit.append(account_id=w.account.id, event_type="test.web", actor="test:web")
            web_holds_audit.set()
            time.sleep(1.0)  # the worker now holds `target` and waits for the audit lock

    def worker() -> None:
        with transaction.atomic():
            set_account(w.account.id)
            assert web_holds_audit.wait(10)
            transition(Knowledge.objects.get(pk=target.pk), "needs_revalidation",
                       actor="system:test", reason="f4_revalidation_due")

    threads = [_run(web, errors), _run(worker, errors)]
    for t in threads:
        t.join(30)
    assert errors == [], [f"{type(e).__name__}: {e}" for e in errors]
    with account_context(w.account.id):
        assert Knowledge.objects.get(pk=target.pk).state == "needs_revalidation"
        assert Relation.objects.filter(target=target).exists()
        assert "test.web" in set(AuditEntry.objects.values_list("event_type", flat=True))
        assert audit.verify(w.account.id).ok


def test_a_curator_decision_does_not_deadlock_with_a_foreign_key_check(committed_world):
    """The governance services re-read a statement under the same lock as transition."""
    w = committed_world
    with account_context(w.account.id):
        target = active_about(w, "Alice likes jazz.")
        other = active_about(w, "Alice likes blues.")
    web_holds_audit = threading.Event()
    errors: list[BaseException] = []

    def web() -> None:
        with transaction.atomic():
            set_account(w.account.id)
            Relation.objects.create(account_id=w.account.id, source=other, target=target,
                                    type="related")
            audit.append(account_id=w.account.id, event_type="test.web", actor="test:web")
            web_holds_audit.set()
            time.sleep(1.0)

    def subject() -> None:
        with transaction.atomic():
            set_account(w.account.id)
            assert web_holds_audit.wait(10)
            gs.knowledge_contest(item=Knowledge.objects.get(pk=target.pk), actor=w.subject,
                                 reason="not true")

    threads = [_run(web, errors), _run(subject, errors)]
    for t in threads:
        t.join(30)
    assert errors == [], [f"{type(e).__name__}: {e}" for e in errors]
    with account_context(w.account.id):
        assert Knowledge.objects.get(pk=target.pk).state == "contested"


@pytest.mark.parametrize("retries", [3, 0])
def test_a_request_that_meets_a_deadlock_runs_again(committed_world, live_server, settings,
                                                    no_rate_limit, retries):
    """Over real HTTP: an ingest request holds the audit lock when its deferred foreign-key
    check (on its peer) waits for a transaction that locked that peer FOR UPDATE (as
    erasure does) and then waits for the audit lock. PostgreSQL aborts the request's
    transaction; it is run again and succeeds (or, with retries off, is a 409
    write_conflict), never a 503 database_unavailable."""
    import httpx

    from knowledge.models import Message, Peer

    w = committed_world
    settings.MEMHOUSE_WRITE_CONFLICT_RETRIES = retries
    locked = threading.Event()
    errors: list[BaseException] = []

    def other() -> None:
        with transaction.atomic():
            set_account(w.account.id)
            Peer.objects.select_for_update().get(pk=w.agent.pk)
            locked.set()
            deadline = time.monotonic() + 20
            with connection.cursor() as cur:  # until the request waits for the peer row
                while time.monotonic() < deadline:
                    cur.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                    if cur.fetchone()[0]:
                        break
                    time.sleep(0.05)
            time.sleep(0.3)  # the request's deadlock check comes first: it is the victim
            audit.append(account_id=w.account.id, event_type="test.other", actor="test:other")

    thread = _run(other, errors)
    assert locked.wait(10)
    r = httpx.post(f"{live_server.url}/api/v1/messages", timeout=60,
                   headers={"Authorization": f"Bearer {w.agent_key}"},
                   json={"scope": "/", "messages": [{"text": "I adopted a cat named Pixel."}]})
    thread.join(30)
    assert errors == [], [f"{type(e).__name__}: {e}" for e in errors]
    with account_context(w.account.id):
        stored = Message.objects.count()
        assert audit.verify(w.account.id).ok
    if retries:
        assert r.status_code == 202, r.text
        assert stored == 1
    else:
        assert r.status_code == 409, r.text
        assert r.json()["error"]["code"] == "write_conflict"
        assert r.headers["Retry-After"] == "1"
        assert stored == 0
