"""Authentication over real HTTP: API keys, login tokens, sessions, and tenancy from the
credential only."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from knowledge import services
from knowledge.models import Credential
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)


def _get(live_server, path: str, key: str | None = None, **headers: str) -> httpx.Response:
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.get(f"{live_server.url}{path}", headers=headers, timeout=10)


def test_agent_key_authenticates_as_its_peer(live_server, committed_world):
    r = _get(live_server, "/api/v1/me", committed_world.agent_key)
    assert r.status_code == 200
    assert r.json()["peer_key"] == "scribe" and r.json()["via"] == "api_key"


def test_key_in_x_api_key_header_works(live_server, committed_world):
    r = _get(live_server, "/api/v1/me", **{"X-API-Key": committed_world.agent_key})
    assert r.status_code == 200 and r.json()["peer_key"] == "scribe"


@pytest.mark.parametrize("bad", ["", "garbage", "mh_nope_nope", "mh__x"])
def test_bad_keys_get_401_with_the_error_shape(live_server, committed_world, bad):
    r = _get(live_server, "/api/v1/me", bad or None)
    assert r.status_code == 401
    body = r.json()["error"]
    assert body["code"] in {"not_authenticated", "authentication_failed"} and body["message"]


def test_wrong_secret_with_a_real_prefix_is_refused(live_server, committed_world):
    prefix = committed_world.agent_key.split("_")[1]
    r = _get(live_server, "/api/v1/me", f"mh_{prefix}_{'x' * 43}")
    assert r.status_code == 401 and r.json()["error"]["code"] == "authentication_failed"


def test_revoked_and_expired_credentials_are_refused(live_server, committed_world):
    w = committed_world
    with account_context(w.account.id):
        revoked, revoked_key = services.credential_create(account_id=w.account.id, peer=w.agent)
        services.credential_revoke(credential=revoked, actor="system:test")
        _expired, expired_key = services.credential_create(
            account_id=w.account.id, peer=w.subject, kind=Credential.Kind.TOKEN,
            expires_at=timezone.now() - timedelta(seconds=1))
    assert _get(live_server, "/api/v1/me", revoked_key).status_code == 401
    assert _get(live_server, "/api/v1/me", expired_key).status_code == 401


def test_human_password_login_gets_a_short_lived_token(live_server, committed_world):
    r = httpx.post(f"{live_server.url}/api/v1/auth/token",
                   json={"username": "alice", "password": "alice-pass-123"}, timeout=10)
    assert r.status_code == 201
    token = r.json()["token"]
    expires = timezone.datetime.fromisoformat(r.json()["expires_at"].replace("Z", "+00:00"))
    assert timezone.now() < expires <= timezone.now() + timedelta(hours=1, minutes=1)
    me = _get(live_server, "/api/v1/me", token)
    assert me.status_code == 200 and me.json() == {
        "peer_key": "alice", "peer_kind": "human", "via": "token", "scopes": ["/"],
        "curator": False, "admin": False, "act_for": []}


def test_wrong_password_is_a_clear_401(live_server, committed_world):
    r = httpx.post(f"{live_server.url}/api/v1/auth/token",
                   json={"username": "alice", "password": "nope"}, timeout=10)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_login"
    r = httpx.post(f"{live_server.url}/api/v1/auth/token", json={"username": "alice"}, timeout=10)
    assert r.status_code == 400 and "password" in r.json()["error"]["details"]


def test_agents_cannot_get_login_tokens(committed_world):
    from memhouse.core.errors import ApplicationError

    with account_context(committed_world.account.id), pytest.raises(ApplicationError):
        services.token_issue(peer=committed_world.agent)


def test_legacy_account_selectors_are_accepted_and_ignored(live_server, committed_world):
    other = str(committed_world.other_account.id)
    r = httpx.get(f"{live_server.url}/api/v1/me?account_key={other}",
                  headers={"Authorization": f"Bearer {committed_world.agent_key}",
                           "x-memhouse-account-key": other}, timeout=10)
    assert r.status_code == 200 and r.json()["peer_key"] == "scribe"
    r = _get(live_server, "/api/v1/me", committed_world.outsider_key,
             **{"x-memhouse-account-key": str(committed_world.account.id)})
    assert r.json()["peer_key"] == "mallory"


def test_console_session_authenticates_the_api(live_server, committed_world):
    with httpx.Client(base_url=live_server.url, timeout=10) as client:
        client.get("/console/login/")  # sets the CSRF cookie
        csrf = client.cookies.get("csrftoken")
        r = client.post("/console/login/", data={"username": "carol",
                                                  "password": "carol-pass-123",
                                                  "csrfmiddlewaretoken": csrf})
        assert r.status_code in (302, 303)
        me = client.get("/api/v1/me")
        assert me.status_code == 200 and me.json()["curator"] is True
        assert me.json()["via"] == "session"


def test_health_probes(live_server, db):
    assert httpx.get(f"{live_server.url}/healthz").json() == {"status": "ok"}
    r = httpx.get(f"{live_server.url}/readyz")
    assert r.status_code == 200
    assert r.json()["checks"] == {"database": "ok", "migrations": "ok", "broker": "not_used",
                                  "embedder": "ok", "lexical_index": "ok", "llm": "not_used"}


def test_readiness_reports_an_unusable_lexical_index_as_degraded(live_server, db):
    """Without the superuser's LEAKPROOF step the service still works (slowly): ready, with
    the check saying why lexical search scans."""
    from django.db import connection

    from memhouse.core.embedded_db import LEAKPROOF_FTS, _connect_superuser, ensure_embedded

    embedded = ensure_embedded()
    name = connection.settings_dict["NAME"]
    with _connect_superuser(embedded, name) as su:
        su.execute(LEAKPROOF_FTS.replace("LEAKPROOF", "NOT LEAKPROOF"))
    try:
        r = httpx.get(f"{live_server.url}/readyz")
        assert r.status_code == 200 and r.json()["checks"]["lexical_index"] == "degraded"
    finally:
        with _connect_superuser(embedded, name) as su:
            su.execute(LEAKPROOF_FTS)
    assert httpx.get(f"{live_server.url}/readyz").json()["checks"]["lexical_index"] == "ok"


def test_readiness_fails_when_the_broker_is_down(live_server, db, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    r = httpx.get(f"{live_server.url}/readyz")
    assert r.status_code == 503 and r.json()["checks"]["broker"] == "unavailable"


def test_peerless_machine_key_authenticates_without_a_peer(live_server, committed_world):
    w = committed_world
    with account_context(w.account.id):
        _, key = services.credential_create(account_id=w.account.id, peer=None,
                                            name="etl", scope_paths=["/marketing"])
    r = _get(live_server, "/api/v1/me", key)
    assert r.status_code == 200
    assert r.json()["peer_key"] is None and r.json()["scopes"] == ["/marketing"]
