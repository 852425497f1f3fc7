"""Client message ids, document external ids and session ids belong to their scope: a key
limited to one scope learns nothing about another scope's ids (identical answers either
way), cannot squat them, cannot join another scope's session; six parallel posts of one
client id store one message and answer "duplicate", never 500 (real HTTP)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from knowledge import services
from knowledge.models import Message, Session
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)


def post(base: str, key: str, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{base}/api/v1/{path}", json=body, timeout=60,
                      headers={"Authorization": f"Bearer {key}"})


@pytest.fixture
def scoped(committed_world: Any) -> dict[str, str]:
    w = committed_world
    with account_context(w.account.id):
        services.scope_ensure(account_id=w.account.id, path="/a/x")
        services.scope_ensure(account_id=w.account.id, path="/a/y")
        _, x = services.credential_create(account_id=w.account.id, peer=w.agent,
                                          scope_paths=["/a/x"], act_for_all=True)
        _, y = services.credential_create(account_id=w.account.id, peer=w.agent,
                                          scope_paths=["/a/y"], act_for_all=True)
    return {"x": x, "y": y}


def test_a_guessed_id_of_another_scope_is_no_oracle_and_cannot_be_squatted(
        live_server: Any, committed_world: Any, scoped: dict[str, str]) -> None:
    base = live_server.url
    r = post(base, scoped["y"], "messages", {"scope": "/a/y", "session": "s-1", "messages": [
        {"id": "secret-7", "peer_key": "alice", "text": "Alice is planning a reorg."}]})
    assert r.status_code == 202
    # /a/x's key sends the same id (different text) and a fresh id: the same answer.
    guessed = post(base, scoped["x"], "messages", {"scope": "/a/x", "messages": [
        {"id": "secret-7", "peer_key": "alice", "text": "probe"}]})
    fresh = post(base, scoped["x"], "messages", {"scope": "/a/x", "messages": [
        {"id": "fresh-1", "peer_key": "alice", "text": "probe"}]})
    assert guessed.status_code == fresh.status_code == 202
    assert guessed.json()["messages"][0]["status"] == fresh.json()["messages"][0]["status"] == (
        "created")
    ids = {m["id"] for m in r.json()["messages"]}
    assert not ids & {m["id"] for m in guessed.json()["messages"]}  # no other scope's UUID
    # The session id of /a/y names another conversation under /a/x.
    post(base, scoped["x"], "messages", {"scope": "/a/x", "session": "s-1", "messages": [
        {"id": "x-2", "peer_key": "alice", "text": "Alice likes tea."}]})
    with account_context(committed_world.account.id):
        sessions = {s.scope.path for s in Session.objects.filter(external_id="s-1")
                    .select_related("scope")}
        assert sessions == {"/a/x", "/a/y"}
        y_msg = Message.objects.get(client_message_id="secret-7", scope__path="/a/y")
        assert y_msg.text == "Alice is planning a reorg."  # untouched
    # Documents: the same external id in another scope is another document.
    d1 = post(base, scoped["y"], "documents", {"scope": "/a/y", "title": "Plan",
                                               "external_id": "doc-9", "text": "Plan A."})
    d2 = post(base, scoped["x"], "documents", {"scope": "/a/x", "title": "Probe",
                                               "external_id": "doc-9", "text": "Plan B."})
    assert d1.status_code == d2.status_code == 201
    assert d1.json()["document_id"] != d2.json()["document_id"]


def test_parallel_posts_of_one_client_id_store_one_message(
        live_server: Any, committed_world: Any, scoped: dict[str, str]) -> None:
    base = live_server.url
    body = {"scope": "/a/x", "messages": [
        {"id": "race-1", "peer_key": "alice", "text": "Alice adopted a greyhound."}]}
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: post(base, scoped["x"], "messages", body), range(6)))
    assert all(a.status_code == 202 for a in answers), [a.text for a in answers]
    statuses = sorted(a.json()["messages"][0]["status"] for a in answers)
    assert statuses.count("created") == 1 and statuses.count("duplicate") == 5
    with account_context(committed_world.account.id):
        assert Message.objects.filter(client_message_id="race-1").count() == 1
