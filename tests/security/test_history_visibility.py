"""Issue #34 item 4: a row keeps, in history, the visibility it had while it lived. A
provisional claim about Alice (visible only to her) that a document revision supersedes
or that expires stays hers alone: members, agents, curators and the other Account never
read it through GET /knowledge?state=..., GET /knowledge/<id> or the console scope page
(real HTTP)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from knowledge import lifecycle, services
from knowledge.models import Knowledge
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)

CLAIM = "Alice is planning to leave the company in spring."


def call(base: str, key: str, method: str, path: str, body: Any = None,
         params: Any = None) -> httpx.Response:
    return httpx.request(method, f"{base}/api/v1/{path}", json=body, params=params,
                         timeout=60, headers={"Authorization": f"Bearer {key}"})


def _console(base: str, username: str, password: str) -> httpx.Client:
    client = httpx.Client(follow_redirects=False)
    page = client.get(f"{base}/console/login/", timeout=60)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert csrf is not None
    r = client.post(f"{base}/console/login/", timeout=60,
                    data={"username": username, "password": password,
                          "csrfmiddlewaretoken": csrf.group(1)},
                    headers={"Referer": f"{base}/console/login/"})
    assert r.status_code in (302, 303), r.text[:300]
    return client


def _provisional_about_alice(base: str, w: Any) -> tuple[str, Knowledge]:
    """The agent uploads a handbook whose claim about Alice waits for her (provisional)."""
    r = call(base, w.agent_key, "POST", "documents", {
        "scope": "/marketing/social", "title": "Notes", "wait": 10,
        "text": f"{CLAIM}\n\nThe office moves to Leeds in June."})
    assert r.status_code == 201, r.text
    with account_context(w.account.id):
        item = Knowledge.objects.get(statement__icontains="leave the company")
    assert item.state == lifecycle.PROVISIONAL, item.state
    assert item.subject_peer_id == w.subject.id
    return r.json()["document_id"], item


def _readers(w: Any) -> dict[str, str]:
    with account_context(w.account.id):
        _, bob = services.token_issue(peer=w.member)
        _, carol = services.token_issue(peer=w.curator)
        _, alice = services.token_issue(peer=w.subject)
    return {"bob": bob, "carol": carol, "agent": w.agent_key, "alice": alice,
            "mallory": w.outsider_key}


def _sees(base: str, key: str, item_id: Any, state: str) -> bool:
    listed = call(base, key, "GET", "knowledge", params={"state": state})
    assert listed.status_code in (200, 400), listed.text
    in_list = listed.status_code == 200 and any(
        row["id"] == str(item_id) for row in listed.json()["items"])
    one = call(base, key, "GET", f"knowledge/{item_id}")
    assert one.status_code in (200, 404), one.text
    assert in_list == (one.status_code == 200), (state, listed.text, one.text)
    return in_list


def test_a_superseded_provisional_claim_stays_its_subjects(live_server: Any,
                                                           committed_world: Any) -> None:
    w, base = committed_world, live_server.url
    doc, item = _provisional_about_alice(base, w)
    keys = _readers(w)
    # A revision that no longer says it supersedes it.
    r = call(base, w.agent_key, "POST", f"documents/{doc}/versions",
             {"text": "The office moves to Leeds in June.", "wait": 10})
    assert r.status_code == 201, r.text
    with account_context(w.account.id):
        item.refresh_from_db()
    assert item.state == lifecycle.SUPERSEDED
    for name in ("bob", "carol", "agent", "mallory"):
        assert not _sees(base, keys[name], item.id, "superseded"), name
    assert _sees(base, keys["alice"], item.id, "superseded")
    # The console's scope page: a curator does not see it either; Alice does.
    carol = _console(base, "carol", "carol-pass-123")
    page = carol.get(f"{base}/console/scopes/marketing/social/?state=superseded", timeout=60)
    assert page.status_code == 200
    assert "leave the company" not in page.text
    alice = _console(base, "alice", "alice-pass-123")
    page = alice.get(f"{base}/console/scopes/marketing/social/?state=superseded", timeout=60)
    assert page.status_code == 200 and "leave the company" in page.text


def test_an_expired_provisional_claim_stays_its_subjects(live_server: Any,
                                                         committed_world: Any) -> None:
    from governance.workers import expire_due

    w, base = committed_world, live_server.url
    _, item = _provisional_about_alice(base, w)
    keys = _readers(w)
    with account_context(w.account.id):
        Knowledge.objects.filter(pk=item.pk).update(
            expires_at=timezone.now() - timedelta(minutes=1))
    expire_due(w.account.id)
    with account_context(w.account.id):
        item.refresh_from_db()
    assert item.state == lifecycle.EXPIRED
    for name in ("bob", "carol", "agent", "mallory"):
        assert not _sees(base, keys[name], item.id, "expired"), name
    assert _sees(base, keys["alice"], item.id, "expired")


def test_a_superseded_shared_statement_stays_history_for_members(
        live_server: Any, committed_world: Any) -> None:
    """The rule narrows only what was never shared: an active statement that a revision
    supersedes is still history every member may read."""
    w, base = committed_world, live_server.url
    r = call(base, w.agent_key, "POST", "documents", {
        "scope": "/marketing/social", "title": "Office", "wait": 10,
        "text": "The office moves to Leeds in June."})
    assert r.status_code == 201, r.text
    with account_context(w.account.id):
        item = Knowledge.objects.get(statement__icontains="Leeds")
        if item.state != lifecycle.ACTIVE:  # an agent's scope claim waits for a curator
            lifecycle.transition(item, lifecycle.ACTIVE, actor=w.curator,
                                 reason="f4_curator_approved")
    r = call(base, w.agent_key, "POST", f"documents/{r.json()['document_id']}/versions",
             {"text": "The office moves to York in July.", "wait": 10})
    assert r.status_code == 201, r.text
    keys = _readers(w)
    for name in ("bob", "carol", "agent"):
        assert _sees(base, keys[name], item.id, "superseded"), name
    assert not _sees(base, keys["mallory"], item.id, "superseded")
