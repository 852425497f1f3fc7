"""Sign-in rules of issue #34 (Low items), over real HTTP against a live server.

- The lockout is no weapon: it is per username and address pair, so someone in another
  Account (or anywhere else) cannot lock a person out, and attempts while locked do not
  restart the cool-off.
- POST /me/password checks the current password like a sign-in, under the same lockout.
- Django's full password validators apply wherever a password is set.
"""

from __future__ import annotations

import io
import sys
from typing import Any

import httpx
import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from knowledge import services
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_attempts(transactional_db: Any) -> None:
    from axes.utils import reset

    reset()


def token(base: str, username: str, password: str, client: str | None = None) -> httpx.Response:
    headers = {"X-Forwarded-For": client} if client else {}
    return httpx.post(f"{base}/api/v1/auth/token", json={"username": username,
                                                         "password": password},
                      headers=headers, timeout=60)


def change(base: str, key: str, current: str, new: str) -> httpx.Response:
    return httpx.post(f"{base}/api/v1/me/password", timeout=60,
                      json={"current_password": current, "new_password": new},
                      headers={"Authorization": f"Bearer {key}"})


@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3, MEMHOUSE_TRUSTED_PROXY_COUNT=1)
def test_another_account_cannot_lock_a_person_out(live_server: Any,
                                                  committed_world: Any) -> None:
    from axes.models import AccessAttempt

    base = live_server.url
    # Mallory (Account "other") guesses Bob's password (Account "acme") from her address.
    mallory = "203.0.113.5"
    assert token(base, "mallory", "mallory-pass-123", mallory).status_code == 201
    for _ in range(2):
        assert token(base, "bob", "guess", mallory).status_code == 401
    assert token(base, "bob", "guess", mallory).status_code == 429
    # Bob, elsewhere, signs in as usual; so does Mallory herself.
    assert token(base, "bob", "bob-pass-1234", "198.51.100.7").status_code == 201
    assert token(base, "mallory", "mallory-pass-123", mallory).status_code == 201

    # Attempts while locked do not restart the cool-off.
    locked = AccessAttempt.objects.get(username="bob", ip_address=mallory)
    for _ in range(3):
        assert token(base, "bob", "guess", mallory).status_code == 429
    again = AccessAttempt.objects.get(username="bob", ip_address=mallory)
    assert again.attempt_time == locked.attempt_time
    assert again.failures_since_start == locked.failures_since_start == 3


@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3)
def test_changing_ones_password_is_throttled_like_sign_in(live_server: Any,
                                                          committed_world: Any) -> None:
    base, w = live_server.url, committed_world
    with account_context(w.account.id):
        _, key = services.token_issue(peer=w.member)
    for _ in range(2):
        r = change(base, key, "guess-1234", "bob-new-pass-77")
        assert r.status_code == 403 and r.json()["error"]["code"] == "wrong_password"
    r = change(base, key, "guess-1234", "bob-new-pass-77")
    assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
    assert int(r.headers["Retry-After"]) > 0
    # The right password waits too, and the same pair is locked at sign-in.
    assert change(base, key, "bob-pass-1234", "bob-new-pass-77").status_code == 429
    assert token(base, "bob", "bob-pass-1234").status_code == 429


@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3)
def test_the_consoles_password_form_is_throttled_too(live_server: Any,
                                                     committed_world: Any) -> None:
    from tests.security.test_admin_reach import _csrf, sign_in

    base = live_server.url
    browser = sign_in(base, "bob", "bob-pass-1234")

    def attempt(current: str) -> httpx.Response:
        return browser.post("/console/me/password/", headers={
            "Referer": f"{base}/console/me/password/"}, data={
            "current_password": current, "new_password": "bob-new-pass-77",
            "new_password_again": "bob-new-pass-77",
            "csrfmiddlewaretoken": _csrf(browser, "/console/me/password/")})

    for _ in range(2):
        assert attempt("guess-1234").status_code == 403
    r = attempt("guess-1234")
    assert r.status_code == 429 and "Too many failed sign-ins" in r.text  # the lockout page
    assert int(r.headers["Retry-After"]) > 0
    assert attempt("bob-pass-1234").status_code == 429
    browser.close()


@pytest.mark.parametrize(("new", "why"), [
    ("password123", "too common"),
    ("8362957140", "entirely numeric"),
    ("bob", "too short"),
])
def test_weak_new_passwords_are_refused_with_the_reason(live_server: Any, committed_world: Any,
                                                        new: str, why: str) -> None:
    base, w = live_server.url, committed_world
    with account_context(w.account.id):
        _, key = services.token_issue(peer=w.member)
    r = change(base, key, "bob-pass-1234", new)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == "weak_password" and why in error["message"]


def test_a_password_like_the_username_is_refused(live_server: Any,
                                                 committed_world: Any) -> None:
    base, w = live_server.url, committed_world
    with account_context(w.account.id):
        _, key = services.token_issue(peer=w.subject)
    r = httpx.post(f"{base}/api/v1/me/password", timeout=60,
                   json={"current_password": "alice-pass-123", "new_password": "alice2026"},
                   headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 400 and "similar to the username" in r.json()["error"]["message"]


def test_the_command_line_applies_the_validators(committed_world: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("password123\n"))
    with pytest.raises(CommandError, match="too common"):
        call_command("people", "--account", "acme", "set-password", "bob", "--password-stdin",
                     stdout=io.StringIO())
