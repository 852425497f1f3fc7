"""memhouse.client.MemHouseClient against a real live_server (real HTTP, real PostgreSQL),
and its retry policy against a tiny loopback http.server."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from knowledge import services
from memhouse.client import (
    AuthenticationError,
    ConflictError,
    MemHouseClient,
    MemHouseError,
    Message,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    TransportError,
    ValidationError,
)
from memhouse.core.tenancy import account_context
from tests.governance.helpers import held_scope_claim
from tests.retrieval.test_search import corpus  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)
SUPPORT = "I went to a support group yesterday and it was so powerful."


@pytest.fixture
def mh(live_server, committed_world) -> Iterator[MemHouseClient]:
    with MemHouseClient(live_server.url, committed_world.agent_key, timeout=60) as client:
        yield client


def _key_for(world, peer) -> str:
    with account_context(world.account.id):
        _, key = services.credential_create(account_id=world.account.id, peer=peer)
    return key


# --- against the real server -------------------------------------------------------------

def test_ingest_then_search_then_ask(mh, committed_world):
    me = mh.me()
    assert me["peer_key"] == "scribe" and me["peer_kind"] == "agent" and me["via"] == "api_key"
    assert mh.create_scope("/demo")["path"] == "/demo"
    assert mh.create_peer("caroline", "human", display_name="Caroline") == {
        "key": "caroline", "kind": "human", "display_name": "Caroline", "aliases": []}
    sent = mh.ingest_messages("/demo", [
        Message(SUPPORT, peer_key="caroline", id="chat-42:1",
                occurred_at=datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        {"id": "chat-42:2", "peer_key": "caroline", "text": "I love hiking with my dog.",
         "occurred_at": "2023-05-08T13:57:00Z"},
    ], session="chat-42")
    assert [m["status"] for m in sent["messages"]] == ["created", "created"]
    assert [m["client_message_id"] for m in sent["messages"]] == ["chat-42:1", "chat-42:2"]
    again = mh.ingest_messages("/demo", [Message(SUPPORT, peer_key="caroline", id="chat-42:1",
                                                 occurred_at="2023-05-08T13:56:00Z")])
    assert again["messages"][0]["status"] == "duplicate"

    found = mh.search("Where did Caroline go for support?", scope="/demo",
                      peer_key="caroline", deadline_ms=5000)
    top = found["candidates"][0]
    assert top["statement"] == "Caroline went to a support group."
    assert top["subject_peer_key"] == "caroline" and top["state"] == "active"
    assert found["reader_posture"] == "peer" and found["page"]["offset"] == 0

    answer = mh.ask("Where did Caroline go for support?", "/demo", peer_key="caroline")
    assert top["id"] in [c["id"] for c in answer["citations"]]
    assert "Caroline went to a support group." in answer["supporting_statements"]

    context = mh.context("/demo", peer_key="caroline", query="support group")
    assert "support group" in context["context"]
    graph = mh.lineage(top["id"], peer_key="caroline")
    assert top["id"] in json.dumps(graph)


def test_ingest_with_wait_returns_outcomes_and_message_reads_one(mh):
    mh.create_peer("caroline", "human", display_name="Caroline")
    sent = mh.ingest_messages("/", [Message("I love hiking with my dog.", peer_key="caroline"),
                                    Message("ok thanks", peer_key="caroline")], wait=5)
    assert sent["timed_out"] is False
    hiking, thanks = sent["messages"]
    assert hiking["outcome"]["processing"] == "processed"
    [stmt] = hiking["outcome"]["statements"]
    assert stmt["state"] == "active" and "hiking" in stmt["statement"]
    assert mh.get_knowledge(stmt["id"], peer_key="caroline")["knowledge"]["id"] == stmt["id"]
    assert [r["reason"] for r in thanks["outcome"]["refused"]] == ["f4_gate_a_phatic"]
    # A search right after the write finds it.
    found = mh.search("Who loves hiking?", scope="/", peer_key="caroline")["candidates"]
    assert stmt["id"] in [c["id"] for c in found]

    read = mh.message(hiking["id"], peer_key="caroline")
    assert read["message"]["text"] == "I love hiking with my dog."
    assert read["message"]["outcome"] == hiking["outcome"]
    with pytest.raises(NotFoundError):
        mh.message(uuid.uuid4())
    with pytest.raises(ValueError, match="not a UUID"):
        mh.message("../knowledge")
    with pytest.raises(ValidationError) as bad:
        mh.ingest_messages("/", [Message("I like tea.", peer_key="caroline")], wait=11)
    assert (bad.value.status, bad.value.code) == (400, "invalid_wait")
    plain = mh.ingest_messages("/", [Message("I like rum.", peer_key="caroline")])
    assert set(plain) == {"messages"} and "outcome" not in plain["messages"][0]


def test_wait_is_sent_and_lengthens_the_read_timeout():
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(202, json={"messages": [], "timed_out": False})

    with MemHouseClient("http://mh.test", "mh_x_y", timeout=4,
                        transport=httpx.MockTransport(answer)) as client:
        client.ingest_messages("/", [Message("I like tea.")], wait=2.5)
        client.ingest_messages("/", [Message("I like tea.")])
    waited, plain = seen
    assert json.loads(waited.content)["wait"] == 2.5 and "wait" not in json.loads(plain.content)
    assert waited.extensions["timeout"]["read"] == 6.5
    assert plain.extensions["timeout"]["read"] == 4


def test_documents_round_trip(mh):
    version = mh.create_document("/marketing", "Handbook", text="Our office is in Lisbon.",
                                 external_id="hb-1")
    assert version["version"] == 1
    second = mh.add_document_version(version["document_id"], content=b"Our office is in Porto.")
    assert second["version"] == 2 and second["document_id"] == version["document_id"]
    assert [v["version"] for v in mh.get_document(version["document_id"])["versions"]] == [1, 2]
    gone = mh.delete_document(version["document_id"])
    assert gone["deleted"] is True
    with pytest.raises(NotFoundError):
        mh.get_document(version["document_id"])
    with pytest.raises(ValueError, match="exactly one"):
        mh.create_document("/", "T")


def test_error_codes_map_to_exceptions(live_server, mh, committed_world):
    with MemHouseClient(live_server.url, "mh_nope_wrongsecret") as bad, \
            pytest.raises(AuthenticationError) as auth:
        bad.me()
    assert auth.value.status == 401 and auth.value.code == "authentication_failed"

    with pytest.raises(NotFoundError) as missing:
        mh.lineage(uuid.uuid4())
    assert missing.value.status == 404 and missing.value.code == "not_found"

    with pytest.raises(ValidationError) as ghost:
        mh.search("anything", peer_key="ghost")
    assert (ghost.value.status, ghost.value.code) == (400, "unknown_peer_key")
    assert "ghost" in ghost.value.message

    with pytest.raises(ValidationError) as invalid:
        mh.search("anything", limit=0)
    assert invalid.value.code == "invalid_input" and "limit" in invalid.value.details

    mh.ingest_messages("/", [Message("I like tea.", id="m1")])
    with pytest.raises(ConflictError) as conflict:
        mh.ingest_messages("/", [Message("I like coffee.", id="m1")])
    assert (conflict.value.status, conflict.value.code) == (409, "client_id_conflict")

    with pytest.raises(PermissionDeniedError) as denied:
        list(mh.curator_queue())
    assert denied.value.status == 403
    assert isinstance(denied.value, MemHouseError)


def test_iter_search_follows_next_offset(live_server, corpus):  # noqa: F811
    w, ids = corpus
    calls: list[int] = []

    class Counting(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            calls.append(json.loads(request.content or b"{}").get("offset", -1))
            return super().handle_request(request)

    q = "What does Alice do or love?"
    with MemHouseClient(live_server.url, w.agent_key, timeout=60, transport=Counting()) as mh:
        mh.search(q, scope="/marketing/social", peer_key="alice", deadline_ms=5000)  # warm up
        whole = mh.search(q, scope="/marketing/social", peer_key="alice", limit=100,
                          deadline_ms=5000)
        expected = [c["id"] for c in whole["candidates"]]
        assert len(expected) >= 5 and whole["page"]["next_offset"] is None
        calls.clear()
        paged = [c["id"] for c in mh.iter_search(q, scope="/marketing/social",
                                                 peer_key="alice", limit=2, deadline_ms=5000)]
        assert paged == expected
        assert calls == list(range(0, len(expected), 2))  # one page per next_offset
        assert len(list(mh.iter_search(q, scope="/marketing/social", peer_key="alice",
                                       limit=2, max_results=3, deadline_ms=5000))) == 3
    assert ids["support"] in paged and ids["bob_prov"] not in paged


def test_list_and_get_knowledge_read_for_the_reader(live_server, corpus):  # noqa: F811
    w, ids = corpus
    with MemHouseClient(live_server.url, w.agent_key, timeout=60) as mh:
        page = mh.list_knowledge(peer_key="alice", scope="/marketing/social", limit=2)
        assert len(page["items"]) == 2 and page["next_cursor"]
        assert page["reader_posture"] == "peer"
        every = list(mh.iter_knowledge(peer_key="alice", scope="/marketing/social", limit=2))
        # Alice's rows and the /marketing one; never the sibling scope or Bob's provisional.
        assert {k["id"] for k in every} == {ids[n] for n in (
            "support", "hiking", "asthma", "public", "team", "bob_hike", "painting")}
        assert len(every) == 7
        since = datetime(2000, 1, 1, tzinfo=UTC)
        assert [k["id"] for k in mh.iter_knowledge(peer_key="bob", subject="bob",
                                                   updated_since=since)] in (
            [ids["bob_prov"], ids["bob_hike"]], [ids["bob_hike"], ids["bob_prov"]])
        got = mh.get_knowledge(ids["asthma"], peer_key="alice")["knowledge"]
        assert (got["statement"], got["sensitivity"]) == (
            "Alice has asthma and uses an inhaler.", "personal")
        with pytest.raises(NotFoundError):
            mh.get_knowledge(ids["asthma"], peer_key="bob")
        with pytest.raises(ValidationError) as err:
            mh.list_knowledge(state=["active", "held"], peer_key="alice")
        assert err.value.code == "state_not_visible"
        with pytest.raises(ValueError):
            mh.get_knowledge("../me")
        with pytest.raises(ValueError):
            mh.list_knowledge(updated_since=datetime(2024, 1, 1))  # noqa: DTZ001 - naive on purpose


def test_cursor_iteration_of_my_knowledge_and_the_curator_queue(live_server, corpus):  # noqa: F811
    w, ids = corpus
    with account_context(w.account.id):
        held = {str(held_scope_claim(w, f"The team retro is on day {n}.").id) for n in range(3)}
    alice_ids = {ids[k] for k in ("support", "hiking", "asthma", "public", "painting")}
    with MemHouseClient(live_server.url, _key_for(w, w.subject)) as alice:
        page = alice.my_knowledge_page(limit=2)
        assert len(page["items"]) == 2 and page["next_cursor"]
        mine = [k["id"] for k in alice.my_knowledge(limit=2)]
        assert len(mine) == len(set(mine)) and set(mine) == alice_ids
    with MemHouseClient(live_server.url, _key_for(w, w.curator)) as carol:
        queued = [k["id"] for k in carol.curator_queue(state="held", limit=2)]
        assert set(queued) == held and len(queued) == 3


# --- retry policy against a loopback server ------------------------------------------------

class Script:
    """Answers each request with the next (status, headers, body) and records them."""

    def __init__(self, *answers: tuple[int, dict[str, str], object]) -> None:
        self.answers = list(answers)
        self.seen: list[str] = []
        script = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                script.seen.append(f"{self.command} {self.path}")
                status, headers, body = (script.answers.pop(0) if len(script.answers) > 1
                                         else script.answers[0])
                raw = json.dumps(body).encode() if not isinstance(body, bytes) else body
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _err(code: str, message: str = "x") -> dict:
    return {"error": {"code": code, "message": message}}


@pytest.fixture
def script_server() -> Iterator[type[Script]]:
    made: list[Script] = []

    class Made(Script):
        def __init__(self, *answers):
            super().__init__(*answers)
            made.append(self)

    yield Made
    for s in made:
        s.close()


def _client(url: str, sleeps: list[float], **kw) -> MemHouseClient:
    return MemHouseClient(url, "mh_test_secret", sleep=sleeps.append, **kw)


ME = {"peer_key": "scribe", "peer_kind": "agent", "via": "api_key", "scopes": ["/"],
      "curator": False}


@pytest.mark.django_db(transaction=False)
def test_503_is_retried_with_exponential_backoff(script_server):
    srv = script_server((503, {}, _err("unavailable")), (503, {}, b"<html>busy</html>"),
                        (200, {}, ME))
    sleeps: list[float] = []
    with _client(srv.url, sleeps, backoff=0.3) as mh:
        assert mh.me() == ME
    assert srv.seen == ["GET /api/v1/me"] * 3
    assert sleeps == [0.3, 0.6]


@pytest.mark.django_db(transaction=False)
def test_retries_run_out_with_a_server_error(script_server):
    srv = script_server((502, {}, b"Bad gateway"))
    sleeps: list[float] = []
    with _client(srv.url + "/api/v1/", sleeps, retries=2, backoff=0.1) as mh, \
            pytest.raises(ServerError) as exc:
        mh.search("q")
    assert len(srv.seen) == 3 and srv.seen[0] == "POST /api/v1/search"
    assert exc.value.status == 502 and exc.value.code == "http_502"
    assert "Bad gateway" in exc.value.message and sleeps == [0.1, 0.2]


@pytest.mark.django_db(transaction=False)
def test_429_honours_retry_after(script_server):
    srv = script_server((429, {"Retry-After": "2"}, _err("rate_limited", "slow down")),
                        (200, {}, ME))
    sleeps: list[float] = []
    with _client(srv.url, sleeps) as mh:
        assert mh.me()["peer_key"] == "scribe"
    assert sleeps == [2.0] and len(srv.seen) == 2

    srv = script_server((429, {"Retry-After": "3600"}, _err("rate_limited", "later")))
    with _client(srv.url, sleeps) as mh, pytest.raises(RateLimitedError) as exc:
        mh.me()
    assert exc.value.retry_after == 3600 and exc.value.code == "rate_limited"
    assert len(srv.seen) == 1  # longer than max_retry_after: raised, not slept


@pytest.mark.django_db(transaction=False)
@pytest.mark.parametrize("status, kind", [(400, ValidationError), (401, AuthenticationError),
                                          (403, PermissionDeniedError), (404, NotFoundError),
                                          (409, ConflictError), (413, ValidationError),
                                          (500, ServerError)])
def test_other_errors_are_never_retried(script_server, status, kind):
    srv = script_server((status, {}, {"error": {"code": "some_code", "message": "nope",
                                                "details": {"query": ["bad"]}}}))
    sleeps: list[float] = []
    with _client(srv.url, sleeps) as mh, pytest.raises(kind) as exc:
        mh.search("q")
    assert len(srv.seen) == 1 and sleeps == []
    assert (exc.value.status, exc.value.code, exc.value.message) == (status, "some_code", "nope")
    assert exc.value.details == {"query": ["bad"]}


@pytest.mark.django_db(transaction=False)
def test_connection_errors_are_retried_then_raised():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: connections are refused
    sleeps: list[float] = []
    with _client(f"http://127.0.0.1:{port}", sleeps, retries=2, backoff=0.01) as mh, \
            pytest.raises(TransportError) as exc:
        mh.me()
    assert exc.value.status is None and exc.value.code == "connection_failed"
    assert sleeps == [0.01, 0.02]


@pytest.mark.django_db(transaction=False)
def test_messages_and_times_are_serialised():
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == "Bearer mh_test_secret"
        seen.append(json.loads(request.content))
        return httpx.Response(202, json={"messages": []})

    with MemHouseClient("http://memhouse.test", "mh_test_secret",
                        transport=httpx.MockTransport(handler)) as mh:
        mh.ingest_messages("/s", [Message("hi", occurred_at=datetime(2024, 1, 2, tzinfo=UTC)),
                                  {"text": "yo", "peer_key": "bob", "id": None}])
        with pytest.raises(ValueError, match="timezone-aware"):
            mh.ingest_messages("/s", [Message("hi", occurred_at=datetime(2024, 1, 2))])  # noqa: DTZ001
        assert repr(mh) == "MemHouseClient('http://memhouse.test')"
    assert seen == [{"scope": "/s", "messages": [
        {"text": "hi", "occurred_at": "2024-01-02T00:00:00+00:00"},
        {"text": "yo", "peer_key": "bob"}]}]


def documented_env(monkeypatch, live_server, world) -> None:
    """What docs/integrations.md has the reader set (the examples read both)."""
    monkeypatch.setenv("MEMHOUSE_URL", live_server.url)
    monkeypatch.setenv("MEMHOUSE_API_KEY", world.agent_key)


def test_the_documented_example_runs(live_server, committed_world, capsys, monkeypatch):
    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    documented_env(monkeypatch, live_server, committed_world)
    for marker in ("mh.create_peer(", "mh.search("):  # the page's peers, then the example
        exec(compile(_doc_block(text, marker), "docs/integrations.md", "exec"), {})
    assert "Caroline went to a support group." in capsys.readouterr().out


def _doc_block(text: str, marker: str) -> str:
    return next(block.split("```", 1)[0] for block in text.split("```python\n")[1:]
                if marker in block.split("```", 1)[0])


def test_the_documented_listing_and_mcp_http_examples_run(live_server, committed_world,
                                                          capsys, monkeypatch):
    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    documented_env(monkeypatch, live_server, committed_world)
    for marker in ("mh.create_peer(", "mh.search(", "mh.list_knowledge(",
                   "streamable_http_client("):
        exec(compile(_doc_block(text, marker), "docs/integrations.md", "exec"), {})
    out = capsys.readouterr().out
    assert "active Caroline went to a support group." in out  # the listing example
    assert "'add_messages', 'search'" in out and "cello" in out  # the MCP example
