"""One poison message never stalls its batch (issue #16, item 5).

A message the extractor cannot handle is set aside (dead-lettered) and the rest of its
batch is extracted; the sweeper does not pick it again; operators see it on /metrics and
in the admin listing, and may retry it. Observation times outside a sane range are
refused at the API, and the extractor's date arithmetic never raises on the ones that
were stored before that check existed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from governance.tasks import process_messages, sweep_unprocessed
from knowledge import services
from knowledge.models import AuditEntry, Message
from memhouse.core.tenancy import account_context
from tests.reliability.helpers import api, assert_error, poisoned_messages

pytestmark = pytest.mark.django_db(transaction=True)

@pytest.fixture
def poison() -> Any:
    with poisoned_messages() as remove:
        yield remove


@pytest.fixture
def people(committed_world: Any) -> dict[str, Any]:
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
        admin = services.peer_create(account_id=w.account.id, key="dana", kind="human",
                                     display_name="Dana", password="dana-pass-1234",
                                     is_admin=True)
        _, admin_key = services.credential_create(account_id=w.account.id, peer=admin)
    return {"world": w, "admin_key": admin_key}


def _states(account_id: Any) -> dict[str, tuple[bool, bool, int]]:
    with account_context(account_id):
        return {m.text: (m.extracted_at is not None, m.extraction_failed_at is not None,
                         m.extraction_attempts) for m in Message.objects.all()}


def test_an_out_of_range_occurred_at_is_refused_at_the_api(live_server, people,
                                                           no_rate_limit):
    w = people["world"]
    for when in ("0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "2999-01-01T00:00:00Z"):
        r = api(live_server, w.agent_key, "POST", "messages", json={
            "scope": "/", "messages": [
                {"peer_key": "caroline", "text": "I went to Paris last week."},
                {"peer_key": "caroline", "text": "Yesterday I adopted a cat.",
                 "occurred_at": when}]})
        error = assert_error(r, 400, "occurred_at_out_of_range")
        assert "message 1" in error["message"], error
    with account_context(w.account.id):
        assert not Message.objects.exists()  # the batch was refused whole
    ok = api(live_server, w.agent_key, "POST", "messages", json={
        "scope": "/", "messages": [{"peer_key": "caroline", "text": "I like jazz.",
                                    "occurred_at": "1999-05-01T10:00:00Z"}]})
    assert ok.status_code == 202, ok.text


def test_a_year_one_message_stored_earlier_does_not_break_its_batch(people):
    """Rows accepted before the API check: the extractor's date arithmetic on year 1
    used to raise OverflowError and take the rest of the batch with it."""
    w = people["world"]
    with account_context(w.account.id):
        caroline = services.Peer.objects.get(key="caroline")
        ids = []
        for text, at in (("I adopted a rescue greyhound named Pixel.", datetime.now(UTC)),
                         ("I went to Paris last week and yesterday I moved house.",
                          datetime(1, 1, 1, tzinfo=UTC)),
                         ("I started learning the cello.", datetime.now(UTC))):
            ids.append(str(Message.objects.create(account=w.account, peer=caroline,
                                                  scope=w.root, text=text,
                                                  occurred_at=at).pk))
    process_messages(str(w.account.id), ids)
    assert {extracted for extracted, _, _ in _states(w.account.id).values()} == {True}


def test_a_poison_message_is_dead_lettered_and_the_batch_goes_on(live_server, people, poison,
                                                                  no_rate_limit):
    w, admin_key = people["world"], people["admin_key"]
    r = api(live_server, w.agent_key, "POST", "messages", json={
        "scope": "/", "messages": [
            {"peer_key": "caroline", "text": "I adopted a rescue greyhound named Pixel."},
            {"peer_key": "caroline", "text": "I moved to Zanzibar.", "id": "poison-1"},
            {"peer_key": "caroline", "text": "I started learning the cello."}]})
    assert r.status_code == 202, r.text
    poison_id = r.json()["messages"][1]["id"]
    states = _states(w.account.id)
    assert states["I adopted a rescue greyhound named Pixel."][0]
    assert states["I started learning the cello."][0]  # after the poison, still extracted
    assert states["I moved to Zanzibar."] == (False, True, 1)  # set aside, once

    # The sweeper does not retry it for ever.
    assert sweep_unprocessed(older_than_seconds=0) == 0
    assert _states(w.account.id)["I moved to Zanzibar."] == (False, True, 1)

    # Operators see it: a gauge on /metrics and the admin listing (admins only, no text).
    metrics = httpx.get(f"{live_server.url}/metrics", timeout=30).text
    assert "memhouse_messages_dead_lettered 1.0" in metrics
    assert "Zanzibar" not in metrics
    assert_error(api(live_server, w.agent_key, "GET", "admin/dead-letters"), 403)
    listing = api(live_server, admin_key, "GET", "admin/dead-letters")
    assert listing.status_code == 200, listing.text
    [item] = listing.json()["items"]
    assert (item["kind"], item["id"], item["client_message_id"], item["attempts"]) == (
        "message", poison_id, "poison-1", 1)
    assert item["error"] == "extraction_failed"
    assert "poisoned for the test" in item["error_message"] and "Zanzibar" not in str(item)
    assert listing.json()["next_cursor"] is None

    # Retry while the cause persists: dead-lettered again. The count starts again (one
    # attempt since the retry); the audit entry keeps the one before it.
    again = api(live_server, admin_key, "POST", f"admin/dead-letters/{poison_id}/retry")
    assert again.status_code == 202, again.text
    assert _states(w.account.id)["I moved to Zanzibar."] == (False, True, 1)
    with account_context(w.account.id):
        entry = AuditEntry.objects.filter(event_type="message.extraction_retried").get()
        assert (entry.actor, entry.target_id, entry.payload) == (
            "peer:dana", poison_id, {"attempts": 1, "error": "extraction_failed"})
    # The cause fixed, a retry extracts it and the listing is empty.
    poison()  # drops the trigger
    fixed = api(live_server, admin_key, "POST", f"admin/dead-letters/{poison_id}/retry")
    assert fixed.status_code == 202, fixed.text
    assert _states(w.account.id)["I moved to Zanzibar."][:2] == (True, False)
    assert api(live_server, admin_key, "GET", "admin/dead-letters").json()["items"] == []
    # A message that is not set aside (now extracted) is refused with a code.
    assert_error(api(live_server, admin_key, "POST", f"admin/dead-letters/{poison_id}/retry"),
                 409, "not_dead_lettered")
    metrics = httpx.get(f"{live_server.url}/metrics", timeout=30).text
    assert "memhouse_messages_dead_lettered 0.0" in metrics
