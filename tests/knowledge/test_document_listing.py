"""GET /api/v1/documents over real HTTP: the live documents a credential may access, with
their latest versions; external ids reusable after a delete; JSON documents read as
prose by the intake (what the LangGraph store writes)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from knowledge import services
from knowledge.models import Knowledge
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)
SOCIAL = "/marketing/social"


def _call(live_server: Any, key: str, method: str, path: str, *,
          body: Any = None, params: Any = None) -> httpx.Response:
    return httpx.request(method, f"{live_server.url}/api/v1/{path}", json=body, params=params,
                         headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _create(live_server: Any, key: str, scope: str, ext: str | None, text: str,
            media_type: str = "text/plain") -> str:
    r = _call(live_server, key, "POST", "documents", body={
        "scope": scope, "title": ext or "untitled", "text": text, "media_type": media_type,
        **({"external_id": ext} if ext else {})})
    assert r.status_code == 201, r.text
    return str(r.json()["document_id"])


def test_listing_filters_pages_and_follows_deletes(live_server, committed_world):
    key = committed_world.agent_key
    services_scope = _call(live_server, key, "POST", "scopes", body={"path": "/marketing"})
    assert services_scope.status_code == 201
    social = _create(live_server, key, SOCIAL, "handbook", "Our office is in Lisbon.")
    top = _create(live_server, key, "/marketing", "plan", "The plan is ready.")
    assert _call(live_server, key, "POST", f"documents/{social}/versions",
                 body={"text": "Our office is in Porto."}).status_code == 201

    def listed(**params: Any) -> dict[str, Any]:
        r = _call(live_server, key, "GET", "documents", params=params)
        assert r.status_code == 200, r.text
        return dict(r.json())

    page = listed(scope="/marketing")
    assert [i["id"] for i in page["items"]] == [social, top]  # oldest first, subtree
    assert page["next_cursor"] is None
    first = page["items"][0]
    assert first["scope"] == SOCIAL and first["external_id"] == "handbook"
    assert first["latest_version"]["version"] == 2 and "text" not in first["latest_version"]
    assert [i["id"] for i in listed(scope=SOCIAL)["items"]] == [social]
    with_text = listed(external_id="handbook", include_text="true")["items"]
    assert [i["latest_version"]["text"] for i in with_text] == ["Our office is in Porto."]
    assert listed(external_id="nothing")["items"] == []

    one = listed(limit=1)
    assert [i["id"] for i in one["items"]] == [social] and one["next_cursor"]
    two = listed(limit=1, cursor=one["next_cursor"])
    assert [i["id"] for i in two["items"]] == [top] and two["next_cursor"] is None

    assert _call(live_server, key, "DELETE", f"documents/{social}").status_code == 200
    assert [i["id"] for i in listed()["items"]] == [top]
    # A deleted document's external id may be used again; a live one may not.
    again = _create(live_server, key, SOCIAL, "handbook", "Our office is in Faro.")
    assert again != social
    dup = _call(live_server, key, "POST", "documents", body={
        "scope": SOCIAL, "title": "x", "text": "Other text.", "external_id": "handbook"})
    assert dup.status_code == 409 and dup.json()["error"]["code"] == "document_exists"


def test_listing_stays_inside_the_credential_scopes(live_server, committed_world):
    w = committed_world
    _create(live_server, w.agent_key, SOCIAL, "handbook", "Our office is in Lisbon.")
    with account_context(w.account.id):
        services.scope_ensure(account_id=w.account.id, path="/marketing/paid")
        agent = services.peer_create(account_id=w.account.id, key="paid-bot", kind="agent",
                                     display_name="Paid")
        _, narrow = services.credential_create(account_id=w.account.id, peer=agent,
                                               scope_paths=["/marketing/paid"])
    r = _call(live_server, narrow, "GET", "documents", params={"include_text": "true"})
    assert r.status_code == 200 and r.json()["items"] == []
    hidden = _call(live_server, narrow, "GET", "documents", params={"scope": SOCIAL})
    missing = _call(live_server, narrow, "GET", "documents", params={"scope": "/nowhere"})
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json()  # no oracle for a scope the key may not read


@pytest.mark.parametrize(("params", "code"), [
    ({"limit": "0"}, "invalid_input"),
    ({"limit": "101"}, "invalid_input"),
    ({"limit": "many"}, "invalid_input"),
    ({"include_text": "perhaps"}, "invalid_input"),
    ({"cursor": "not-a-cursor"}, "invalid_cursor"),
    ({"scope": "no-slash"}, "invalid_scope_path"),
    ({"scope": "/a b"}, "invalid_scope_path"),
    ({"external_id": "x" * 201}, "invalid_input"),
])
def test_listing_bad_input_is_400(live_server, committed_world, params, code):
    r = _call(live_server, committed_world.agent_key, "GET", "documents", params=params)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["code"] == code and error["message"]


def test_json_documents_are_read_as_their_string_values(live_server, committed_world):
    w = committed_world
    value = {"note": "Alice drinks green tea every morning.", "tags": ["Bob plays chess."],
             "n": 3}
    _create(live_server, w.agent_key, SOCIAL, "prefs", json.dumps(value),
            media_type="application/json")
    with account_context(w.account.id):
        rows = {k.statement: k for k in Knowledge.objects.select_related("subject_peer")}
    assert set(rows) == {"Alice drinks green tea every morning.", "Bob plays chess."}
    assert rows["Alice drinks green tea every morning."].subject_peer.key == "alice"
    assert rows["Bob plays chess."].subject_peer.key == "bob"
