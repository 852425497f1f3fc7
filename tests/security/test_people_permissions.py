"""Who may manage people, and how fast a deactivation or a revoked grant bites.

Real HTTP against a live server: an administrator invites and changes people; members,
curators and agents are refused with a code; a deactivated person's token, API key and
console session stop working on their next request; invitations are single-use and
expire; every change leaves an audit entry without a secret in it.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from knowledge import people, services
from knowledge.models import AuditEntry, Credential
from memhouse.core.errors import ApplicationError
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)


def call(base: str, key: str | None, method: str, path: str, body: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, f"{base}/api/v1/{path}", json=body, headers=headers,
                         timeout=60)


@pytest.fixture
def admin(committed_world: Any) -> tuple[Any, str]:
    """Dave, the Account's administrator, with a login token; and the world's keys."""
    w = committed_world
    with account_context(w.account.id):
        dave = services.peer_create(account_id=w.account.id, key="dave", kind="human",
                                    display_name="Dave", password="dave-pass-1234",
                                    is_curator=True, is_admin=True)
        _, key = services.token_issue(peer=dave)
    return dave, key


def _token(peer: Any, account_id: Any) -> str:
    with account_context(account_id):
        return services.token_issue(peer=peer)[1]


def test_only_administrators_manage_people(live_server: Any, committed_world: Any,
                                           admin: Any) -> None:
    base, w = live_server.url, committed_world
    bob, carol = _token(w.member, w.account.id), _token(w.curator, w.account.id)
    r = call(base, bob, "POST", "people", {"key": "zed"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "admin_only"
    assert call(base, bob, "GET", "people").json()["error"]["code"] == "admin_only"
    # A curator who is not an administrator changes no roles, not even their own.
    r = call(base, carol, "PATCH", f"people/{w.curator.id}", {"role": "admin"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "admin_only"
    r = call(base, carol, "PATCH", f"people/{w.subject.id}", {"scopes": ["/"]})
    assert r.status_code == 403
    for method, path in (("GET", "people"), ("POST", "people"),
                         ("POST", f"people/{w.subject.id}/invitation"),
                         ("POST", "me/password")):
        r = call(base, w.agent_key, method, path, {})
        assert r.status_code == 403 and r.json()["error"]["code"] == "human_only", path
    assert call(base, None, "GET", "people").status_code == 401
    r = call(base, admin[1], "PATCH", f"people/{w.curator.id}", {"role": "admin"})
    assert r.status_code == 200 and r.json()["role"] == "admin"
    # Agents are not people: they have no person page.
    r = call(base, admin[1], "GET", f"people/{w.agent.id}")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_the_last_administrator_stays(live_server: Any, committed_world: Any,
                                      admin: Any) -> None:
    base = live_server.url
    dave, key = admin
    r = call(base, key, "PATCH", f"people/{dave.id}", {"role": "member"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "last_admin"
    r = call(base, key, "PATCH", f"people/{dave.id}", {"active": False})
    assert r.status_code == 409
    assert call(base, key, "GET", "me").json()["admin"] is True


def test_deactivation_stops_token_key_and_session_at_once(live_server: Any,
                                                          committed_world: Any,
                                                          admin: Any) -> None:
    base, w = live_server.url, committed_world
    token = _token(w.subject, w.account.id)
    with account_context(w.account.id):
        _, api_key = services.credential_create(account_id=w.account.id, peer=w.subject)
    browser = httpx.Client(base_url=base, timeout=60)
    page = browser.get("/console/login/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert csrf is not None
    browser.post("/console/login/", data={"username": "alice", "password": "alice-pass-123",
                                          "csrfmiddlewaretoken": csrf.group(1)},
                 headers={"Referer": f"{base}/console/login/"})
    assert browser.get("/console/me/").status_code == 200
    assert call(base, token, "GET", "me").status_code == 200
    assert call(base, api_key, "GET", "me").status_code == 200

    r = call(base, admin[1], "PATCH", f"people/{w.subject.id}", {"active": False})
    assert r.status_code == 200 and r.json()["active"] is False
    assert call(base, token, "GET", "me").status_code == 401
    assert call(base, api_key, "GET", "me").status_code == 401
    gone = browser.get("/console/me/", follow_redirects=False)
    assert gone.status_code == 302 and "/console/login/" in gone.headers["location"]
    r = call(base, None, "POST", "auth/token",
             {"username": "alice", "password": "alice-pass-123"})
    assert r.status_code == 401
    with account_context(w.account.id):
        assert not Credential.objects.filter(peer=w.subject, revoked_at__isnull=True).exists()
        entry = AuditEntry.objects.filter(event_type="person.deactivated").get()
        assert entry.actor == "peer:dave" and entry.payload["credentials_revoked"] == 2

    # Reactivated: the password works again, the old credentials stay dead.
    assert call(base, admin[1], "PATCH", f"people/{w.subject.id}",
                {"active": True}).json()["active"] is True
    assert call(base, token, "GET", "me").status_code == 401
    assert call(base, None, "POST", "auth/token",
                {"username": "alice", "password": "alice-pass-123"}).status_code == 201


def test_a_revoked_grant_narrows_live_tokens(live_server: Any, committed_world: Any,
                                             admin: Any) -> None:
    base, w = live_server.url, committed_world
    token = _token(w.member, w.account.id)
    assert call(base, token, "GET", "me").json()["scopes"] == ["/"]
    r = call(base, admin[1], "PATCH", f"people/{w.member.id}", {"scopes": ["/marketing"]})
    assert r.status_code == 200 and r.json()["scopes"] == ["/marketing"]
    assert call(base, token, "GET", "me").json()["scopes"] == ["/marketing"]
    r = call(base, admin[1], "PATCH", f"people/{w.member.id}", {"scopes": ["/nowhere"]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_scope"
    r = call(base, admin[1], "PATCH", f"people/{w.member.id}", {"scopes": []})
    assert r.status_code == 400 and r.json()["error"]["code"] == "scopes_required"
    r = call(base, admin[1], "PATCH", f"people/{w.member.id}", {"role": "owner"})
    assert r.status_code == 400


def test_invitations_are_single_use_and_expire(live_server: Any, committed_world: Any,
                                               admin: Any) -> None:
    base, w = live_server.url, committed_world
    r = call(base, admin[1], "POST", "people",
             {"key": "erin", "display_name": "Erin", "role": "curator",
              "scopes": ["/marketing"]})
    assert r.status_code == 201, r.text
    body = r.json()
    token = body["invitation"]["token"]
    assert body["invitation"]["url"] == f"{base}/console/invitation/#{token}"
    assert body["person"]["has_password"] is False and body["person"]["role"] == "curator"
    # An invitation is no API credential.
    assert call(base, token, "GET", "me").status_code == 401
    with pytest.raises(ApplicationError) as weak:
        people.invitation_accept(token=token, password="short")
    assert weak.value.code == "weak_password"
    people.invitation_accept(token=token, password="erin-pass-1234")
    with pytest.raises(ApplicationError) as used:
        people.invitation_accept(token=token, password="erin-pass-5678")
    assert used.value.code == "invalid_invitation"
    r = call(base, None, "POST", "auth/token", {"username": "erin", "password": "erin-pass-1234"})
    assert r.status_code == 201
    assert call(base, r.json()["token"], "GET", "me").json()["scopes"] == ["/marketing"]

    # A new invitation replaces the old one; an expired one is refused.
    fay = call(base, admin[1], "POST", "people", {"key": "fay", "invite": False,
                                                  "scopes": ["/"]}).json()
    invite = f"people/{fay['person']['id']}/invitation"
    first = call(base, admin[1], "POST", invite).json()["token"]
    second = call(base, admin[1], "POST", invite).json()["token"]
    with pytest.raises(ApplicationError):
        people.invitation_peek(token=first)
    assert people.invitation_peek(token=second).key == "fay"
    with account_context(w.account.id):
        Credential.objects.filter(kind="invitation", revoked_at__isnull=True).update(
            expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(ApplicationError) as expired:
        people.invitation_accept(token=second, password="fay-pass-9999")
    assert expired.value.code == "invalid_invitation"

    with account_context(w.account.id):
        events = list(AuditEntry.objects.filter(event_type__startswith="person.")
                      .values_list("event_type", "payload"))
    kinds = [e for e, _ in events]
    for kind in ("person.created", "person.invited", "person.password_set",
                 "person.invitation_accepted"):
        assert kind in kinds
    text = json.dumps([p for _, p in events])
    for secret in ("erin-pass-1234", token, first, second):
        assert secret not in text


def test_people_change_their_own_password(live_server: Any, committed_world: Any) -> None:
    base, w = live_server.url, committed_world
    token = _token(w.member, w.account.id)
    r = call(base, token, "POST", "me/password",
             {"current_password": "wrong", "new_password": "bob-new-pass-1"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "wrong_password"
    r = call(base, token, "POST", "me/password",
             {"current_password": "bob-pass-1234", "new_password": "x"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "weak_password"
    r = call(base, token, "POST", "me/password",
             {"current_password": "bob-pass-1234", "new_password": "bob-new-pass-1"})
    assert r.status_code == 200
    assert call(base, None, "POST", "auth/token",
                {"username": "bob", "password": "bob-pass-1234"}).status_code == 401
    assert call(base, None, "POST", "auth/token",
                {"username": "bob", "password": "bob-new-pass-1"}).status_code == 201
    with account_context(w.account.id):
        entry = AuditEntry.objects.get(event_type="person.password_set")
    assert entry.payload == {"key": "bob", "via": "self"}


def test_a_new_person_gets_the_scopes_the_administrator_names_never_a_default(
        live_server: Any, committed_world: Any, admin: Any) -> None:
    """Issue 35: POST /people without `scopes` made a member of the whole Account ('/');
    now the administrator must name the scopes (400 with the field), and a human peer an
    agent registered earlier is given the login instead of a bare peer_exists."""
    base, w = live_server.url, committed_world
    r = call(base, admin[1], "POST", "people", {"key": "fay", "display_name": "Fay"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_input" and "scopes" in error["details"]
    assert "'/' is the whole Account" in error["details"]["scopes"][0]
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="fay", kind="human",
                             display_name="Fay")
    r = call(base, admin[1], "POST", "people", {"key": "fay", "scopes": ["/marketing"]})
    assert r.status_code == 201, r.text
    assert r.json()["person"]["scopes"] == ["/marketing"] and "invitation" in r.json()
    r = call(base, admin[1], "POST", "people", {"key": "fay", "scopes": ["/marketing"]})
    assert r.status_code == 409 and r.json()["error"]["code"] == "peer_exists"
    assert "new invitation link" in r.json()["error"]["message"]
