"""Sign-in throttling (django-axes): repeated failures for one username from one address
lock that pair out on the API token endpoint and the console login, with 429 and
Retry-After; a success does not clear the pair's failures. Per pair, so nobody else can
lock a person out (issue #34; tests/security/test_sign_in_rules.py)."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_attempts(transactional_db: Any) -> None:
    from axes.utils import reset

    reset()  # failures from an earlier test (same loopback address) do not carry over


def token(base: str, username: str, password: str, ip: str = "127.0.0.1") -> httpx.Response:
    return httpx.post(f"{base}/api/v1/auth/token", timeout=60,
                      json={"username": username, "password": password})


@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3)
def test_the_token_endpoint_locks_a_username_after_repeated_failures(
        live_server: Any, committed_world: Any) -> None:
    base = live_server.url
    for _ in range(2):
        r = token(base, "alice", "wrong-password")
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_login"
    r = token(base, "alice", "wrong-password")  # the third failure reaches the limit
    assert r.status_code == 429
    r = token(base, "alice", "alice-pass-123")  # even the right password now waits
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "rate_limited" and int(r.headers["Retry-After"]) > 0


@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3)
def test_a_success_does_not_clear_an_addresss_failures(live_server: Any,
                                                       committed_world: Any) -> None:
    base = live_server.url
    for _ in range(2):
        assert token(base, "bob", "nope-nope").status_code == 401
    # Another username's success from this address leaves bob's failures counted, and
    # bob's failures do not lock that other username.
    assert token(base, "alice", "alice-pass-123").status_code == 201
    assert token(base, "carol", "guess").status_code == 401
    assert token(base, "bob", "nope-nope").status_code == 429


@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3)
def test_the_console_login_is_throttled_too(live_server: Any, committed_world: Any) -> None:
    base = live_server.url
    client = httpx.Client(follow_redirects=False)

    def attempt(password: str) -> httpx.Response:
        page = client.get(f"{base}/console/login/", timeout=60)
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert csrf is not None
        return client.post(f"{base}/console/login/", timeout=60,
                           data={"username": "carol", "password": password,
                                 "csrfmiddlewaretoken": csrf.group(1)},
                           headers={"Referer": f"{base}/console/login/"})

    for _ in range(2):
        assert attempt("wrong").status_code == 200  # the form again, with an error
    assert attempt("wrong").status_code == 429  # the third failure reaches the limit
    r = attempt("carol-pass-123")
    assert r.status_code == 429 and "Too many failed sign-ins" in r.text


def forwarded(base: str, username: str, chain: str) -> httpx.Response:
    return httpx.post(f"{base}/api/v1/auth/token", timeout=60,
                      json={"username": username, "password": "wrong-password"},
                      headers={"X-Forwarded-For": chain})


@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3)
def test_without_a_trusted_proxy_a_forged_forwarded_for_does_not_dodge_the_limit(
        live_server: Any, committed_world: Any) -> None:
    base = live_server.url
    for n in range(2):
        assert forwarded(base, "u1", f"198.51.100.{n + 1}").status_code == 401
    # A fresh forged address: the real address has used its allowance for u1.
    assert forwarded(base, "u1", "198.51.100.9").status_code == 429


@override_settings(AXES_ENABLED=True, AXES_FAILURE_LIMIT=3, MEMHOUSE_TRUSTED_PROXY_COUNT=1)
def test_behind_one_proxy_failures_count_per_forwarded_client(live_server: Any,
                                                              committed_world: Any) -> None:
    base = live_server.url
    for _ in range(2):
        assert forwarded(base, "v1", "203.0.113.5").status_code == 401
    assert forwarded(base, "v1", "203.0.113.5").status_code == 429  # that client is locked
    # Another client behind the same proxy is not locked out by the first one's failures.
    assert forwarded(base, "v1", "203.0.113.77").status_code == 401
    # Only the entry the proxy appended is trusted: a forged one on the left changes nothing.
    assert forwarded(base, "v1", "192.0.2.200, 203.0.113.5").status_code == 429
