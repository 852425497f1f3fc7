"""Who may read for and speak as whom, over real HTTP: every credential kind x named peer.

A human credential (API token, a human's API key, a console session) acts only as itself;
a machine credential (an agent's key, a peerless key) for itself and the peers of the
act-for grant recorded when it was minted (all peers, a list, or none), shown in /me.
Naming anyone else is 403 `act_for_denied` on search, ask, context, lineage,
stable-profile, the knowledge listing and ingest alike, and the refused ingest stores nothing.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from knowledge import services
from knowledge.models import Message
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "/marketing/social"
READS = {
    "search": {"query": "anything", "scope": SCOPE},
    "ask": {"query": "anything", "scope": SCOPE},
    "context": {"scope": SCOPE},
    "stable-profile": {},
}


class Caller:
    def __init__(self, base: str, *, key: str | None = None,
                 session: httpx.Client | None = None) -> None:
        self.base, self.key, self.session = base, key, session

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        if self.session is not None:
            token = self.session.cookies.get("csrftoken") or ""
            return self.session.post(f"{self.base}/api/v1/{path}", json=body, timeout=60,
                                     headers={"X-CSRFToken": token,
                                              "Referer": f"{self.base}/console/"})
        return httpx.post(f"{self.base}/api/v1/{path}", json=body, timeout=60,
                          headers={"Authorization": f"Bearer {self.key}"})

    def get(self, path: str) -> httpx.Response:
        if self.session is not None:
            return self.session.get(f"{self.base}/api/v1/{path}", timeout=60)
        return httpx.get(f"{self.base}/api/v1/{path}", timeout=60,
                         headers={"Authorization": f"Bearer {self.key}"})


def console_session(base: str, username: str, password: str) -> httpx.Client:
    client = httpx.Client(follow_redirects=False)
    page = client.get(f"{base}/console/login/", timeout=60)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert csrf is not None
    r = client.post(f"{base}/console/login/", timeout=60,
                    data={"username": username, "password": password,
                          "csrfmiddlewaretoken": csrf.group(1)},
                    headers={"Referer": f"{base}/console/login/"})
    assert r.status_code in (302, 303), r.text[:300]
    return client


@pytest.fixture
def callers(live_server: Any, committed_world: Any) -> dict[str, Caller]:
    w = committed_world
    base = live_server.url
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="dave", kind="human",
                             display_name="Dave", is_admin=True)
        _, token = services.token_issue(peer=w.subject)
        _, alice_key = services.credential_create(account_id=w.account.id, peer=w.subject)
        _, listed = services.credential_create(account_id=w.account.id, peer=w.agent,
                                               act_for=["alice"])
        _, nobody = services.credential_create(account_id=w.account.id, peer=w.agent)
        _, peerless_all = services.credential_create(account_id=w.account.id, peer=None,
                                                     act_for_all=True)
        _, peerless_none = services.credential_create(account_id=w.account.id, peer=None)
    return {
        "human_token": Caller(base, key=token),
        "human_key": Caller(base, key=alice_key),
        "console_session": Caller(base, session=console_session(base, "alice",
                                                                 "alice-pass-123")),
        "agent_all": Caller(base, key=w.agent_key),
        "agent_list": Caller(base, key=listed),
        "agent_none": Caller(base, key=nobody),
        "peerless_all": Caller(base, key=peerless_all),
        "peerless_none": Caller(base, key=peerless_none),
    }


# credential kind -> {named peer: allowed?}; "alice" is the humans' own peer, "bob" another
# human, "scribe" the agents' own peer.
MATRIX = {
    "human_token": {"alice": True, "bob": False, "scribe": False},
    "human_key": {"alice": True, "bob": False, "scribe": False},
    "console_session": {"alice": True, "bob": False, "scribe": False},
    "agent_all": {"alice": True, "bob": True, "scribe": True},
    "agent_list": {"alice": True, "bob": False, "scribe": True},
    "agent_none": {"alice": False, "bob": False, "scribe": True},
    "peerless_all": {"alice": True, "bob": True, "scribe": True},
    "peerless_none": {"alice": False, "bob": False, "scribe": False},
}


def _refused(r: httpx.Response) -> bool:
    return r.status_code == 403 and r.json()["error"]["code"] == "act_for_denied"


@pytest.mark.parametrize("kind", sorted(MATRIX))
def test_reads_name_only_the_peers_a_credential_may_act_for(callers: dict[str, Caller],
                                                           kind: str) -> None:
    caller = callers[kind]
    for peer_key, allowed in MATRIX[kind].items():
        for path, body in READS.items():
            r = caller.post(path, {**body, "peer_key": peer_key})
            if allowed:
                assert r.status_code == 200, (kind, peer_key, path, r.text)
            else:
                assert _refused(r), (kind, peer_key, path, r.status_code, r.text)
        r = caller.post("lineage", {"knowledge_id": "00000000-0000-4000-8000-000000000000",
                                    "peer_key": peer_key})
        assert _refused(r) if not allowed else r.status_code != 403, (kind, peer_key, r.text)
        # The knowledge listing and detail (GET, peer_key in the query) follow the same rule.
        r = caller.get(f"knowledge?peer_key={peer_key}&scope={SCOPE}")
        assert _refused(r) if not allowed else r.status_code == 200, (kind, peer_key, r.text)
        r = caller.get(f"knowledge/00000000-0000-4000-8000-000000000000?peer_key={peer_key}")
        assert _refused(r) if not allowed else r.status_code == 404, (kind, peer_key, r.text)
    # An unknown key is refused the same way (no oracle), unless the grant is "all".
    r = caller.post("search", {**READS["search"], "peer_key": "ghost"})
    if kind.endswith("_all"):
        assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_peer_key"
    else:
        assert _refused(r)


@pytest.mark.parametrize("kind", sorted(MATRIX))
def test_ingest_speaks_only_for_the_peers_a_credential_may_act_for(
        callers: dict[str, Caller], committed_world: Any, kind: str) -> None:
    caller = callers[kind]
    for peer_key, allowed in MATRIX[kind].items():
        text = f"{kind} relays: I stole money ({peer_key})."
        r = caller.post("messages", {"scope": SCOPE, "messages": [
            {"peer_key": peer_key, "text": text}]})
        if allowed:
            assert r.status_code == 202, (kind, peer_key, r.text)
        else:
            assert _refused(r), (kind, peer_key, r.status_code, r.text)
        with account_context(committed_world.account.id):
            stored = Message.objects.filter(text=text).exists()
        assert stored is allowed


def test_me_shows_the_grant(callers: dict[str, Caller]) -> None:
    assert callers["agent_all"].get("me").json()["act_for"] == "all"
    assert callers["agent_list"].get("me").json()["act_for"] == ["alice"]
    assert callers["agent_none"].get("me").json()["act_for"] == []
    assert callers["human_token"].get("me").json()["act_for"] == []


def test_a_humans_credential_cannot_be_given_a_grant(committed_world: Any) -> None:
    from memhouse.core.errors import ApplicationError

    w = committed_world
    with account_context(w.account.id), pytest.raises(ApplicationError) as err:
        services.credential_create(account_id=w.account.id, peer=w.subject, act_for_all=True)
    assert err.value.code == "act_for_human"


def test_operators_mint_keys_with_a_grant(committed_world: Any) -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("create_api_key", "acme", "--peer", "scribe", "--act-for", "peers",
                 "--act-for-peer", "alice", stdout=out)
    assert "act for: alice" in out.getvalue()
    out = StringIO()
    call_command("create_api_key", "acme", "--peerless", stdout=out)
    assert "act for: none" in out.getvalue()
