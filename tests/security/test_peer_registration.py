"""Issue #34 (low): a member or a narrowly granted agent cannot register a human peer
through POST /api/v1/peers and so squat a person's key before an administrator creates
that person; administrators (and the people API) can, and so can a key that may already
act for every peer (real HTTP, two Accounts)."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge import services
from knowledge.models import Peer
from memhouse.core.tenancy import account_context
from tests.reliability.helpers import api, assert_error

pytestmark = pytest.mark.django_db(transaction=True)


def test_only_administrators_register_people(live_server: Any, committed_world: Any) -> None:
    w = committed_world
    with account_context(w.account.id):
        dave = services.peer_create(account_id=w.account.id, key="dave", kind="human",
                                    is_admin=True)
        _, admin = services.token_issue(peer=dave)
        _, member = services.token_issue(peer=w.member)
        _, curator = services.token_issue(peer=w.curator)
        narrow_bot = services.peer_create(account_id=w.account.id, key="narrow", kind="agent")
        _, narrow = services.credential_create(account_id=w.account.id, peer=narrow_bot,
                                               act_for=["alice"])
        _, peerless = services.credential_create(account_id=w.account.id, peer=None)
    for name, key in (("member", member), ("curator", curator), ("narrow agent", narrow),
                      ("peerless key", peerless)):
        r = api(live_server, key, "POST", "peers", json={"key": "erin", "kind": "human"})
        error = assert_error(r, 403, "people_admin_only")
        assert "administrator" in error["message"], (name, error)
        # An agent peer is still anyone's to register.
        r = api(live_server, key, "POST", "peers",
                json={"key": f"bot-{name.replace(' ', '-')}", "kind": "agent"})
        assert r.status_code == 201, (name, r.text)
    with account_context(w.account.id):
        assert not Peer.objects.filter(key="erin").exists()
    # An administrator registers a person; so does an all-peers relay (it may already
    # speak as anyone); the people API creates one too.
    assert api(live_server, admin, "POST", "peers",
               json={"key": "erin", "kind": "human"}).status_code == 201
    assert api(live_server, w.agent_key, "POST", "peers",
               json={"key": "caroline", "kind": "human"}).status_code == 201
    r = api(live_server, admin, "POST", "people",
            json={"key": "frank", "role": "member", "scopes": ["/"]})
    assert r.status_code == 201, r.text
    # Another Account's member is refused in their own Account too; A is untouched.
    r = api(live_server, w.outsider_key, "POST", "peers", json={"key": "gus", "kind": "human"})
    assert_error(r, 403, "people_admin_only")
    with account_context(w.account.id):
        assert set(Peer.objects.filter(kind="human").values_list("key", flat=True)) == {
            "alice", "bob", "carol", "dave", "erin", "caroline", "frank"}
