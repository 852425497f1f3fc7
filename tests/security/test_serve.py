"""`manage.py serve` (issue 16, item 3 and the served-mode sweeper): no constant password,
no new non-expiring key on every start, and background work that never runs inside the
web request (an in-process worker thread) plus a periodic sweeper for messages accepted
but never extracted."""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from celery.signals import task_prerun
from django.core.management import call_command
from django.utils import timezone
from rest_framework.test import APIClient

from tests.reliability.helpers import api

pytestmark = pytest.mark.django_db(transaction=True)


def _serve(*args: str) -> str:
    out = StringIO()
    call_command("serve", "--no-run", *args, stdout=out)
    return out.getvalue()


def _me(key: str) -> Any:
    return APIClient().get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {key}")


def _live_demo_keys(text: str) -> int:
    from knowledge.models import Credential
    from memhouse.core.tenancy import account_context

    account_id = re.search(r"Account:\s+demo \(([0-9a-f-]+)\)", text).group(1)
    with account_context(account_id):
        return Credential.objects.filter(name="demo key", revoked_at__isnull=True).count()


def test_serve_prints_a_random_password_once_and_reuses_or_rotates_its_key():
    first = _serve()
    password = re.search(r"demo-curator / (\S+)", first).group(1)
    key = re.search(r"API key:\s+(mh_\S+)", first).group(1)
    assert password != "demo-curator-pass" and len(password) >= 12
    r = APIClient().post("/api/v1/auth/token", {"username": "demo-curator",
                                                "password": password}, format="json")
    assert r.status_code == 201, r.content
    me = _me(key).json()
    assert me["peer_key"] == "demo-agent" and me["act_for"] == "all"  # the README relays

    again = _serve()
    assert password not in again and key not in again
    assert "kept from an earlier start" in again and "changepassword demo-curator" in again
    assert f"mh_{key.split('_')[1]}_..." in again
    assert _me(key).status_code == 200 and _live_demo_keys(again) == 1

    rotated = _serve("--rotate-key")
    new_key = re.search(r"API key:\s+(mh_\S+)", rotated).group(1)
    assert new_key != key and "previous demo key is revoked" in rotated
    assert _me(key).status_code == 401 and _me(new_key).status_code == 200
    assert _live_demo_keys(rotated) == 1


def _wait_extracted(account_id: Any, message_ids: list[str], timeout: float = 90) -> bool:
    from knowledge.models import Message
    from memhouse.core.tenancy import account_context

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with account_context(account_id):
            left = Message.objects.filter(id__in=message_ids, extracted_at__isnull=True).count()
        if left == 0:
            return True
        time.sleep(0.3)
    return False


def test_served_mode_extracts_outside_the_request_and_sweeps_lost_work(
        committed_world, live_server, settings):
    from knowledge.models import Message
    from memhouse.core.tenancy import account_context
    from memhouse.management.commands.serve import start_background_work

    settings.MEMHOUSE_RATE_LIMIT_PER_MINUTE = 0
    w = committed_world
    ran_on: list[str] = []

    def record(**_: Any) -> None:
        ran_on.append(threading.current_thread().name)

    task_prerun.connect(record, weak=False)
    work = start_background_work(sweep_every=0.5)
    try:
        r = api(live_server, w.agent_key, "POST", "messages", json={
            "scope": "/marketing/social",
            "messages": [{"peer_key": "alice", "text": "I love hiking in the Alps."}]})
        assert r.status_code == 202, r.text
        assert _wait_extracted(w.account.id, [r.json()["messages"][0]["id"]])
        # A message accepted whose dispatch was lost (a crash after the 202): the sweeper
        # finds it and the worker extracts it.
        with account_context(w.account.id):
            lost = Message.objects.create(
                account=w.account, peer=w.subject, scope=w.scope, text="I adore sailing.",
                occurred_at=timezone.now(), inserted_at=timezone.now() - timedelta(hours=1))
        assert _wait_extracted(w.account.id, [str(lost.id)])
    finally:
        work.stop()
        task_prerun.disconnect(record)
    assert ran_on and set(ran_on) == {"memhouse-worker"}, ran_on
    from memhouse.celery import app

    assert app.conf.task_always_eager  # restored for the rest of the suite
    from celery.result import task_join_will_block

    assert not task_join_will_block()  # result.get() may block again, as before the worker
