"""What an administrator can do to other people (issue #34, items 5 and 6, and the
deactivation Low item), tried over real HTTP against a live server.

5. Re-inviting someone who has a password let the administrator set it and become them,
   with the victim's tokens still valid and the acceptance audited as the victim. An
   invitation is for someone without a password; a reset revokes everything and is
   audited as the administrator; accepting revokes tokens and console sessions.
6. An administrator limited to /marketing could PATCH themself to '/' or create an
   administrator with '/'. Grants now stay inside the granter's own.
Low: a deactivated person's console cookie worked again after reactivation.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from knowledge import people, services
from knowledge.models import AuditEntry, Credential
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)


def call(base: str, key: str | None, method: str, path: str, body: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, f"{base}/api/v1/{path}", json=body, headers=headers,
                         timeout=60)


def _token(peer: Any, account_id: Any) -> str:
    with account_context(account_id):
        return services.token_issue(peer=peer)[1]


def _csrf(client: httpx.Client, path: str) -> str:
    page = client.get(path)
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert found is not None, page.text[:500]
    return found.group(1)


def sign_in(base: str, username: str, password: str) -> httpx.Client:
    browser = httpx.Client(base_url=base, timeout=60)
    r = browser.post("/console/login/", data={
        "username": username, "password": password,
        "csrfmiddlewaretoken": _csrf(browser, "/console/login/")},
        headers={"Referer": f"{base}/console/login/"})
    assert r.status_code == 302, r.text[:500]
    return browser


def accept(base: str, url: str, password: str) -> httpx.Response:
    """What the invitee's browser does with the link: the part after '#' never reaches
    the server; the page posts it, then the password form."""
    assert url.startswith(base)
    path, _, code = url[len(base):].partition("#")
    browser = httpx.Client(base_url=base, timeout=60)
    r = browser.post("/console/invitation/code/", data={
        "token": code, "csrfmiddlewaretoken": _csrf(browser, path)},
        headers={"Referer": f"{base}{path}"})
    assert r.status_code == 303, r.text[:500]
    return browser.post("/console/invitation/", data={
        "password": password, "password_again": password,
        "csrfmiddlewaretoken": _csrf(browser, "/console/invitation/")},
        headers={"Referer": f"{base}/console/invitation/"})


@pytest.fixture
def dave(committed_world: Any) -> tuple[Any, str]:
    """The Account's administrator, with '/' and a login token."""
    w = committed_world
    with account_context(w.account.id):
        peer = services.peer_create(account_id=w.account.id, key="dave", kind="human",
                                    display_name="Dave", password="dave-pass-1234",
                                    is_curator=True, is_admin=True)
        _, key = services.token_issue(peer=peer)
    return peer, key


def test_an_administrator_cannot_set_a_password_someone_already_has(
        live_server: Any, committed_world: Any, dave: Any) -> None:
    base, w = live_server.url, committed_world
    alice_token = _token(w.subject, w.account.id)
    alice_browser = sign_in(base, "alice", "alice-pass-123")
    assert alice_browser.get("/console/me/").status_code == 200

    # A plain re-invitation of someone with a password is refused.
    r = call(base, dave[1], "POST", f"people/{w.subject.id}/invitation")
    assert r.status_code == 409 and r.json()["error"]["code"] == "has_password", r.text
    assert call(base, alice_token, "GET", "me").status_code == 200

    # Another Account's administrator does not even find her.
    with account_context(w.other_account.id):
        people.person_update(peer=w.outsider, actor="system:test", role="admin")
    mallory = _token(w.outsider, w.other_account.id)
    r = call(base, mallory, "POST", f"people/{w.subject.id}/invitation", {"reset": True})
    assert r.status_code == 404

    # A reset is possible, but it is loud: everything of hers stops, and it is Dave's.
    r = call(base, dave[1], "POST", f"people/{w.subject.id}/invitation", {"reset": True})
    assert r.status_code == 201, r.text
    link = r.json()["url"]
    assert call(base, alice_token, "GET", "me").status_code == 401
    gone = alice_browser.get("/console/me/", follow_redirects=False)
    assert gone.status_code == 302 and "/console/login/" in gone.headers["location"]
    assert call(base, None, "POST", "auth/token",
                {"username": "alice", "password": "alice-pass-123"}).status_code == 401
    with account_context(w.account.id):
        reset = AuditEntry.objects.get(event_type="person.password_reset")
        assert reset.actor == "peer:dave" and reset.target_id == str(w.subject.pk)

    # Accepting is recorded as the invitation Dave made, not as Alice.
    r = accept(base, link, "alice-chosen-pass-77")
    assert r.status_code == 303 and r.headers["location"] == "/console/", r.text[:500]
    with account_context(w.account.id):
        accepted = AuditEntry.objects.get(event_type="person.invitation_accepted")
        set_by = AuditEntry.objects.filter(event_type="person.password_set").get()
    assert accepted.actor.startswith("invitation:") and accepted.actor != "peer:alice"
    assert accepted.payload["invited_by"] == "peer:dave"
    assert set_by.actor == accepted.actor and set_by.payload["via"] == "invitation"


def test_accepting_an_invitation_revokes_the_persons_tokens_and_sessions(
        live_server: Any, committed_world: Any, dave: Any) -> None:
    base, w = live_server.url, committed_world
    r = call(base, dave[1], "POST", "people", {"key": "erin", "display_name": "Erin",
                                               "scopes": ["/"]})
    assert r.status_code == 201, r.text
    link = r.json()["invitation"]["url"]
    with account_context(w.account.id):
        erin = services.Peer.objects.get(key="erin")
        _, early = services.token_issue(peer=erin)  # however it came about
    assert call(base, early, "GET", "me").status_code == 200
    weak = accept(base, link, "password123")  # Django's validators, in words
    assert weak.status_code == 400 and "too common" in weak.text
    assert call(base, early, "GET", "me").status_code == 200
    assert accept(base, link, "erin-chosen-pass-1").status_code == 303
    assert call(base, early, "GET", "me").status_code == 401
    with account_context(w.account.id):
        assert not Credential.objects.filter(peer=erin, kind="token",
                                             revoked_at__isnull=True).exists()


def test_a_scope_limited_administrator_grants_only_inside_their_grants(
        live_server: Any, committed_world: Any, dave: Any) -> None:
    base, w = live_server.url, committed_world
    with account_context(w.account.id):
        erin = people.person_create(account_id=w.account.id, key="erin", actor="system:test",
                                    role="admin", scope_paths=["/marketing"],
                                    password="erin-pass-1234")
    key = _token(erin, w.account.id)

    for body in ({"scopes": ["/"]}, {"scopes": ["/marketing", "/"]}):
        r = call(base, key, "PATCH", f"people/{erin.id}", body)
        assert r.status_code == 403 and r.json()["error"]["code"] == "scope_not_granted", r.text
    r = call(base, key, "POST", "people", {"key": "zed", "role": "admin", "scopes": ["/"]})
    assert r.status_code == 403 and r.json()["error"]["code"] == "scope_not_granted"
    assert call(base, key, "GET", "me").json()["scopes"] == ["/marketing"]

    # Inside their grants they still manage people (the API asks for the scopes by name).
    r = call(base, key, "POST", "people", {"key": "zed", "role": "admin",
                                           "scopes": ["/marketing"]})
    assert r.status_code == 201 and r.json()["person"]["scopes"] == ["/marketing"]
    r = call(base, key, "POST", "people", {"key": "yan", "scopes": ["/marketing/social"]})
    assert r.status_code == 201, r.text

    # Nor do they reach people wider than themselves: a promotion or a reset would hand
    # them '/' through someone else.
    r = call(base, key, "PATCH", f"people/{w.member.id}", {"role": "admin"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "person_out_of_reach"
    r = call(base, key, "POST", f"people/{dave[0].id}/invitation", {"reset": True})
    assert r.status_code == 403 and r.json()["error"]["code"] == "person_out_of_reach"
    assert call(base, None, "POST", "auth/token",
                {"username": "dave", "password": "dave-pass-1234"}).status_code == 201
    # An administrator with '/' is not limited.
    r = call(base, dave[1], "PATCH", f"people/{erin.id}", {"scopes": ["/"]})
    assert r.status_code == 200 and r.json()["scopes"] == ["/"]


def test_deactivation_ends_console_sessions_for_good(live_server: Any, committed_world: Any,
                                                     dave: Any) -> None:
    base, w = live_server.url, committed_world
    browser = sign_in(base, "alice", "alice-pass-123")
    assert browser.get("/console/me/").status_code == 200
    r = call(base, dave[1], "PATCH", f"people/{w.subject.id}", {"active": False})
    assert r.status_code == 200
    r = call(base, dave[1], "PATCH", f"people/{w.subject.id}", {"active": True})
    assert r.status_code == 200 and r.json()["active"] is True
    # The old cookie stays dead; signing in again works.
    gone = browser.get("/console/me/", follow_redirects=False)
    assert gone.status_code == 302 and "/console/login/" in gone.headers["location"]
    assert sign_in(base, "alice", "alice-pass-123").get("/console/me/").status_code == 200
