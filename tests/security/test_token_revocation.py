"""A human revokes their own login tokens, and signing out of the console revokes them."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from knowledge import services
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)


def me(base: str, key: str) -> int:
    return httpx.get(f"{base}/api/v1/me", timeout=60,
                     headers={"Authorization": f"Bearer {key}"}).status_code


def test_the_owner_revokes_a_token_or_all_of_them(live_server: Any,
                                                   committed_world: Any) -> None:
    base = live_server.url
    w = committed_world
    with account_context(w.account.id):
        _, first = services.token_issue(peer=w.subject)
        _, second = services.token_issue(peer=w.subject)
        _, bobs = services.token_issue(peer=w.member)
    r = httpx.post(f"{base}/api/v1/auth/token/revoke", json={}, timeout=60,
                   headers={"Authorization": f"Bearer {first}"})
    assert r.status_code == 200 and r.json() == {"revoked": 1}
    assert me(base, first) == 401 and me(base, second) == 200
    r = httpx.post(f"{base}/api/v1/auth/token/revoke", json={"all": True}, timeout=60,
                   headers={"Authorization": f"Bearer {second}"})
    assert r.json() == {"revoked": 1} and me(base, second) == 401
    assert me(base, bobs) == 200  # nobody else's
    r = httpx.post(f"{base}/api/v1/auth/token/revoke", json={}, timeout=60,
                   headers={"Authorization": f"Bearer {w.agent_key}"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "human_only"


def test_console_sign_out_revokes_the_humans_tokens(live_server: Any,
                                                    committed_world: Any) -> None:
    base = live_server.url
    w = committed_world
    with account_context(w.account.id):
        _, token = services.token_issue(peer=w.subject)
    client = httpx.Client(follow_redirects=False)
    page = client.get(f"{base}/console/login/", timeout=60)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert csrf is not None
    r = client.post(f"{base}/console/login/", timeout=60,
                    data={"username": "alice", "password": "alice-pass-123",
                          "csrfmiddlewaretoken": csrf.group(1)},
                    headers={"Referer": f"{base}/console/login/"})
    assert r.status_code in (302, 303)
    assert me(base, token) == 200
    r = client.post(f"{base}/console/logout/", timeout=60,
                    data={"csrfmiddlewaretoken": client.cookies.get("csrftoken") or ""},
                    headers={"Referer": f"{base}/console/"})
    assert r.status_code in (302, 303), r.text[:300]
    assert me(base, token) == 401
