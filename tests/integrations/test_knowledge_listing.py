"""GET /api/v1/knowledge and /api/v1/knowledge/<id>: filters, keyset pages, state
visibility and the error shape, through DRF's APIClient on real PostgreSQL. (The full
reader matrix and the cross-Account table are in tests/security.)"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Peer, Scope
from tests.security.corpus import api

pytestmark = pytest.mark.django_db


def _add(w: Any, statement: str, *, subject: str | None = "alice", scope: Any = None,
         sensitivity: str = "internal", state: str = "active", kind: str = "fact",
         **kw: Any) -> str:
    item = services.knowledge_propose(
        account_id=w.account.id, statement=statement, scope=scope or w.scope,
        subject_peer=Peer.objects.get(key=subject) if subject else None, actor="system:test",
        sensitivity=sensitivity, level="peer" if subject else "scope", kind=kind, **kw)
    if state != "proposed":
        reason = {"active": "f4_gate_a_b_accepted", "provisional": "f4_gate_a_b_deferred",
                  "held": "f4_scope_hold", "rejected": "f4_gate_a_noise"}[state]
        transition(item, state, actor="system:test", reason=reason)
    return str(item.id)


@pytest.fixture
def rows(world: Any) -> dict[str, str]:
    w = world
    paid = services.scope_ensure(account_id=w.account.id, path="/marketing/paid")
    marketing = Scope.objects.get(account=w.account, path="/marketing")
    ids = {
        "hiking": _add(w, "Alice loves hiking.", kind="preference"),
        "asthma": _add(w, "Alice has asthma.", sensitivity="personal"),
        "team": _add(w, "The team ships on Fridays.", subject=None, scope=marketing),
        "paid": _add(w, "The paid budget is ten thousand.", subject=None, scope=paid),
        "bob_prov": _add(w, "Bob might move to Oslo.", subject="bob", state="provisional"),
        "alice_held": _add(w, "Alice will lead the offsite.", state="held"),
        "alice_rejected": _add(w, "Alice is a robot.", state="rejected"),
        "old": _add(w, "Alice lives in Lisbon.", kind="fact"),
    }
    old = Knowledge.objects.get(pk=ids["old"])
    transition(old, "superseded", actor="system:test", reason="f4_updated_by_source")
    return ids


def _get(key: str, path: str = "knowledge", **query: Any) -> Any:
    return api(APIClient(), key, "GET", path, query=query or None)


def _ids(r: Any) -> list[str]:
    assert r.status_code == 200, r.content
    return [i["id"] for i in r.json()["items"]]


def test_default_lists_usable_statements_in_stable_order(world, rows):
    w = world
    r = _get(w.agent_key, peer_key="alice")
    got = _ids(r)
    assert set(got) == {rows["hiking"], rows["asthma"], rows["team"], rows["paid"]}
    items = r.json()["items"]
    assert [(i["updated_at"], i["id"]) for i in items] == sorted(
        (i["updated_at"], i["id"]) for i in items)
    assert r.json()["reader_posture"] == "peer" and r.json()["next_cursor"] is None
    hiking = next(i for i in items if i["id"] == rows["hiking"])
    assert {"statement", "subject", "scope", "kind", "level", "confidence", "sensitivity",
            "state", "state_reason", "verification", "source_count", "inserted_at",
            "updated_at", "revalidate_after", "expires_at", "relevant_from",
            "relevant_until", "supersedes"} <= set(hiking)
    assert (hiking["subject"], hiking["scope"], hiking["state"], hiking["kind"]) == (
        "alice", "/marketing/social", "active", "preference")
    # Bob reads his own provisional row, and not Alice's personal one.
    assert set(_ids(_get(w.agent_key, peer_key="bob"))) == {
        rows["hiking"], rows["team"], rows["paid"], rows["bob_prov"]}


def test_filters_scope_kind_subject_and_updated_since(world, rows):
    w = world
    k = w.agent_key
    # A scope reads it and its ancestors, never a sibling.
    assert set(_ids(_get(k, peer_key="alice", scope="/marketing/social"))) == {
        rows["hiking"], rows["asthma"], rows["team"]}
    assert _ids(_get(k, peer_key="alice", kind="preference")) == [rows["hiking"]]
    assert set(_ids(_get(k, peer_key="alice", subject="alice"))) == {
        rows["hiking"], rows["asthma"]}
    assert _ids(_get(k, peer_key="alice", subject="nobody")) == []
    w.enter(w.account)  # each request above cleared the Account binding
    hiking = Knowledge.objects.get(pk=rows["hiking"])
    later = timezone.now() + timedelta(seconds=1)
    Knowledge.objects.filter(pk=rows["team"]).update(updated_at=later)
    since = (hiking.updated_at + timedelta(microseconds=1)).isoformat()
    got = _ids(_get(k, peer_key="alice", updated_since=since))
    assert rows["team"] in got and rows["hiking"] not in got


def test_keyset_pages_cover_everything_once(world, rows):
    seen: list[str] = []
    cursor = None
    while True:
        query = {"peer_key": "alice", "limit": "1", **({"cursor": cursor} if cursor else {})}
        r = _get(world.agent_key, **query)
        page = _ids(r)
        assert len(page) <= 1
        seen += page
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 4
    assert set(seen) == set(_ids(_get(world.agent_key, peer_key="alice")))


def test_state_filters_stay_within_what_the_reader_may_see(world, rows):
    w = world
    # History a member may inspect: superseded, under the same sensitivity rule.
    assert _ids(_get(w.agent_key, peer_key="bob", state="superseded")) == [rows["old"]]
    both = _ids(_get(w.agent_key, peer_key="alice", state="active,superseded"))
    assert rows["old"] in both and rows["hiking"] in both
    # Subject-only states: refused for an agent, even acting for the subject ...
    r = _get(w.agent_key, peer_key="alice", state="held")
    assert r.status_code == 400 and r.json()["error"]["code"] == "state_not_visible"
    # ... listed for the subject's own credential, only their own rows.
    w.enter(w.account)
    _, alice_key = services.credential_create(account_id=w.account.id, peer=w.subject)
    _, bob_key = services.credential_create(account_id=w.account.id, peer=w.member)
    assert set(_ids(_get(alice_key, state="held,rejected"))) == {
        rows["alice_held"], rows["alice_rejected"]}
    assert _ids(_get(bob_key, state="held,rejected")) == []
    # Detail follows the same rule: the subject sees her held row, an agent gets 404.
    assert _get(alice_key, f"knowledge/{rows['alice_held']}").status_code == 200
    r = _get(w.agent_key, f"knowledge/{rows['alice_held']}", peer_key="alice")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    r = _get(w.agent_key, f"knowledge/{rows['bob_prov']}", peer_key="alice")
    assert r.status_code == 404
    r = _get(w.agent_key, f"knowledge/{rows['bob_prov']}", peer_key="bob")
    assert r.status_code == 200 and r.json()["knowledge"]["state"] == "provisional"


def test_a_curator_lists_the_held_statements_of_their_scopes(world, rows):
    """One rule, the lifecycle contract's visibility columns (issue 35): a curator's own
    credential lists every held row in their scopes, not only their own (they were 200
    with an empty list); an agent is refused, and the refusal says who may list it."""
    from pathlib import Path

    from knowledge import lifecycle

    w = world
    w.enter(w.account)
    _, carol_key = services.credential_create(account_id=w.account.id, peer=w.curator)
    _, bob_key = services.credential_create(account_id=w.account.id, peer=w.member)
    assert lifecycle.STATES["held"].visibility.curator
    assert _ids(_get(carol_key, state="held")) == [rows["alice_held"]]
    assert set(_ids(_get(carol_key, state="held,rejected"))) == {
        rows["alice_held"], rows["alice_rejected"]}
    assert _get(carol_key, f"knowledge/{rows['alice_held']}").status_code == 200
    # Never someone else's provisional row: the contract's curator column does not show it.
    assert _ids(_get(carol_key, state="provisional")) == []
    # A member lists only their own rows in these states.
    assert _ids(_get(bob_key, state="held")) == []
    r = _get(w.agent_key, peer_key="alice", state="held")
    message = r.json()["error"]["message"]
    assert r.status_code == 400 and r.json()["error"]["code"] == "state_not_visible"
    assert "its subject, curators and administrators" in message
    guide = " ".join(Path("docs/api-guide.md").read_text().split())
    assert "a curator or administrator also lists every row in the states their" in guide


@pytest.mark.parametrize(("query", "code"), [
    ({"state": "bogus"}, "invalid_state"),
    ({"kind": "gossip"}, "invalid_input"),
    ({"updated_since": "yesterday"}, "invalid_input"),
    ({"limit": "0"}, "invalid_input"),
    ({"limit": "201"}, "invalid_input"),
    ({"limit": "ten"}, "invalid_input"),
    ({"cursor": "not-a-cursor"}, "invalid_cursor"),
    ({"peer_key": "ghost"}, "unknown_peer_key"),
])
def test_bad_filters_are_400_with_a_code(world, query, code):
    r = _get(world.agent_key, **query)
    assert r.status_code == 400, r.content
    assert r.json()["error"]["code"] == code and r.json()["error"]["message"]


def test_act_for_scope_and_authentication_errors(world, rows):
    w = world
    _, bob_key = services.credential_create(account_id=w.account.id, peer=w.member)
    r = _get(bob_key, peer_key="alice")
    assert (r.status_code, r.json()["error"]["code"]) == (403, "act_for_denied")
    r = _get(bob_key, f"knowledge/{rows['hiking']}", peer_key="alice")
    assert (r.status_code, r.json()["error"]["code"]) == (403, "act_for_denied")
    assert _get(w.agent_key, scope="/nowhere").status_code == 404
    r = _get("")
    assert (r.status_code, r.json()["error"]["code"]) == (401, "not_authenticated")
    assert _get(w.agent_key, "knowledge/not-a-uuid").status_code == 404


def test_a_scoped_credential_lists_its_grant_and_the_ancestors_only(world, rows):
    w = world
    _, key = services.credential_create(account_id=w.account.id, peer=w.agent,
                                        scope_paths=["/marketing/paid"], act_for_all=True)
    assert set(_ids(_get(key, peer_key="alice"))) == {rows["team"], rows["paid"]}
    assert _get(key, f"knowledge/{rows['hiking']}", peer_key="alice").status_code == 404
    assert _get(key, peer_key="alice", scope="/marketing/social").status_code == 404
