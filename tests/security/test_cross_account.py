"""Cross-Account matrix: every /api/v1/ route and method, every read selector.

Account B's credentials present Account A's real ids (knowledge, documents, questions,
messages, sessions, peer keys, scope paths) and must get exactly the response a random
unknown id gets (no existence oracle); B's lists never hold A's rows; request values that
try to choose the Account (`account_id` / `account` in body or query, `X-Account`-style
headers) change nothing. Finally each public selector and retrieval read function, called
inside B's context with A's ids and objects, returns nothing of A's.

The route table below must cover every route Django resolves under /api/v1/: a new
endpoint without a case fails `test_the_case_table_covers_every_route`.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from tests.security.corpus import Corpus, api, random_id

pytestmark = pytest.mark.django_db

SOCIAL = "/marketing/social"
TENANCY_HEADERS = {"X-Account": "{a}", "X-Account-Id": "{a}", "X-Memhouse-Account": "{a}",
                   "X-Memhouse-Account-Key": "{a}", "X-Tenant": "{a}"}


# --- route enumeration ------------------------------------------------------------------

def api_routes() -> set[tuple[str, str]]:
    """(route name, HTTP method) for every pattern under api/v1/, from the resolver."""
    out: set[tuple[str, str]] = set()

    def walk(patterns: list[Any], prefix: str) -> None:
        for p in patterns:
            route = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                walk(p.url_patterns, route)
            elif isinstance(p, URLPattern) and route.startswith("api/v1/"):
                view = p.callback.view_class
                for m in view.http_method_names:
                    if m not in ("options", "head", "trace") and hasattr(view, m):
                        out.add((p.name, m.upper()))

    walk(get_resolver().url_patterns, "")
    return out


# --- helpers ----------------------------------------------------------------------------

def _leak_free(c: Corpus, text: str, presented: tuple[str, ...] = ()) -> None:
    """No Account A text or id in a response B received (ids B itself sent excepted)."""
    for value in presented:
        text = text.replace(value, "<PRESENTED>")
    assert "acmeonly" not in text.lower(), "Account A text reached Account B"
    for kid in c.a_knowledge | {c.a_ids["document"], c.a_ids["version"], c.a_ids["message"],
                                c.a_ids["question"], c.a_ids["scope_social"]}:
        assert kid not in text, f"Account A id {kid} reached Account B"


def _normal(resp: Any, value: str) -> tuple[int, Any]:
    text = resp.content.decode().replace(value, "<ID>")
    text = re.sub(r'"elapsed_ms":\s*[0-9.]+', '"elapsed_ms":0', text)
    text = re.sub(r'"rebuilt_at":\s*"[^"]*"', '"rebuilt_at":""', text)
    return resp.status_code, json.loads(text) if text else None


def no_oracle(c: Corpus, client: APIClient, key: str, method: str, path: str,
              real: str, body: Any = None, *, field: str | None = None) -> Any:
    """B presenting A's `real` value gets what a random unknown value gets."""
    if re.fullmatch(r"[0-9a-f-]{36}", real):
        rand = random_id()
    elif real.startswith("/"):
        rand = f"/zz-{random_id()[:8]}"
    else:
        rand = f"ghost-{random_id()[:8]}"

    def send(value: str) -> Any:
        p = path.replace("{id}", value)
        b = body
        if field is not None:
            b = {**(body or {}), field: value}
        return api(client, key, method, p, b)

    r_real, r_rand = send(real), send(rand)
    assert _normal(r_real, real) == _normal(r_rand, rand), (r_real.content, r_rand.content)
    assert 400 <= r_real.status_code < 500 or r_real.status_code == 200
    _leak_free(c, r_real.content.decode(), (real,))
    return r_real


def owner_sees_it(client: APIClient, key: str, method: str, path: str, real: str,
                  body: Any = None, *, field: str | None = None) -> None:
    """The id is real: its own Account does not get 404 for it (so the oracle test above
    compared a live id, not two unknown ones)."""
    b = {**(body or {}), field: real} if field else body
    r = api(client, key, method, path.replace("{id}", real), b)
    assert r.status_code != 404, r.content


def tenancy_ignored(c: Corpus, client: APIClient, key: str, method: str, path: str,
                    body: Any = None, project: Callable[[Any], Any] = lambda r: r.json()
                    ) -> None:
    """`account_id`/`account` in body and query and X-Account-style headers naming A do
    not change what B reads or writes."""
    a = str(c.world.account.id)
    plain = api(client, key, method, path, body)
    sel_body = {**body, "account_id": a, "account": a, "account_key": a} if isinstance(
        body, dict) else body
    headers = {k: v.format(a=a) for k, v in TENANCY_HEADERS.items()}
    forged = api(client, key, method, path, sel_body, query={"account_id": a, "account": a,
                                                               "account_key": a},
                 headers=headers)
    assert plain.status_code == forged.status_code, forged.content
    assert project(plain) == project(forged)
    _leak_free(c, forged.content.decode())


def _ids_in(resp: Any) -> set[str]:
    return set(re.findall(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                          resp.content.decode()))


# --- the cases --------------------------------------------------------------------------

def case_auth_token(c: Corpus, client: APIClient) -> None:
    # Known username + wrong password answers exactly like an unknown username.
    r1 = api(client, None, "POST", "auth/token", {"username": "alice", "password": "wrong-1"})
    r2 = api(client, None, "POST", "auth/token", {"username": "nobody-x", "password": "wrong-1"})
    assert r1.status_code == r2.status_code == 401 and r1.json() == r2.json()
    # An account selector in the login body does not move mallory into Account A.
    r = api(client, None, "POST", "auth/token",
            {"username": "mallory", "password": "mallory-pass-123",
             "account_id": str(c.world.account.id)},
            headers={"X-Account": str(c.world.account.id)})
    assert r.status_code == 201
    me = api(client, r.json()["token"], "GET", "me")
    assert me.json()["peer_key"] == "mallory"
    assert api(client, r.json()["token"], "POST", "search",
               {"query": "zephyr", "scope": SOCIAL}).status_code == 404


def case_me(c: Corpus, client: APIClient) -> None:
    tenancy_ignored(c, client, c.keys["mallory"], "GET", "me")
    assert api(client, c.keys["mallory"], "GET", "me").json()["peer_key"] == "mallory"


def case_usage(c: Corpus, client: APIClient) -> None:
    api(client, c.keys["scribe"], "POST", "search", {"query": "zephyr", "scope": SOCIAL})
    tenancy_ignored(c, client, c.keys["mel"], "GET", "usage")
    assert api(client, c.keys["mel"], "GET", "usage").json()["totals"] == {}


def case_scopes_get(c: Corpus, client: APIClient) -> None:
    r = api(client, c.keys["mallory"], "GET", "scopes")
    assert [s["path"] for s in r.json()["scopes"]] == ["/", "/marketing"]
    _leak_free(c, r.content.decode())
    tenancy_ignored(c, client, c.keys["mallory"], "GET", "scopes")


def case_scopes_post(c: Corpus, client: APIClient) -> None:
    from knowledge.models import Scope
    from memhouse.core.tenancy import rebind_account_for_tests

    # A path that exists only in A is created in B like any new path.
    for path in (SOCIAL, "/zz-" + random_id()[:6]):
        r = api(client, c.keys["mallory"], "POST", "scopes",
                {"path": path, "account_id": str(c.world.account.id)},
                headers={"X-Account": str(c.world.account.id)})
        assert r.status_code == 201
        assert r.json()["id"] != c.a_ids["scope_social"]
        rebind_account_for_tests(c.world.other_account.id)
        assert Scope.objects.filter(path=path).exists()
    rebind_account_for_tests(c.world.account.id)
    assert Scope.objects.filter(path=SOCIAL).values_list("id", flat=True).get() == \
        c.world.scope.id
    assert not Scope.objects.filter(path__startswith="/zz-").exists()


def case_peers_get(c: Corpus, client: APIClient) -> None:
    r = api(client, c.keys["mallory"], "GET", "peers")
    assert {p["key"] for p in r.json()["peers"]} == {"mallory", "mel"}
    tenancy_ignored(c, client, c.keys["mallory"], "GET", "peers")


def case_peers_post(c: Corpus, client: APIClient) -> None:
    # A's peer key is free in B: the same 201 as a never-used key (mel administers B;
    # only administrators register people).
    r1 = api(client, c.keys["mel"], "POST", "peers", {"key": "alice", "kind": "human"})
    r2 = api(client, c.keys["mel"], "POST", "peers", {"key": "zz-new", "kind": "human"})
    assert r1.status_code == r2.status_code == 201
    from knowledge.models import Peer
    from memhouse.core.tenancy import rebind_account_for_tests

    a = str(c.world.account.id)
    r = api(client, c.keys["mallory"], "POST", "peers",
            {"key": "zz-other", "kind": "agent", "account_id": a, "account": a},
            query={"account_id": a}, headers={"X-Account": a})
    assert r.status_code == 201
    rebind_account_for_tests(c.world.other_account.id)
    assert set(Peer.objects.filter(key__in=["alice", "zz-new", "zz-other"])
               .values_list("key", flat=True)) == {"alice", "zz-new", "zz-other"}
    rebind_account_for_tests(c.world.account.id)
    assert not Peer.objects.filter(key__startswith="zz-").exists()


def case_messages(c: Corpus, client: APIClient) -> None:
    from knowledge.models import Message, Session
    from memhouse.core.tenancy import rebind_account_for_tests

    key = c.keys["mallory"]
    no_oracle(c, client, key, "POST", "messages", "alice",
              {"scope": "/marketing", "messages": [{"text": "hi", "peer_key": "{v}"}]})
    # peer_key sits inside a list: send it by hand.
    for value in ("alice", "ghost-zz"):
        r = api(client, key, "POST", "messages",
                {"scope": "/marketing", "messages": [{"text": "hi", "peer_key": value}]})
        assert r.status_code == 403 and r.json()["error"]["code"] == "act_for_denied"
    r_a = api(client, key, "POST", "messages", {"scope": SOCIAL, "messages": [{"text": "x"}]})
    r_r = api(client, key, "POST", "messages", {"scope": "/zz-none", "messages": [{"text": "x"}]})
    assert _normal(r_a, SOCIAL) == _normal(r_r, "/zz-none")
    # A's session id and account selectors: stored in B, A's session untouched.
    r = api(client, key, "POST", "messages",
            {"scope": "/marketing", "session": c.a_ids["session"],
             "account_id": str(c.world.account.id),
             "messages": [{"text": "B's own line", "id": "b-msg-1"}]},
            headers={"X-Account": str(c.world.account.id)})
    assert r.status_code == 202, r.content
    rebind_account_for_tests(c.world.other_account.id)
    assert Message.objects.filter(client_message_id="b-msg-1").count() == 1
    assert Session.objects.filter(external_id=c.a_ids["session"]).count() == 1
    rebind_account_for_tests(c.world.account.id)
    assert not Message.objects.filter(client_message_id="b-msg-1").exists()
    assert Message.objects.filter(session__external_id=c.a_ids["session"]).count() == 1


def case_documents_post(c: Corpus, client: APIClient) -> None:
    from knowledge.models import Document
    from memhouse.core.tenancy import rebind_account_for_tests

    key = c.keys["mallory"]
    for ext in ("acme-doc-ext", "zz-" + random_id()[:6]):
        r = api(client, key, "POST", "documents",
                {"scope": "/marketing", "title": "B doc", "text": "B text", "external_id": ext,
                 "account_id": str(c.world.account.id)},
                headers={"X-Account": str(c.world.account.id)})
        assert r.status_code == 201, r.content
        assert r.json()["document_id"] != c.a_ids["document"]
    rebind_account_for_tests(c.world.account.id)
    assert Document.objects.get(external_id="acme-doc-ext").title == "Acme acmeonly plan"
    assert Document.objects.count() == 1


def case_documents_get(c: Corpus, client: APIClient) -> None:
    key = c.keys["mallory"]
    r = _get_oracle(c, client, key, "documents", SOCIAL, {}, "scope")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    # A's external id is an empty filter in B, like any unknown one.
    r = _get_oracle(c, client, key, "documents", "acme-doc-ext", {"include_text": "true"},
                    "external_id")
    assert r.status_code == 200 and r.json()["items"] == []
    for query in ({}, {"include_text": "true", "limit": "100"}, {"scope": "/marketing"}):
        own = api(client, key, "GET", "documents", query=query)
        assert own.status_code == 200 and own.json()["items"] == [], own.content
    tenancy_ignored(c, client, key, "GET", "documents")
    # Sanity: A's own agent does list A's document, so the emptiness above is isolation.
    mine = api(client, c.keys["scribe"], "GET", "documents",
               query={"scope": SOCIAL, "include_text": "true"})
    assert mine.json()["items"][0]["id"] == c.a_ids["document"]
    assert "acmeonly" in mine.content.decode().lower()


def case_document_get(c: Corpus, client: APIClient) -> None:
    path = "documents/{id}"
    r = no_oracle(c, client, c.keys["mallory"], "GET", path, c.a_ids["document"])
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    owner_sees_it(client, c.keys["scribe"], "GET", path, c.a_ids["document"])


def case_message_get(c: Corpus, client: APIClient) -> None:
    path = "messages/{id}"
    r = no_oracle(c, client, c.keys["mallory"], "GET", path, c.a_ids["message"])
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    # Its speaker, read for by A's own agent, does see it: the id above was live.
    r = api(client, c.keys["scribe"], "GET", f"messages/{c.a_ids['message']}",
            query={"peer_key": "alice"})
    assert r.status_code == 200, r.content
    assert r.json()["message"]["id"] == c.a_ids["message"]


def case_document_delete(c: Corpus, client: APIClient) -> None:
    path = "documents/{id}"
    r = no_oracle(c, client, c.keys["mel"], "DELETE", path, c.a_ids["document"])
    assert r.status_code == 404
    owner_sees_it(client, c.keys["scribe"], "DELETE", path, c.a_ids["document"])


def case_document_versions(c: Corpus, client: APIClient) -> None:
    path = "documents/{id}/versions"
    r = no_oracle(c, client, c.keys["mallory"], "POST", path, c.a_ids["document"],
                  {"text": "B overwrites"})
    assert r.status_code == 404
    owner_sees_it(client, c.keys["scribe"], "POST", path, c.a_ids["document"],
                  {"text": "A's own revision"})


def _read_cases(c: Corpus, client: APIClient, path: str, body: dict[str, Any]) -> None:
    """search / ask / context / stable-profile: peer_key and scope oracles, B's own rows
    only, tenancy selectors ignored."""
    key = c.keys["mallory"]
    # B's human names A's peer: refused as acting for someone else, exactly as for a key
    # that exists nowhere.
    r = no_oracle(c, client, key, "POST", path, "alice", body, field="peer_key")
    assert r.status_code == 403 and r.json()["error"]["code"] == "act_for_denied"
    r = no_oracle(c, client, key, "POST", path, SOCIAL, body, field="scope")
    assert r.status_code == 404
    own = api(client, key, "POST", path, body)
    assert own.status_code == 200, own.content
    _leak_free(c, own.content.decode())
    tenancy_ignored(c, client, key, "POST", path, body,
                    project=lambda r: sorted(_ids_in(r) & (c.a_knowledge | set(c.b_knowledge))))
    # Sanity: the same read in A does reach A's rows, so emptiness above is isolation.
    a_body = {**body, "scope": SOCIAL}
    if path != "stable-profile":
        mine = api(client, c.keys["scribe"], "POST", path, a_body)
        assert "acmeonly" in mine.content.decode().lower()


def case_search(c: Corpus, client: APIClient) -> None:
    body = {"query": "zephyr note", "scope": "/marketing", "limit": 100, "deadline_ms": 5000}
    _read_cases(c, client, "search", body)
    got = {x["id"] for x in api(client, c.keys["mallory"], "POST", "search", body)
           .json()["candidates"]}
    assert got == set(c.b_knowledge)


def case_ask(c: Corpus, client: APIClient) -> None:
    _read_cases(c, client, "ask", {"query": "zephyr note", "scope": "/marketing",
                                   "effort": "medium", "include_source_recall": True})


def case_context(c: Corpus, client: APIClient) -> None:
    body = {"scope": "/marketing", "query": "zephyr note"}
    _read_cases(c, client, "context", body)
    r = no_oracle(c, client, c.keys["mallory"], "POST", "context", c.a_ids["session"], body,
                  field="session")
    assert r.status_code == 404


def case_lineage(c: Corpus, client: APIClient) -> None:
    public = c.cells[("about_scope", "public", "active")]
    for real in (public, c.a_ids["k_provisional"], c.a_ids["k_held"]):
        r = no_oracle(c, client, c.keys["mallory"], "POST", "lineage", real, {},
                      field="knowledge_id")
        assert r.status_code == 404
    owner_sees_it(client, c.keys["scribe"], "POST", "lineage", public, {}, field="knowledge_id")


def case_stable_profile(c: Corpus, client: APIClient) -> None:
    _read_cases(c, client, "stable-profile", {"scope": "/marketing"})


def case_curator_queue(c: Corpus, client: APIClient) -> None:
    r = api(client, c.keys["mel"], "GET", "curator/queue", query={"limit": "200"})
    assert r.status_code == 200 and r.json()["items"] == []
    tenancy_ignored(c, client, c.keys["mel"], "GET", "curator/queue")
    assert api(client, c.keys["carol"], "GET", "curator/queue").json()["items"]


def _curator(action: str, cell_or_id: str, body: dict[str, Any]) -> Callable[..., None]:
    def case(c: Corpus, client: APIClient) -> None:
        real = c.a_ids.get(cell_or_id) or c.cells[tuple(cell_or_id.split(":"))]  # type: ignore[index]
        path = f"curator/knowledge/{{id}}/{action}"
        r = no_oracle(c, client, c.keys["mel"], "POST", path, real, body)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        owner_sees_it(client, c.keys["carol"], "POST", path, real, body)
    return case


def case_me_knowledge(c: Corpus, client: APIClient) -> None:
    r = api(client, c.keys["mallory"], "GET", "me/knowledge", query={"limit": "200"})
    assert r.status_code == 200 and r.json()["items"] == []
    tenancy_ignored(c, client, c.keys["mallory"], "GET", "me/knowledge")
    assert api(client, c.keys["alice"], "GET", "me/knowledge").json()["items"]


def _subject(action: str, body: dict[str, Any]) -> Callable[..., None]:
    def case(c: Corpus, client: APIClient) -> None:
        real = c.cells[("alice_peer", "internal", "active")]
        path = f"me/knowledge/{{id}}/{action}"
        r = no_oracle(c, client, c.keys["mallory"], "POST", path, real, body)
        assert r.status_code == 404
        owner_sees_it(client, c.keys["alice"], "POST", path, real, body)
    return case


def case_me_questions(c: Corpus, client: APIClient) -> None:
    for status in ("open", "answered", "expired"):
        r = api(client, c.keys["mallory"], "GET", "me/questions", query={"status": status})
        assert r.status_code == 200 and r.json()["items"] == []
    tenancy_ignored(c, client, c.keys["mallory"], "GET", "me/questions")
    assert api(client, c.keys["alice"], "GET", "me/questions").json()["items"]


def case_question_answer(c: Corpus, client: APIClient) -> None:
    path = "questions/{id}/answer"
    r = no_oracle(c, client, c.keys["mallory"], "POST", path, c.a_ids["question"],
                  {"answer": "yes"})
    assert r.status_code == 404
    owner_sees_it(client, c.keys["alice"], "POST", path, c.a_ids["question"], {"answer": "yes"})


def case_erasure(c: Corpus, client: APIClient) -> None:
    for field, real in (("message_id", c.a_ids["message"]), ("document_id", c.a_ids["document"]),
                        ("peer_key", "alice")):
        r = no_oracle(c, client, c.keys["mel"], "POST", "erasure", real, {}, field=field)
        assert r.status_code == 404, r.content
    owner_sees_it(client, c.keys["dave"], "POST", "erasure", c.a_ids["message"], {},
                  field="message_id")


def case_curator_merge(c: Corpus, client: APIClient) -> None:
    real = [c.cells[("alice_peer", "internal", "active")],
            c.cells[("alice_peer", "public", "active")]]
    r_real = api(client, c.keys["mel"], "POST", "curator/knowledge/merge", {"ids": real})
    r_rand = api(client, c.keys["mel"], "POST", "curator/knowledge/merge",
                 {"ids": [random_id(), random_id()]})
    assert r_real.status_code == r_rand.status_code == 404
    assert r_real.json() == r_rand.json()
    r = api(client, c.keys["carol"], "POST", "curator/knowledge/merge", {"ids": real})
    assert r.status_code != 404, r.content


def case_scope_belief_time_get(c: Corpus, client: APIClient) -> None:
    path = "scopes/settings/belief-time"
    r_real = api(client, c.keys["mel"], "GET", path, query={"scope": SOCIAL})
    r_rand = api(client, c.keys["mel"], "GET", path, query={"scope": f"/zz-{random_id()[:8]}"})
    assert r_real.status_code == r_rand.status_code == 404
    assert api(client, c.keys["dave"], "GET", path, query={"scope": SOCIAL}).status_code == 200


def case_scope_belief_time_put(c: Corpus, client: APIClient) -> None:
    body = {"belief_time": {"expiry_grace_days": 1}}
    r = no_oracle(c, client, c.keys["mel"], "PUT", "scopes/settings/belief-time", SOCIAL, body,
                  field="scope")
    assert r.status_code == 404
    owner_sees_it(client, c.keys["dave"], "PUT", "scopes/settings/belief-time", SOCIAL, body,
                  field="scope")


def _a_scope_link(c: Corpus) -> str:
    """Link Account A's /marketing/social and /marketing/paid (rolled back with the test)."""
    from knowledge.models import Scope, ScopeRelation
    from memhouse.core.tenancy import account_context

    with account_context(c.world.account.id):
        rel = ScopeRelation.objects.create(account=c.world.account,
                                           source=Scope.objects.get(path=SOCIAL),
                                           target=c.sibling)
    return str(rel.id)


def case_scope_relations_get(c: Corpus, client: APIClient) -> None:
    real = _a_scope_link(c)
    r = api(client, c.keys["mel"], "GET", "scopes/relations")
    assert r.status_code == 200 and r.json()["relations"] == []
    tenancy_ignored(c, client, c.keys["mel"], "GET", "scopes/relations")
    mine = api(client, c.keys["dave"], "GET", "scopes/relations").json()["relations"]
    assert [x["id"] for x in mine] == [real]


def case_scope_relations_post(c: Corpus, client: APIClient) -> None:
    # A scope path that exists only in A is as unknown to B as a random one.
    body = {"target": "/marketing"}
    r = no_oracle(c, client, c.keys["mel"], "POST", "scopes/relations", SOCIAL, body,
                  field="source")
    assert r.status_code == 404
    owner_sees_it(client, c.keys["dave"], "POST", "scopes/relations", SOCIAL, body,
                  field="source")


def case_scope_relation_delete(c: Corpus, client: APIClient) -> None:
    real = _a_scope_link(c)
    r = no_oracle(c, client, c.keys["mel"], "DELETE", "scopes/relations/{id}", real)
    assert r.status_code == 404
    owner_sees_it(client, c.keys["dave"], "DELETE", "scopes/relations/{id}", real)


def case_readiness(c: Corpus, client: APIClient) -> None:
    # A's scope path is as unknown to B as a random one, and A's peer keys name nobody.
    r = no_oracle(c, client, c.keys["mallory"], "GET", "readiness?scope={id}", SOCIAL)
    assert r.status_code == 404
    owner_sees_it(client, c.keys["scribe"], "GET", "readiness?scope={id}", SOCIAL)
    r = api(client, c.keys["mallory"], "GET", "readiness",
            query={"scope": "/marketing", "subject": "alice"})
    assert (r.status_code, r.json()["error"]["code"]) == (400, "unknown_subject")
    tenancy_ignored(c, client, c.keys["mallory"], "GET", "readiness")
    _leak_free(c, api(client, c.keys["mallory"], "GET", "readiness",
                      query={"scope": "/marketing"}).content.decode())


def _dead_letter_a_message(c: Corpus) -> str:
    """Set Account A's message aside as a failed extraction (rolled back with the test)."""
    from django.utils import timezone

    from knowledge.models import Message
    from memhouse.core.tenancy import account_context

    with account_context(c.world.account.id):
        Message.objects.filter(pk=c.a_ids["message"]).update(
            extracted_at=None, extraction_failed_at=timezone.now(),
            extraction_error="ValueError: test", extraction_attempts=1)
    return str(c.a_ids["message"])


def _dead_letter_a_version(c: Corpus) -> str:
    """Set Account A's document version aside (rolled back with the test)."""
    from django.utils import timezone

    from knowledge.models import DocumentVersion
    from memhouse.core.tenancy import account_context

    with account_context(c.world.account.id):
        DocumentVersion.objects.filter(pk=c.a_ids["version"]).update(
            processed_at=None, processing_failed_at=timezone.now(),
            processing_error="crashed_repeatedly: test", processing_attempts=3)
    return str(c.a_ids["version"])


def case_dead_letters(c: Corpus, client: APIClient) -> None:
    real = _dead_letter_a_message(c)
    version = _dead_letter_a_version(c)
    for kind in ("", "message", "document_version"):
        r = api(client, c.keys["mel"], "GET", "admin/dead-letters",
                query={"limit": "200", "kind": kind})
        assert r.status_code == 200 and r.json()["items"] == []
    tenancy_ignored(c, client, c.keys["mel"], "GET", "admin/dead-letters")
    mine = api(client, c.keys["dave"], "GET", "admin/dead-letters").json()["items"]
    assert sorted((x["kind"], x["id"]) for x in mine) == [
        ("document_version", version), ("message", real)]


def case_dead_letter_retry(c: Corpus, client: APIClient) -> None:
    real = _dead_letter_a_message(c)
    path = "admin/dead-letters/{id}/retry"
    r = no_oracle(c, client, c.keys["mel"], "POST", path, real, {})
    assert r.status_code == 404
    owner_sees_it(client, c.keys["dave"], "POST", path, real, {})


def case_dead_version_retry(c: Corpus, client: APIClient) -> None:
    real = _dead_letter_a_version(c)
    path = "admin/dead-letters/document-versions/{id}/retry"
    r = no_oracle(c, client, c.keys["mel"], "POST", path, real, {})
    assert r.status_code == 404
    owner_sees_it(client, c.keys["dave"], "POST", path, real, {})


def case_auth_token_revoke(c: Corpus, client: APIClient) -> None:
    from knowledge.models import Credential
    from memhouse.core.tenancy import rebind_account_for_tests

    # B's human revokes all of B's own tokens; A's tokens stay live.
    r = api(client, c.keys["mallory"], "POST", "auth/token/revoke",
            {"all": True, "account_id": str(c.world.account.id)})
    assert r.status_code == 200, r.content
    rebind_account_for_tests(c.world.account.id)
    try:
        assert Credential.objects.filter(kind="token", revoked_at__isnull=True).exists()
    finally:
        rebind_account_for_tests(None)


def _get_oracle(c: Corpus, client: APIClient, key: str, path: str, real: str,
                query: dict[str, str], field: str) -> Any:
    """no_oracle for a GET whose probed value travels in the query string."""
    rand = f"/zz-{random_id()[:8]}" if real.startswith("/") else f"ghost-{random_id()[:8]}"
    r_real = api(client, key, "GET", path, query={**query, field: real})
    r_rand = api(client, key, "GET", path, query={**query, field: rand})
    assert _normal(r_real, real) == _normal(r_rand, rand), (r_real.content, r_rand.content)
    _leak_free(c, r_real.content.decode(), (real,))
    return r_real


def case_knowledge_list(c: Corpus, client: APIClient) -> None:
    key = c.keys["mallory"]
    r = _get_oracle(c, client, key, "knowledge", "alice", {}, "peer_key")
    assert r.status_code == 403 and r.json()["error"]["code"] == "act_for_denied"
    r = _get_oracle(c, client, key, "knowledge", SOCIAL, {}, "scope")
    assert r.status_code == 404
    # A subject filter naming A's peer is just an empty filter, like any unknown key.
    r = _get_oracle(c, client, key, "knowledge", "alice", {}, "subject")
    assert r.status_code == 200 and r.json()["items"] == []
    for query in ({}, {"state": "active,superseded,expired,needs_revalidation"},
                  {"scope": "/marketing"}):
        own = api(client, key, "GET", "knowledge", query={**query, "limit": "200"})
        assert own.status_code == 200, own.content
        assert {i["id"] for i in own.json()["items"]} == set(c.b_knowledge)
        _leak_free(c, own.content.decode())
    tenancy_ignored(c, client, key, "GET", "knowledge")
    # Sanity: A's own agent does list A's rows, so the emptiness above is isolation.
    mine = api(client, c.keys["scribe"], "GET", "knowledge", query={"scope": SOCIAL})
    assert "acmeonly" in mine.content.decode().lower()


def case_knowledge_detail(c: Corpus, client: APIClient) -> None:
    public = c.cells[("about_scope", "public", "active")]
    for real in (public, c.cells[("about_scope", "public", "superseded")],
                 c.a_ids["k_provisional"], c.a_ids["k_held"]):
        r = no_oracle(c, client, c.keys["mallory"], "GET", "knowledge/{id}", real)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    owner_sees_it(client, c.keys["scribe"], "GET", "knowledge/{id}", public)
    tenancy_ignored(c, client, c.keys["mallory"], "GET", f"knowledge/{public}")


def case_people_get(c: Corpus, client: APIClient) -> None:
    r = api(client, c.keys["mel"], "GET", "people")
    assert r.status_code == 200
    assert {p["key"] for p in r.json()["people"]} == {"mallory", "mel"}
    tenancy_ignored(c, client, c.keys["mel"], "GET", "people")
    assert "alice" in {p["key"] for p in api(client, c.keys["dave"], "GET", "people")
                       .json()["people"]}


def case_people_post(c: Corpus, client: APIClient) -> None:
    from knowledge.models import Peer
    from memhouse.core.tenancy import rebind_account_for_tests

    # A's peer key is free in B (sign-in names are global, so each gets its own).
    r1 = api(client, c.keys["mel"], "POST", "people",
             {"key": "alice", "username": "alice-of-b", "scopes": ["/marketing"]})
    a = str(c.world.account.id)
    r2 = api(client, c.keys["mel"], "POST", "people",
             {"key": "zz-person", "scopes": ["/marketing"], "account_id": a, "account": a},
             query={"account_id": a}, headers={"X-Account": a})
    assert r1.status_code == r2.status_code == 201, (r1.content, r2.content)
    _leak_free(c, r1.content.decode() + r2.content.decode())
    # A scope that exists only in Account A is unknown in B.
    r = api(client, c.keys["mel"], "POST", "people", {"key": "zz-two", "scopes": [SOCIAL]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_scope"
    rebind_account_for_tests(c.world.other_account.id)
    assert set(Peer.objects.filter(key__in=["alice", "zz-person"])
               .values_list("key", flat=True)) == {"alice", "zz-person"}
    rebind_account_for_tests(c.world.account.id)
    assert not Peer.objects.filter(key__startswith="zz-").exists()
    rebind_account_for_tests(None)


def _person(method: str, suffix: str, body: dict[str, Any]) -> Callable[..., None]:
    def case(c: Corpus, client: APIClient) -> None:
        real = str(c.world.subject.id)
        path = f"people/{{id}}{suffix}"
        r = no_oracle(c, client, c.keys["mel"], method, path, real, body)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        owner_sees_it(client, c.keys["dave"], method, path, real, body)
    return case


def case_me_password(c: Corpus, client: APIClient) -> None:
    from django.contrib.auth import get_user_model

    a = str(c.world.account.id)
    r = api(client, c.keys["mel"], "POST", "me/password",
            {"current_password": "mel-pass-12345", "new_password": "mel-new-pass-678",
             "account_id": a}, headers={"X-Account": a})
    assert r.status_code == 200, r.content
    users = get_user_model().objects
    assert users.get(username="mel").check_password("mel-new-pass-678")
    assert users.get(username="dave").check_password("dave-pass-1234")


CASES: dict[tuple[str, str], Callable[[Corpus, APIClient], None]] = {
    ("auth-token", "POST"): case_auth_token,
    ("auth-token-revoke", "POST"): case_auth_token_revoke,
    ("me", "GET"): case_me,
    ("usage", "GET"): case_usage,
    ("scopes", "GET"): case_scopes_get,
    ("scopes", "POST"): case_scopes_post,
    ("scope-relations", "GET"): case_scope_relations_get,
    ("scope-relations", "POST"): case_scope_relations_post,
    ("scope-relation", "DELETE"): case_scope_relation_delete,
    ("peers", "GET"): case_peers_get,
    ("peers", "POST"): case_peers_post,
    ("messages", "POST"): case_messages,
    ("documents", "POST"): case_documents_post,
    ("documents", "GET"): case_documents_get,
    ("document", "GET"): case_document_get,
    ("message", "GET"): case_message_get,
    ("document", "DELETE"): case_document_delete,
    ("document-versions", "POST"): case_document_versions,
    ("search", "POST"): case_search,
    ("context", "POST"): case_context,
    ("ask", "POST"): case_ask,
    ("lineage", "POST"): case_lineage,
    ("stable-profile", "POST"): case_stable_profile,
    ("curator-queue", "GET"): case_curator_queue,
    ("curator-approve", "POST"): _curator("approve", "k_held", {"note": "ok"}),
    ("curator-reject", "POST"): _curator("reject", "k_held", {"note": "no"}),
    ("curator-resolve", "POST"): _curator("resolve", "alice_peer:internal:contested",
                                          {"outcome": "for"}),
    ("curator-promote", "POST"): _curator("promote", "alice_peer:internal:active",
                                          {"level": "scope"}),
    ("curator-edit", "POST"): _curator("edit", "alice_peer:internal:active",
                                       {"statement": "Alice corrected this statement."}),
    ("curator-merge", "POST"): case_curator_merge,
    ("curator-contradiction", "POST"): _curator("contradiction", "alice_peer:internal:active",
                                                {"outcome": "keep"}),
    ("curator-revalidation", "POST"): _curator("revalidation", "alice_peer:internal:active",
                                               {"outcome": "reconfirm"}),
    ("scope-belief-time", "GET"): case_scope_belief_time_get,
    ("scope-belief-time", "PUT"): case_scope_belief_time_put,
    ("me-knowledge", "GET"): case_me_knowledge,
    ("me-knowledge-correct", "POST"): _subject("correct", {"statement": "Alice says so now."}),
    ("me-knowledge-confirm", "POST"): _subject("confirm", {}),
    ("me-knowledge-contest", "POST"): _subject("contest", {"reason": "not true"}),
    ("me-knowledge-redact", "POST"): _subject("redact", {"reason": "private"}),
    ("me-questions", "GET"): case_me_questions,
    ("question-answer", "POST"): case_question_answer,
    ("erasure", "POST"): case_erasure,
    ("admin-dead-letters", "GET"): case_dead_letters,
    ("admin-dead-letter-retry", "POST"): case_dead_letter_retry,
    ("admin-dead-version-retry", "POST"): case_dead_version_retry,
    ("knowledge", "GET"): case_knowledge_list,
    ("knowledge-detail", "GET"): case_knowledge_detail,
    ("readiness", "GET"): case_readiness,
    ("people", "GET"): case_people_get,
    ("people", "POST"): case_people_post,
    ("person", "GET"): _person("GET", "", {}),
    ("person", "PATCH"): _person("PATCH", "", {"display_name": "Alice A."}),
    ("person-invitation", "POST"): _person("POST", "/invitation", {}),
    ("me-password", "POST"): case_me_password,
}


def test_the_case_table_covers_every_route(record_property):
    routes = api_routes()
    assert len(routes) >= 29
    missing = routes - set(CASES)
    stale = set(CASES) - routes
    assert not missing, f"routes without a cross-Account case: {sorted(missing)}"
    assert not stale, f"cases for routes that no longer exist: {sorted(stale)}"
    record_property("facts", f"cross-Account matrix: {len(routes)} route x method pairs "
                             f"under /api/v1/, each with a case")


@pytest.mark.parametrize("route", sorted(CASES), ids=lambda r: f"{r[1]} {r[0]}")
def test_cross_account_route(corpus, route):
    CASES[route](corpus, APIClient())


# --- selectors and retrieval read functions inside Account B's context ------------------

def _b_context(c: Corpus) -> tuple[Any, Any, Any]:
    from knowledge.models import Scope
    from memhouse.core.principal import Principal
    from memhouse.core.tenancy import rebind_account_for_tests

    rebind_account_for_tests(c.world.account.id)
    a_scope = Scope.objects.get(path=SOCIAL)
    rebind_account_for_tests(c.world.other_account.id)
    b_admin = Principal(account_id=c.world.other_account.id, peer=c.mel, via="api_key")
    return a_scope, b_admin, c.world.other_account.id


def _nothing_of_a(c: Corpus, value: Any) -> None:
    _leak_free(c, json.dumps(value, default=str))


def _selector_cases() -> dict[str, Callable[[Corpus], None]]:
    from governance import selectors as gs
    from knowledge import selectors as ksel
    from memhouse.core.errors import ApplicationError, NotFound
    from memhouse.core.principal import Principal, Reader, internal_reader
    from retrieval import ask as ask_mod
    from retrieval import context as ctx_mod
    from retrieval import engine, lineage, projections, stable_profile
    from retrieval.profiles import resolve_profile

    def forged(c: Corpus) -> Reader:
        # A Reader naming Account A while the transaction is bound to B: RLS still wins.
        return internal_reader(c.world.account.id)

    def raises(exc: type[Exception], fn: Callable[[], Any]) -> None:
        with pytest.raises(exc):
            fn()

    def reader_for(c: Corpus) -> None:
        _, b, _ = _b_context(c)
        raises(ApplicationError, lambda: ksel.reader_for(principal=b, peer_key="alice"))

    def peer_acted_for(c: Corpus) -> None:
        from dataclasses import replace

        _, b, _ = _b_context(c)
        # Even a B machine credential granted every peer does not reach A's peers.
        machine = replace(b, peer=None, act_for_all=True)
        with pytest.raises(ApplicationError) as err:
            ksel.peer_acted_for(principal=machine, peer_key="alice")
        assert err.value.code == "unknown_peer_key"

    def scope_for_read(c: Corpus) -> None:
        _, _b, acct = _b_context(c)
        raises(NotFound, lambda: ksel.scope_for_read(reader=internal_reader(acct), path=SOCIAL))

    def scope_ancestors(c: Corpus) -> None:
        a_scope, _, _ = _b_context(c)
        assert list(ksel.scope_ancestors(a_scope)) == []

    def scope_chain(c: Corpus) -> None:  # scope_chain, scope_setting, session_for_read
        a_scope, _, acct = _b_context(c)
        assert ksel.scope_chain(a_scope).ids == ()
        assert ksel.scope_setting(scope=a_scope, key="retrieval_profile", default="x") == "x"
        raises(NotFound, lambda: ksel.session_for_read(reader=internal_reader(acct),
                                                       scope=a_scope,
                                                       external_id=c.a_ids["session"]))

    def visible_knowledge(c: Corpus) -> None:
        a_scope, _, acct = _b_context(c)
        assert set(ksel.visible_knowledge(reader=internal_reader(acct)).values_list(
            "id", flat=True)) == {__import__("uuid").UUID(i) for i in c.b_knowledge}
        assert not ksel.visible_knowledge(reader=forged(c), scope_ids=[a_scope.id]).exists()

    def knowledge_for_read(c: Corpus) -> None:
        a_scope, _, acct = _b_context(c)
        assert not ksel.knowledge_for_read(reader=forged(c), scope=a_scope).exists()
        assert not ksel.knowledge_for_read(reader=internal_reader(acct), scope=a_scope).exists()

    def q_builders(c: Corpus) -> None:  # sensitivity_q / lifecycle_q build filters only
        from knowledge.models import Knowledge

        _b_context(c)
        r = Reader(account_id=c.world.account.id, posture="peer", peer_id=c.world.subject.id)
        assert not Knowledge.objects.filter(ksel.sensitivity_q(r) & ksel.lifecycle_q(r)).filter(
            account_id=c.world.account.id).exists()

    def listing(c: Corpus) -> None:  # listing_states / listing_q / readable_scopes_q too
        from knowledge.models import Knowledge

        a_scope, _b, acct = _b_context(c)
        every = tuple(ksel.LISTING_STATES)
        assert ksel.listing_states(states=every, as_subject=False) == every
        for reader in (internal_reader(acct), forged(c)):
            page = ksel.knowledge_listing(reader=reader, states=every, limit=200)
            assert {str(k.id) for k in page.items} <= set(c.b_knowledge)
            assert not ksel.knowledge_listing(reader=reader, scope=a_scope, limit=200).items
            assert not Knowledge.objects.filter(ksel.listing_q(reader, states=every))\
                .filter(ksel.readable_scopes_q(reader), account_id=c.world.account.id).exists()
            for kid in (c.cells[("about_scope", "public", "active")], c.a_ids["k_held"]):
                raises(NotFound, lambda kid=kid, reader=reader: ksel.knowledge_listed(
                    reader=reader, knowledge_id=kid, as_subject=True))
        assert {str(k.id) for k in ksel.knowledge_listing(
            reader=internal_reader(acct), limit=200).items} == set(c.b_knowledge)

    def documents(c: Corpus) -> None:
        _, _b, acct = _b_context(c)
        for reader in (internal_reader(acct), forged(c)):
            page = ksel.documents_listing(reader=reader, with_text=True, limit=100)
            assert page.items == [] and page.next_cursor is None
            raises(NotFound, lambda reader=reader: ksel.documents_listing(
                reader=reader, scope_path=SOCIAL))

    def curator_queue(c: Corpus) -> None:
        _, b, _ = _b_context(c)
        assert gs.curator_queue(principal=b, limit=200).items == []
        forged_p = Principal(account_id=c.world.account.id, peer=c.world.curator, via="api_key")
        assert gs.curator_queue(principal=forged_p, limit=200).items == []

    def knowledge_for_curator(c: Corpus) -> None:
        _, b, _ = _b_context(c)
        raises(NotFound, lambda: gs.knowledge_for_curator(principal=b,
                                                          knowledge_id=c.a_ids["k_held"]))

    def scope_for_curator(c: Corpus) -> None:
        _, b, _ = _b_context(c)
        raises(NotFound, lambda: gs.scope_for_curator(principal=b, path=SOCIAL))

    def knowledge_about_me(c: Corpus) -> None:
        _b_context(c)
        forged_p = Principal(account_id=c.world.account.id, peer=c.world.subject, via="token")
        assert gs.knowledge_about_me(principal=forged_p, limit=200).items == []

    def knowledge_for_subject(c: Corpus) -> None:
        _b_context(c)
        forged_p = Principal(account_id=c.world.account.id, peer=c.world.subject, via="token")
        raises(NotFound, lambda: gs.knowledge_for_subject(
            principal=forged_p, knowledge_id=c.cells[("alice_peer", "internal", "active")]))

    def questions_for_me(c: Corpus) -> None:
        _b_context(c)
        forged_p = Principal(account_id=c.world.account.id, peer=c.world.subject, via="token")
        assert gs.questions_for_me(principal=forged_p).items == []

    def question_for_me(c: Corpus) -> None:
        _b_context(c)
        forged_p = Principal(account_id=c.world.account.id, peer=c.world.subject, via="token")
        raises(NotFound, lambda: gs.question_for_me(principal=forged_p,
                                                    question_id=c.a_ids["question"]))

    def dead_letters(c: Corpus) -> None:
        _dead_letter_a_message(c)
        _dead_letter_a_version(c)
        _, b, _ = _b_context(c)
        for kind in (None, "message", "document_version"):
            assert gs.dead_letters(principal=b, kind=kind, limit=200).items == []
        # A Principal naming Account A while the transaction is bound to B: RLS wins.
        forged_p = Principal(account_id=c.world.account.id, peer=c.mel, via="api_key")
        assert gs.dead_letters(principal=forged_p, limit=200).items == []
        # The reason parser reads the stored text it is given, nothing else.
        assert ksel.failure_reason("crashed_repeatedly: x", default="y") == (
            "crashed_repeatedly", "x")

    def paging_helpers(c: Corpus) -> None:  # parse_limit / paginate read nothing themselves
        from knowledge.models import Knowledge

        _b_context(c)
        page = gs.paginate(Knowledge.objects.filter(account_id=c.world.account.id),
                           time_field="inserted_at", cursor=None, limit=gs.parse_limit("200"))
        assert page.items == []

    def search(c: Corpus) -> None:
        a_scope, _, acct = _b_context(c)
        prof = resolve_profile(requested="balanced", scope=a_scope, default="balanced")
        from dataclasses import replace

        prof = replace(prof, deadline_ms=5000)
        for reader in (internal_reader(acct), forged(c)):
            res = engine.search(reader=reader, scope=a_scope, query="zephyr acmeonly note",
                                profile=prof, limit=100)
            assert res.candidates == [] and not any(res.lists.values())
            _nothing_of_a(c, res.as_dict())

    def get_context(c: Corpus) -> None:
        a_scope, _, acct = _b_context(c)
        body = ctx_mod.get_context(reader=internal_reader(acct), scope=a_scope,
                                   query="zephyr acmeonly")
        assert body["knowledge"] == [] and body["scope_cards"] == []
        _nothing_of_a(c, body)

    def ask(c: Corpus) -> None:
        a_scope, _, acct = _b_context(c)
        prof = resolve_profile(requested=None, scope=a_scope, default="thorough")
        body = ask_mod.ask(reader=internal_reader(acct), scope=a_scope, query="zephyr acmeonly",
                           profile=prof, effort="medium", include_source_recall=True)
        assert body["candidates"] == [] and body["recall_evidence"] == []
        _nothing_of_a(c, body)

    def lineage_fn(c: Corpus) -> None:
        _, _, acct = _b_context(c)
        kid = c.cells[("about_scope", "public", "active")]
        raises(NotFound, lambda: lineage.lineage(reader=internal_reader(acct), knowledge_id=kid))
        raises(NotFound, lambda: lineage.lineage(reader=forged(c), knowledge_id=kid))

    def visible_messages(c: Corpus) -> None:
        a_scope, _, _ = _b_context(c)
        assert not lineage.visible_messages(forged(c), [a_scope.id]).exists()

    def source_outcomes(c: Corpus) -> None:
        from knowledge.models import DocumentVersion, Message
        from memhouse.core.tenancy import rebind_account_for_tests

        # A's message and version loaded while bound to A, then read for from B.
        rebind_account_for_tests(c.world.account.id)
        msg = Message.objects.get(pk=c.a_ids["message"])
        version = DocumentVersion.objects.get(pk=c.a_ids["version"])
        a_scope, _, _ = _b_context(c)
        raises(NotFound, lambda: ksel.message_for_read(reader=forged(c), message_id=msg.pk))
        assert not ksel.visible_messages(reader=forged(c), scope_ids=[a_scope.id]).exists()
        assert not ksel.visible_messages(reader=forged(c)).exists()
        assert ksel.messages_pending(account_id=c.world.account.id,
                                     message_ids=[msg.pk]) == 0
        assert ksel.versions_pending(account_id=c.world.account.id,
                                     version_ids=[version.pk]) == 0
        # The processing state is read off the row the caller already holds; what the
        # pipeline made of it is read under RLS, so B learns nothing of A's statements.
        assert isinstance(ksel.message_processing(msg), str)
        assert isinstance(ksel.version_processing(version), str)
        assert ksel.version_error(version) in (None, ksel.TOO_MANY_STATEMENTS,
                                               ksel.PROCESSING_FAILED,
                                               ksel.CRASHED_REPEATEDLY)
        for out in (ksel.message_outcomes(messages=[(msg, forged(c), True)])[msg.pk],
                    ksel.version_outcomes(versions=[(version, forged(c), True)])[version.pk]):
            assert out.statements == [] and out.refused == {} and out.hidden == {}

    def related_ids(c: Corpus) -> None:
        a_scope, _, _ = _b_context(c)
        assert lineage.related_ids(reader=forged(c), scope_ids=[a_scope.id],
                                   seeds=list(c.cells.values())[:20], fan_out=8) == []

    def stable(c: Corpus) -> None:
        _b_context(c)
        r = Reader(account_id=c.world.account.id, posture="peer", peer_id=c.world.subject.id,
                   scope_roots=None)
        assert stable_profile.readable_scope_ids(r) == []
        assert not stable_profile.stable_statements(reader=r).exists()
        assert stable_profile.stable_profile(reader=r)["entries"] == []

    def projection_reads(c: Corpus) -> None:
        from retrieval.models import Projection

        a_scope, _, _ = _b_context(c)
        p = Projection(account_id=c.world.account.id, kind="scope_card", audience="shared",
                       scope_id=a_scope.id)
        assert not projections.statements_for(p).exists()
        assert not Projection.objects.filter(account_id=c.world.account.id).exists()

    def source_lane(c: Corpus) -> None:
        from retrieval import source_recall

        a_scope, _, _ = _b_context(c)
        for q in ("Alice", "What did Alice say about the project?"):
            assert source_recall.exact(forged(c), [a_scope.id], q, 50) == []
            assert source_recall.semantic(forged(c), [a_scope.id], q, 50) == []

    def scope_links(c: Corpus) -> None:
        from knowledge import scope_relations

        _a_scope_link(c)
        a_scope, b, _ = _b_context(c)
        assert scope_relations.linked_scopes(reader=forged(c), scope_ids=[a_scope.id]) == []
        assert scope_relations.relations_list(principal=b) == []

    return {
        "retrieval.source_recall.exact": source_lane,
        "retrieval.source_recall.semantic": source_lane,
        "knowledge.scope_relations.linked_scopes": scope_links,
        "knowledge.scope_relations.relations_list": scope_links,
        "knowledge.selectors.reader_for": reader_for,
        "knowledge.selectors.peer_acted_for": peer_acted_for,
        "knowledge.selectors.scope_for_read": scope_for_read,
        "knowledge.selectors.scope_ancestors": scope_ancestors,
        "knowledge.selectors.scope_chain": scope_chain,
        "knowledge.selectors.scope_setting": scope_chain,
        "knowledge.selectors.session_for_read": scope_chain,
        "knowledge.selectors.sensitivity_q": q_builders,
        "knowledge.selectors.lifecycle_q": q_builders,
        "knowledge.selectors.visible_knowledge": visible_knowledge,
        "knowledge.selectors.knowledge_for_read": knowledge_for_read,
        "knowledge.selectors.listing_states": listing,
        "knowledge.selectors.listing_q": listing,
        "knowledge.selectors.readable_scopes_q": listing,
        "knowledge.selectors.knowledge_listing": listing,
        "knowledge.selectors.knowledge_listed": listing,
        "knowledge.selectors.documents_listing": documents,
        "knowledge.selectors.message_for_read": source_outcomes,
        "knowledge.selectors.message_outcomes": source_outcomes,
        "knowledge.selectors.message_processing": source_outcomes,
        "knowledge.selectors.messages_pending": source_outcomes,
        "knowledge.selectors.version_outcomes": source_outcomes,
        "knowledge.selectors.version_processing": source_outcomes,
        "knowledge.selectors.version_error": source_outcomes,
        "knowledge.selectors.versions_pending": source_outcomes,
        "knowledge.selectors.visible_messages": source_outcomes,
        "governance.selectors.parse_limit": paging_helpers,
        "governance.selectors.paginate": paging_helpers,
        "governance.selectors.curator_queue": curator_queue,
        "governance.selectors.dead_letters": dead_letters,
        "knowledge.selectors.failure_reason": dead_letters,
        "governance.selectors.knowledge_for_curator": knowledge_for_curator,
        "governance.selectors.scope_for_curator": scope_for_curator,
        "governance.selectors.knowledge_about_me": knowledge_about_me,
        "governance.selectors.knowledge_for_subject": knowledge_for_subject,
        "governance.selectors.questions_for_me": questions_for_me,
        "governance.selectors.question_for_me": question_for_me,
        "retrieval.engine.search": search,
        "retrieval.context.get_context": get_context,
        "retrieval.ask.ask": ask,
        "retrieval.lineage.lineage": lineage_fn,
        "retrieval.lineage.visible_messages": visible_messages,
        "retrieval.lineage.related_ids": related_ids,
        "retrieval.stable_profile.stable_profile": stable,
        "retrieval.stable_profile.stable_statements": stable,
        "retrieval.stable_profile.readable_scope_ids": stable,
        "retrieval.projections.statements_for": projection_reads,
    }


SELECTOR_CASES = _selector_cases()


def test_every_public_selector_has_a_case():
    import governance.selectors
    import knowledge.selectors

    public = {f"{mod.__name__}.{name}" for mod in (knowledge.selectors, governance.selectors)
              for name, fn in inspect.getmembers(mod, inspect.isfunction)
              if fn.__module__ == mod.__name__ and not name.startswith("_")}
    assert public and public <= set(SELECTOR_CASES), sorted(public - set(SELECTOR_CASES))


@pytest.mark.parametrize("name", sorted(SELECTOR_CASES))
def test_selector_in_account_b_returns_nothing_of_a(corpus, name):
    SELECTOR_CASES[name](corpus)
