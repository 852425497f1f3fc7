"""Read your writes: POST /api/v1/messages with `wait` answers once the batch is processed,
with each message's outcome, and GET /api/v1/messages/<id> shows one message's state and
outcome to a reader who may read it. Real HTTP against live_server, real PostgreSQL,
extraction through the real pipeline (eager Celery: it runs when the request commits)."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from knowledge import services
from knowledge.ingest import services as ingest_services
from knowledge.models import Message
from memhouse.core.tenancy import account_context
from tests.reliability.test_poison_message import poison  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)
SCOPE = "/marketing/social"


@pytest.fixture
def chat(committed_world):
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
        services.peer_create(account_id=w.account.id, key="melanie", kind="human",
                             display_name="Melanie")
    return w


def _key_for(w, peer) -> str:
    with account_context(w.account.id):
        _, key = services.credential_create(account_id=w.account.id, peer=peer)
    return key


def _post(live_server, key: str, body: dict) -> httpx.Response:
    return httpx.post(f"{live_server.url}/api/v1/messages", json=body,
                      headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _get(live_server, key: str, message_id: str, **params: str) -> httpx.Response:
    return httpx.get(f"{live_server.url}/api/v1/messages/{message_id}", params=params,
                     headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _batch(*turns, wait=None, session="s1"):
    body: dict = {"scope": SCOPE, "session": session, "messages": [
        {"id": cid, "peer_key": peer, "text": text, "occurred_at": "2023-05-08T13:56:00Z"}
        for cid, peer, text in turns]}
    if wait is not None:
        body["wait"] = wait
    return body


def test_wait_returns_each_messages_statements_with_ids_and_states(live_server, chat):
    r = _post(live_server, chat.agent_key, _batch(
        ("t1", "caroline", "I love hiking in the Alps."),
        ("t2", "caroline", "Melanie painted a lake last week."), wait=5))
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["timed_out"] is False
    first, second = body["messages"]
    assert (first["client_message_id"], first["status"]) == ("t1", "created")
    out = first["outcome"]
    assert out["processing"] == "processed" and out["refused"] == []
    assert out["not_visible"] == {"count": 0, "states": {}}
    [stmt] = out["statements"]
    assert (stmt["statement"], stmt["state"], stmt["state_reason"], stmt["subject"]) == (
        "Caroline loves hiking in the Alps.", "active", "f4_gate_a_b_accepted", "caroline")
    # The id is the statement's: the knowledge endpoint shows it to the same reader.
    got = httpx.get(f"{live_server.url}/api/v1/knowledge/{stmt['id']}",
                    params={"peer_key": "caroline"},
                    headers={"Authorization": f"Bearer {chat.agent_key}"}, timeout=30)
    assert got.status_code == 200 and got.json()["knowledge"]["statement"] == stmt["statement"]
    # Caroline's claim about Melanie is provisional: only Melanie may read it, so the
    # writer (speaking as Caroline) gets a count and a state, never its text.
    assert second["outcome"]["processing"] == "processed"
    assert second["outcome"]["statements"] == []
    assert second["outcome"]["not_visible"] == {"count": 1, "states": {"provisional": 1}}
    assert "lake" not in r.text


def test_a_phatic_message_reports_its_refusal(live_server, chat):
    r = _post(live_server, chat.agent_key, _batch(("t1", "caroline", "ok thanks"), wait=5))
    assert r.status_code == 202, r.text
    out = r.json()["messages"][0]["outcome"]
    assert out["processing"] == "processed" and out["statements"] == []
    assert out["refused"] == [{"reason": "f4_gate_a_phatic", "count": 0,
                               "message": "Refused as an acknowledgement or a ping."}]


def test_gate_refusals_are_reported_by_reason(live_server, chat):
    r = _post(live_server, chat.agent_key, _batch(
        ("t1", "caroline", "My bank account number is 12345678."),
        ("t2", "caroline", "I love hiking in the Alps."),
        ("t3", "caroline", "I love hiking in the Alps!"), wait=5))
    assert r.status_code == 202, r.text
    restricted, kept, again = (m["outcome"] for m in r.json()["messages"])
    assert [x["reason"] for x in restricted["refused"]] == ["f4_gate_b_restricted_unattended"]
    assert restricted["refused"][0]["count"] >= 1 and restricted["statements"] == []
    assert restricted["not_visible"]["states"] == {"rejected": restricted["refused"][0]["count"]}
    assert "12345678" not in r.text
    # The repeat merged into the kept statement (its second source) and its own proposal
    # was refused as a duplicate.
    assert [s["state"] for s in kept["statements"]] == ["active"]
    assert [s["id"] for s in again["statements"]] == [kept["statements"][0]["id"]]
    assert [x["reason"] for x in again["refused"]] == ["f4_gate_a_duplicate"]


def test_without_wait_the_answer_is_unchanged(live_server, chat):
    r = _post(live_server, chat.agent_key, _batch(("t1", "caroline", "I love tea.")))
    assert r.status_code == 202
    assert r.json() == {"messages": [{"id": r.json()["messages"][0]["id"],
                                      "client_message_id": "t1", "status": "created"}]}
    zero = _post(live_server, chat.agent_key, _batch(("t2", "caroline", "I love rum."), wait=0))
    assert set(zero.json()) == {"messages"} and "outcome" not in zero.json()["messages"][0]


@pytest.mark.parametrize("wait", ["10.5", "-1", "-0.01", '"5"', "true", "[]", '{"s": 1}',
                                  "1e309"])
def test_a_bad_wait_is_400_invalid_wait_and_writes_nothing(live_server, chat, wait):
    raw = json.dumps(_batch(("t1", "caroline", "I love tea.")))[:-1] + f', "wait": {wait}}}'
    r = httpx.post(f"{live_server.url}/api/v1/messages", content=raw.encode(),
                   headers={"Authorization": f"Bearer {chat.agent_key}",
                            "Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_wait", err
    assert err["message"] == "wait must be a number of seconds from 0 to 10"
    with account_context(chat.account.id):
        assert Message.objects.count() == 0


def test_a_null_wait_is_no_wait(live_server, chat):
    body = {**_batch(("t1", "caroline", "I love tea.")), "wait": None}
    r = _post(live_server, chat.agent_key, body)
    assert r.status_code == 202 and set(r.json()) == {"messages"}


def test_the_wait_runs_out_when_nothing_processes_the_batch(live_server, chat, monkeypatch):
    class Lost:  # a broker that accepted the task and lost it
        @staticmethod
        def delay(*args):
            return None

    monkeypatch.setitem(ingest_services._INTAKE_TASKS, "messages", Lost)
    r = _post(live_server, chat.agent_key, _batch(("t1", "caroline", "I love tea."), wait=0.3))
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["timed_out"] is True
    out = body["messages"][0]["outcome"]
    assert out == {"processing": "queued", "statements": [], "refused": [],
                   "not_visible": {"count": 0, "states": {}}}
    got = _get(live_server, chat.agent_key, body["messages"][0]["id"], peer_key="caroline")
    assert got.status_code == 200 and got.json()["message"]["outcome"]["processing"] == "queued"


def test_get_message_shows_state_and_outcome_to_who_may_read_it(live_server, chat):
    r = _post(live_server, chat.agent_key, _batch(
        ("t1", "caroline", "I love hiking in the Alps."), ("t2", "caroline", "ok thanks"),
        wait=5))
    hiking, thanks = (m["id"] for m in r.json()["messages"])
    # The writer, reading as the peer it wrote for.
    got = _get(live_server, chat.agent_key, hiking, peer_key="caroline")
    assert got.status_code == 200, got.text
    msg = got.json()["message"]
    assert (msg["id"], msg["client_message_id"], msg["scope"], msg["session"],
            msg["peer_key"], msg["text"]) == (hiking, "t1", SCOPE, "s1", "caroline",
                                              "I love hiking in the Alps.")
    assert msg["outcome"]["processing"] == "processed"
    assert [s["statement"] for s in msg["outcome"]["statements"]] == [
        "Caroline loves hiking in the Alps."]
    assert got.json()["message"]["outcome"] == r.json()["messages"][0]["outcome"]
    assert _get(live_server, chat.agent_key, thanks, peer_key="caroline").json()[
        "message"]["outcome"]["refused"][0]["reason"] == "f4_gate_a_phatic"
    # Bob (same Account) may read every statement drawn from the hiking message, so he
    # may read it; the acknowledgement left nothing he may read and is not his: 404.
    bob = _key_for(chat, chat.member)
    assert _get(live_server, bob, hiking).status_code == 200
    hidden = _get(live_server, bob, thanks)
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "not_found"
    # Another Account's key: the same 404 as an id that exists nowhere.
    for key, mid in ((chat.outsider_key, hiking), (chat.outsider_key, thanks),
                     (chat.agent_key, str(uuid.uuid4()))):
        miss = _get(live_server, key, mid)
        assert miss.status_code == 404, miss.text
        assert miss.json()["error"] == hidden.json()["error"]
    assert _get(live_server, chat.agent_key, "not-a-uuid").status_code == 404


def test_a_message_whose_extraction_fails_is_reported_failed(live_server, chat,
                                                            poison):  # noqa: F811
    r = _post(live_server, chat.agent_key, _batch(
        ("t1", "caroline", "I flew to Zanzibar last spring."),
        ("t2", "caroline", "I love hiking in the Alps."), wait=5))
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["timed_out"] is False  # set aside is done, not pending
    bad, good = (m["outcome"] for m in body["messages"])
    assert bad == {"processing": "failed", "statements": [], "refused": [],
                   "not_visible": {"count": 0, "states": {}}}
    assert good["processing"] == "processed" and len(good["statements"]) == 1
