"""Explicit bad input over real HTTP: oversize payloads, malformed websearch syntax,
unicode edge cases, nonsense numbers and cursors, wrong JSON types, invalid UUIDs and
unknown peers, across the endpoints that take them.

Every answer is either a 4xx in the one error shape (a machine-readable `code` and a
human `message`) or a correct 2xx; never a 500, and never silent data loss: text that
PostgreSQL cannot store (a NUL byte, a lone surrogate) is refused, not stripped, and
text that it can store comes back exactly as sent.

Each test runs one category over every endpoint it applies to and reports all the
mismatches at once (one live-server world per category keeps the file fast).
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from knowledge import services
from knowledge.models import Document, Message, Peer
from memhouse.core.tenancy import account_context
from tests.reliability.helpers import assert_error

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Case:
    name: str
    method: str
    path: str
    body: Any = None  # JSON-encoded unless `raw` is given
    raw: bytes | None = None
    params: dict[str, str] | None = None
    status: tuple[int, ...] = (400,)
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@pytest.fixture
def target(committed_world, live_server, no_rate_limit):
    """Account A with a known peer, one active statement about alice, a message and a
    document, all committed for the live server."""
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
        item = services.knowledge_propose(
            account_id=w.account.id, statement="Alice loves hiking in the mountains.",
            scope=w.scope, subject_peer=w.subject, actor="system:test", level="peer")
        from knowledge.lifecycle import transition

        transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    client = httpx.Client(base_url=f"{live_server.url}/api/v1/", timeout=60,
                          headers={"Authorization": f"Bearer {w.agent_key}"})
    r = client.post("documents", json={"scope": "/marketing/social", "title": "Handbook",
                                       "text": "The team meets on Mondays."})
    assert r.status_code == 201, r.text
    with account_context(w.account.id):
        _, alice_key = services.credential_create(account_id=w.account.id, peer=w.subject)
    yield {"world": w, "client": client, "knowledge_id": str(item.id), "alice_key": alice_key,
           "document_id": r.json()["document_id"]}
    client.close()


def run(client: httpx.Client, cases: list[Case]) -> list[str]:
    """Send every case; return one line per mismatch (an empty list is a pass)."""
    problems: list[str] = []
    for case in cases:
        kwargs: dict[str, Any] = {"params": case.params, "headers": dict(case.headers)}
        if case.raw is not None:
            kwargs["content"] = case.raw
            kwargs["headers"].setdefault("Content-Type", "application/json")
        elif case.body is not None:
            # ensure_ascii keeps lone surrogates as \ud800 escapes, as a JSON client sends them
            kwargs["content"] = json.dumps(case.body).encode()
            kwargs["headers"].setdefault("Content-Type", "application/json")
        r = client.request(case.method, case.path, **kwargs)
        try:
            if r.status_code >= 400:
                assert_error(r, case.status, case.code)
            else:
                assert r.status_code in case.status, r.status_code
                r.json()
        except (AssertionError, KeyError, ValueError) as exc:
            problems.append(f"{case.name}: {case.method} {case.path} -> {r.status_code} "
                            f"{r.text[:300]!r} ({exc})")
    return problems


def check(client: httpx.Client, cases: list[Case], record_property: Any) -> None:
    record_property("inputs_tried", len(cases))
    problems = run(client, cases)
    assert not problems, "\n".join(problems)


def _read(path: str, **body: Any) -> dict[str, Any]:
    """A read request body at the world's scope (`path` names the endpoint, for reading)."""
    return {"scope": "/marketing/social", **body}


# --- oversize ----------------------------------------------------------------------------


def test_oversize_payloads_are_413_with_a_code(target, settings, record_property):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    settings.MEMHOUSE_MAX_MESSAGE_CHARS = 1000
    settings.MEMHOUSE_MAX_BATCH = 5
    big = "word " * 20_000  # 100 kB, above the request limit
    msg = {"peer_key": "caroline", "text": "I like tea."}
    cases = [
        Case("body above the request limit (ingest)", "POST", "messages",
             {"scope": "/", "messages": [{"peer_key": "caroline", "text": big}]},
             status=(413,), code="request_too_large"),
        Case("body above the request limit (search)", "POST", "search",
             _read("search", query=big), status=(413,), code="request_too_large"),
        Case("body above the request limit (document)", "POST", "documents",
             {"scope": "/", "title": "Big", "text": big}, status=(413,),
             code="request_too_large"),
        Case("body above the request limit (peer)", "POST", "peers",
             {"key": "big", "kind": "human", "display_name": big}, status=(413,),
             code="request_too_large"),
        Case("message above MEMHOUSE_MAX_MESSAGE_CHARS", "POST", "messages",
             {"scope": "/", "messages": [{"peer_key": "caroline", "text": "x" * 1001}]},
             status=(413,), code="message_too_long"),
        Case("batch above MEMHOUSE_MAX_BATCH", "POST", "messages",
             {"scope": "/", "messages": [msg] * 6}, status=(413,), code="batch_too_large"),
        Case("query above 2000 characters", "POST", "search",
             _read("search", query="x" * 2001), code="invalid_input"),
        Case("context query above 2000 characters", "POST", "context",
             _read("context", query="x" * 2001), code="invalid_input"),
        Case("ask query above 2000 characters", "POST", "ask",
             _read("ask", query="x" * 2001), code="invalid_input"),
        Case("peer key above 200 characters", "POST", "peers",
             {"key": "k" * 201, "kind": "human"}, code="invalid_input"),
        Case("scope path above 500 characters", "POST", "scopes",
             {"path": "/" + "a" * 600}, code="invalid_input"),
        Case("21 aliases", "POST", "peers",
             {"key": "many", "kind": "human", "aliases": [f"a{i}" for i in range(21)]},
             code="invalid_input"),
    ]
    check(target["client"], cases, record_property)
    with account_context(target["world"].account.id):
        assert not Message.objects.exists()  # nothing from a refused batch was written
        assert not Peer.objects.filter(key__in=["big", "many"]).exists()


# --- websearch syntax --------------------------------------------------------------------

WEBSEARCH = ['"unclosed', "- -", "or or or", '""', "-", "!&|():*", "a & b | !c", "'",
             "\\", '"a" -"b" or', ":*", "<->", "(((", "hiking -", '-"', "OR", "\"\" \"\"",
             "hiking or", "or hiking", "-hiking", "- hiking -mountains"]


def test_malformed_websearch_syntax_is_searched_not_a_500(target, record_property):
    client = target["client"]
    cases = [Case(f"{where} {q!r}", "POST", where, _read(where, query=q, deadline_ms=5000)
                  if where == "search" else _read(where, query=q), status=(200,))
             for q in WEBSEARCH for where in ("search", "context")]
    cases += [Case(f"ask {q!r}", "POST", "ask", _read("ask", query=q), status=(200,))
              for q in WEBSEARCH[:6]]
    check(client, cases, record_property)
    # The lexical strategy parsed every one of them: none was dropped as an error.
    for q in WEBSEARCH:
        body = client.post("search", json=_read("search", query=q, deadline_ms=5000)).json()
        dropped = {d["name"]: d["reason"] for d in body["strategies"]["dropped"]}
        assert dropped.get("lexical") != "error", (q, dropped)
    hit = client.post("search", json=_read("search", query='"loves hiking" -chess',
                                           deadline_ms=5000)).json()
    assert hit["candidates"][0]["id"] == target["knowledge_id"]
    gone = client.post("search", json=_read("search", query="hiking -mountains",
                                            deadline_ms=5000)).json()
    lexical = [c for c in gone["candidates"] if "lexical" in c["scores"]]
    assert lexical == []  # the exclusion was honoured, not dropped


# --- unicode -----------------------------------------------------------------------------

NUL = "caf\x00e"
SURROGATE = "bad \ud800 text"
STORABLE = {
    "rtl": "I moved to \u202eodnoL\u202c last \u200fweek.",
    "combining": "I visited Zu\u0308rich and Sa\u0303o Paulo with Ame\u0301lie.",
    "emoji": "I adopted a dog 🐕 and my family 👩\u200d👩\u200d👧 loves him 🇳🇴.",
    "long_token": "I wrote " + "z" * 10_000 + " today.",
    "bom_and_zero_width": "\ufeffI like\u200b tea\u2060.",
}


def test_unicode_edge_cases_are_refused_or_kept_exactly(target, record_property):
    kid, did = target["knowledge_id"], target["document_id"]

    def ingest(text: Any = "ok", metadata: Any = None, cid: str | None = None) -> dict:
        m: dict[str, Any] = {"peer_key": "caroline", "text": text}
        if metadata is not None:
            m["metadata"] = metadata
        if cid is not None:
            m["id"] = cid
        return {"scope": "/", "messages": [m]}

    bad = {"nul": NUL, "surrogate": SURROGATE}
    cases: list[Case] = []
    for label, text in bad.items():
        cases += [
            Case(f"message text {label}", "POST", "messages", ingest(text)),
            Case(f"message metadata value {label}", "POST", "messages",
                 ingest(metadata={"note": text}), code="invalid_input"),
            Case(f"message metadata key {label}", "POST", "messages",
                 ingest(metadata={text: 1}), code="invalid_input"),
            Case(f"nested metadata {label}", "POST", "messages",
                 ingest(metadata={"a": [{"b": text}]}), code="invalid_input"),
            Case(f"client id {label}", "POST", "messages", ingest(cid=text)),
            Case(f"session {label}", "POST", "messages",
                 {**ingest(), "session": text}),
            Case(f"search query {label}", "POST", "search", _read("search", query=text)),
            Case(f"context query {label}", "POST", "context", _read("context", query=text)),
            Case(f"ask query {label}", "POST", "ask", _read("ask", query=text)),
            Case(f"search scope {label}", "POST", "search",
                 {"query": "x", "scope": text}, status=(400, 404)),
            Case(f"search peer_key {label}", "POST", "search",
                 _read("search", query="x", peer_key=text)),
            Case(f"peer key {label}", "POST", "peers", {"key": text, "kind": "human"}),
            Case(f"peer display name {label}", "POST", "peers",
                 {"key": f"p-{label}", "kind": "human", "display_name": text}),
            Case(f"peer alias {label}", "POST", "peers",
                 {"key": f"q-{label}", "kind": "human", "aliases": [text]}),
            Case(f"scope path {label}", "POST", "scopes", {"path": f"/x/{text}"}),
            Case(f"document text {label}", "POST", "documents",
                 {"scope": "/", "title": "t", "text": text}),
            Case(f"document title {label}", "POST", "documents",
                 {"scope": "/", "title": text, "text": "Hello there world."}),
            Case(f"document version {label}", "POST", f"documents/{did}/versions",
                 {"text": text}),
            Case(f"contest reason {label}", "POST", f"me/knowledge/{kid}/contest",
                 {"reason": text}, code="invalid_input",
                 headers={"Authorization": f"Bearer {target['alice_key']}"}),
            Case(f"auth username {label}", "POST", "auth/token",
                 {"username": text, "password": "x"}),
        ]
    # In a URL a NUL is %00 and a lone surrogate can only arrive as its (invalid) UTF-8 bytes.
    for label, quoted in {"nul": "caf%00e", "surrogate": "bad%ED%A0%80text"}.items():
        cases += [
            Case(f"usage since {label}", "GET", f"usage?since={quoted}"),
            Case(f"cursor {label}", "GET", f"me/knowledge?cursor={quoted}",
                 headers={"Authorization": f"Bearer {target['alice_key']}"}),
            Case(f"questions status {label}", "GET", f"me/questions?status={quoted}",
                 headers={"Authorization": f"Bearer {target['alice_key']}"},
                 status=(200, 400)),
        ]
    # A NUL byte inside base64 content decodes to text PostgreSQL cannot store.
    cases.append(Case("document base64 with a NUL byte", "POST", "documents",
                      {"scope": "/", "title": "t",
                       "content_base64": base64.b64encode(b"caf\x00e au lait").decode()},
                      code="invalid_encoding"))
    cases.append(Case("document base64 that is not UTF-8", "POST", "documents",
                      {"scope": "/", "title": "t",
                       "content_base64": base64.b64encode(b"\xff\xfe\xfa").decode()}))
    cases.append(Case("invalid UTF-8 in the JSON body", "POST", "search",
                      raw=b'{"query": "caf\xc3\x28", "scope": "/"}'))
    for label, text in STORABLE.items():
        cases.append(Case(f"message text {label}", "POST", "messages",
                          ingest(text, metadata={"label": label, label: text},
                                 cid=f"u-{label}"), status=(202,)))
        cases.append(Case(f"search {label}", "POST", "search",
                          _read("search", query=text[:2000], deadline_ms=5000),
                          status=(200,)))
    cases.append(Case("emoji peer key", "POST", "peers",
                      {"key": "🐕-dog", "kind": "agent", "display_name": "Zu\u0308rich"},
                      status=(201,)))
    check(target["client"], cases, record_property)
    with account_context(target["world"].account.id):
        # Refused input left no trace; accepted input is stored exactly as sent.
        stored = {m.client_message_id: m for m in Message.objects.all()}
        assert set(stored) == {f"u-{label}" for label in STORABLE}
        for label, text in STORABLE.items():
            m = stored[f"u-{label}"]
            assert m.text == text.strip(), label
            assert m.metadata == {"label": label, label: text}, label
        assert Peer.objects.get(key="🐕-dog").display_name == "Zu\u0308rich"
        assert not Peer.objects.filter(key__in=["p-nul", "q-nul", "p-surrogate",
                                                "q-surrogate"]).exists()
        assert Document.objects.count() == 1


# --- numbers, budgets, deadlines, cursors --------------------------------------------------

NONSENSE_INTS = [-1, 0, 10**20, 10**400, "ten", 1.5, True, None, [], {}, "1e3", "  "]


def test_nonsense_limits_budgets_deadlines_and_cursors(target, record_property):
    kid = target["knowledge_id"]
    alice = {"Authorization": f"Bearer {target['alice_key']}"}
    cases: list[Case] = []
    for value in NONSENSE_INTS:
        cases += [
            Case(f"search limit {value!r}", "POST", "search",
                 _read("search", query="hiking", limit=value), code="invalid_input"),
            Case(f"search offset {value!r}", "POST", "search",
                 _read("search", query="hiking", offset=value),
                 status=(200,) if value == 0 else (400,)),
            Case(f"search deadline_ms {value!r}", "POST", "search",
                 _read("search", query="hiking", deadline_ms=value),
                 code="invalid_input"),
            Case(f"context budget_chars {value!r}", "POST", "context",
                 _read("context", budget_chars=value), code="invalid_input"),
            Case(f"lineage depth {value!r}", "POST", "lineage",
                 {"knowledge_id": kid, "depth": value}, code="invalid_input"),
            Case(f"lineage fan_out {value!r}", "POST", "lineage",
                 {"knowledge_id": kid, "fan_out": value}, code="invalid_input"),
            Case(f"lineage max_nodes {value!r}", "POST", "lineage",
                 {"knowledge_id": kid, "max_nodes": value}, code="invalid_input"),
        ]
    for raw in ["-1", "0", "201", "abc", "1.5", "1e3", "99999999999999999999", "0x10", " "]:
        cases.append(Case(f"page limit {raw!r}", "GET", "me/knowledge", params={"limit": raw},
                          status=(200,) if raw == " " else (400,), headers=alice))
        cases.append(Case(f"questions limit {raw!r}", "GET", "me/questions",
                          params={"limit": raw}, status=(200,) if raw == " " else (400,),
                          headers=alice))
    stale = base64.urlsafe_b64encode(b"2020-01-01T00:00:00+00:00|not-a-uuid").decode()
    for raw in ["!!!", "AAAA", "x" * 400, stale, base64.urlsafe_b64encode(b"\xff" * 30).decode(),
                "x" * 501]:
        cases.append(Case(f"cursor {raw[:20]!r}", "GET", "me/knowledge", params={"cursor": raw},
                          headers=alice))
        cases.append(Case(f"questions cursor {raw[:20]!r}", "GET", "me/questions",
                          params={"cursor": raw}, headers=alice))
    cases += [
        Case("search as_of garbage", "POST", "search", _read("search", query="x", as_of="soon")),
        Case("search as_of far future", "POST", "search",
             _read("search", query="x", as_of="9999-12-31T23:59:59Z", deadline_ms=5000),
             status=(200,)),
        Case("search as_of year 0", "POST", "search",
             _read("search", query="x", as_of="0000-01-01T00:00:00Z")),
        Case("occurred_at garbage", "POST", "messages",
             {"scope": "/", "messages": [{"peer_key": "caroline", "text": "Hi.",
                                          "occurred_at": "yesterday"}]}),
        Case("usage since without a zone", "GET", "usage", params={"since": "2026-01-01"},
             code="naive_datetime"),
        Case("search as_of without a zone", "POST", "search",
             _read("search", query="x", as_of="2026-01-01T10:00:00"), code="naive_datetime"),
        Case("occurred_at without a zone", "POST", "messages",
             {"scope": "/", "messages": [{"peer_key": "caroline", "text": "Hi.",
                                          "occurred_at": "2026-01-01T10:00:00"}]},
             code="naive_datetime"),
        Case("usage since garbage", "GET", "usage", params={"since": "2026-13-45T99:00Z"},
             code="invalid_since"),
        Case("a good page still works", "GET", "me/knowledge", params={"limit": "5"},
             status=(200,), headers=alice),
    ]
    check(target["client"], cases, record_property)


# --- wrong JSON types ----------------------------------------------------------------------

ENDPOINTS_WITH_BODIES = ["messages", "search", "context", "ask", "lineage", "stable-profile",
                         "peers", "scopes", "documents", "auth/token"]


def test_wrong_json_types_are_400_invalid_input(target, record_property):
    did = target["document_id"]
    cases: list[Case] = []
    for path in [*ENDPOINTS_WITH_BODIES, f"documents/{did}/versions"]:
        for label, body in [("a list", []), ("a string", "x"), ("a number", 3),
                            ("null", None), ("nested list", [{"query": "x"}])]:
            cases.append(Case(f"{path} body is {label}", "POST", path,
                              raw=json.dumps(body).encode()))
        cases.append(Case(f"{path} truncated JSON", "POST", path, raw=b'{"query": "x',
                          code="malformed_request"))
        cases.append(Case(f"{path} NaN", "POST", path, raw=b'{"limit": NaN, "query": "x"}',
                          code="malformed_request"))
        cases.append(Case(f"{path} form-encoded", "POST", path, raw=b"query=x",
                          headers={"Content-Type": "application/x-www-form-urlencoded"},
                          status=(415,), code="unsupported_media_type"))
    wrong = [
        ("messages", {"scope": "/", "messages": "hello"}),
        ("messages", {"scope": "/", "messages": [1, 2]}),
        ("messages", {"scope": "/", "messages": [{"peer_key": "caroline", "text": ["x"]}]}),
        ("messages", {"scope": "/", "messages": [{"peer_key": "caroline", "text": "x",
                                                 "metadata": "str"}]}),
        ("messages", {"scope": "/", "messages": [{"peer_key": "caroline", "text": "x",
                                                 "metadata": [1]}]}),
        ("messages", {"scope": ["/"], "messages": [{"text": "x"}]}),
        ("messages", {"scope": "/", "messages": []}),
        ("search", {"query": {"a": 1}}),
        ("search", {"query": ["hiking"]}),
        ("search", {"query": "x", "scope": 5}),
        ("search", {"query": "x", "peer_key": 3}),
        ("search", {"query": "x", "profile": ["fast"]}),
        ("search", {"query": "x", "include_identity_profile": "maybe"}),
        ("search", {"query": "x", "as_of": 12}),
        ("context", {"scope": "/", "session": {"id": 1}}),
        ("ask", {"query": "x", "scope": "/", "effort": 3}),
        ("lineage", {"knowledge_id": [12]}),
        ("peers", {"key": "k", "kind": "robot"}),
        ("peers", {"key": "k", "kind": "human", "aliases": "one"}),
        ("peers", {"key": "k", "kind": "human", "aliases": [["nested"]]}),
        ("scopes", {"path": None}),
        ("documents", {"scope": "/", "title": "t"}),
        ("documents", {"scope": "/", "title": "t", "text": "a", "content_base64": "YQ=="}),
        ("documents", {"scope": "/", "title": "t", "content_base64": "!!notbase64"}),
        ("auth/token", {"username": ["alice"], "password": "x"}),
    ]
    cases += [Case(f"{p} {json.dumps(b)[:60]}", "POST", p, b) for p, b in wrong]
    cases += [
        Case("document media type without text", "POST", "documents",
             {"scope": "/", "title": "t", "content_base64": "AAEC",
              "media_type": "application/octet-stream"}, status=(415,),
             code="unsupported_media_type"),
        Case("unknown profile", "POST", "search", _read("search", query="x", profile="warp"),
             status=(400,)),
        Case("strategy override", "POST", "search",
             _read("search", query="x", strategies=["lexical"]),
             code="strategy_override_forbidden"),
        Case("PUT on a POST endpoint", "PUT", "search", {"query": "x"}, status=(405,),
             code="method_not_allowed"),
        Case("no credential", "POST", "search", {"query": "x"}, status=(401, 403),
             headers={"Authorization": ""}),
        Case("garbage credential", "POST", "search", {"query": "x"}, status=(401,),
             headers={"Authorization": "Bearer mh_nope_nope"}),
        Case("non-bearer scheme", "POST", "search", {"query": "x"}, status=(401,),
             headers={"Authorization": "Basic YWxpY2U6eA=="}),
    ]
    check(target["client"], cases, record_property)


# --- ids and peers -------------------------------------------------------------------------


def test_invalid_uuids_and_unknown_peers(target, record_property):
    ghost = str(uuid.uuid4())
    kid = target["knowledge_id"]
    alice = {"Authorization": f"Bearer {target['alice_key']}"}  # /me routes are for people
    cases = [
        Case("lineage invalid uuid", "POST", "lineage", {"knowledge_id": "not-a-uuid"},
             code="invalid_input"),
        Case("lineage uuid with NUL", "POST", "lineage", {"knowledge_id": "\x00" * 36},
             code="invalid_input"),
        Case("lineage unknown uuid", "POST", "lineage", {"knowledge_id": ghost},
             status=(404,), code="not_found"),
        Case("erasure invalid uuid (agent is no admin)", "POST", "erasure",
             {"message_id": "nope"}, status=(403,), code="permission_denied"),
        Case("document detail unknown", "GET", f"documents/{ghost}", status=(404,),
             code="not_found"),
        Case("document delete unknown", "DELETE", f"documents/{ghost}", status=(404,),
             code="not_found"),
        Case("version of unknown document", "POST", f"documents/{ghost}/versions",
             {"text": "Hello there."}, status=(404,), code="not_found"),
        Case("confirm unknown", "POST", f"me/knowledge/{ghost}/confirm", status=(404,),
             code="not_found", headers=alice),
        Case("answer unknown question", "POST", f"questions/{ghost}/answer",
             {"answer": "yes"}, status=(404,), code="not_found", headers=alice),
        Case("confirm as an agent", "POST", f"me/knowledge/{ghost}/confirm", status=(403,),
             code="human_only"),
        Case("curator approve (agent is no curator)", "POST",
             f"curator/knowledge/{kid}/approve", {}, status=(403,),
             code="permission_denied"),
    ]
    for bad in ["not-a-uuid", "12345", "%00", "..%2F..%2Fetc", ghost.upper() + "0"]:
        cases += [
            Case(f"document detail {bad!r}", "GET", f"documents/{bad}", status=(404,),
                 code="not_found"),
            Case(f"confirm {bad!r}", "POST", f"me/knowledge/{bad}/confirm", status=(404,),
                 code="not_found", headers=alice),
            Case(f"answer {bad!r}", "POST", f"questions/{bad}/answer", {"answer": "yes"},
                 status=(404,), code="not_found", headers=alice),
        ]
    cases.append(Case("unknown API path", "GET", "no-such-endpoint", status=(404,),
                      code="not_found"))
    for path, body in [("search", {"query": "x"}), ("context", {}), ("ask", {"query": "x"}),
                       ("stable-profile", {}), ("lineage", {"knowledge_id": kid})]:
        base = body if path in ("stable-profile", "lineage") else _read(path, **body)
        cases += [
            Case(f"{path} unknown peer_key", "POST", path, {**base, "peer_key": "ghost"},
                 code="unknown_peer_key"),
            Case(f"{path} blank peer_key", "POST", path, {**base, "peer_key": ""},
                 code="invalid_input"),
            Case(f"{path} another Account's peer_key", "POST", path,
                 {**base, "peer_key": "mallory"}, code="unknown_peer_key"),
        ]
    cases += [
        Case("ingest unknown peer_key", "POST", "messages",
             {"scope": "/", "messages": [{"peer_key": "ghost", "text": "Hi there."}]},
             code="unknown_peer_key"),
        Case("ingest one unknown peer among good ones", "POST", "messages",
             {"scope": "/", "messages": [{"peer_key": "caroline", "text": "I like tea."},
                                         {"peer_key": "ghost", "text": "Hi there."}]},
             code="unknown_peer_key"),
        Case("ingest unknown scope", "POST", "messages",
             {"scope": "/nowhere", "messages": [{"text": "Hi there."}]},
             code="unknown_scope"),
        Case("stable profile of the agent itself", "POST", "stable-profile", {},
             status=(200, 400)),
    ]
    check(target["client"], cases, record_property)
    with account_context(target["world"].account.id):
        assert not Message.objects.exists()  # the half-good batch was refused whole
