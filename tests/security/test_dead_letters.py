"""Issue #34 item 3 over real HTTP: failed document versions are dead letters beside
messages. `GET /api/v1/admin/dead-letters` lists both kinds (administrators of the
Account only, within their scopes, paged as one list, never the text or a title);
`POST /api/v1/admin/dead-letters/document-versions/{id}/retry` processes a set-aside
version again, audited as the administrator, and refuses with a code a version that is
not set aside (409), unknown or in another Account (the same 404). A version processed
after a newer one of its document (swept late, or retried) writes nothing, so it can
never supersede what the newer version says."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from knowledge import lifecycle, people, services
from knowledge.models import AuditEntry, Document, DocumentVersion, Knowledge
from memhouse.core.tenancy import account_context
from tests.reliability.helpers import api, assert_error, poisoned_messages, poisoned_versions

pytestmark = pytest.mark.django_db(transaction=True)

@pytest.fixture
def poison() -> Any:
    with poisoned_versions():
        yield


@pytest.fixture
def admins(committed_world: Any) -> dict[str, str]:
    """Login tokens: Dave (A's administrator, '/'), Erin (A's administrator limited to
    /sales), Mallory (B's administrator) and Carol (A's curator, not an administrator)."""
    w = committed_world
    with account_context(w.account.id):
        services.scope_ensure(account_id=w.account.id, path="/sales")
        dave = services.peer_create(account_id=w.account.id, key="dave", kind="human",
                                    display_name="Dave", password="dave-pass-1234",
                                    is_admin=True)
        erin = people.person_create(account_id=w.account.id, key="erin", actor="system:test",
                                    role="admin", scope_paths=["/sales"],
                                    password="erin-pass-1234")
        keys = {"dave": services.token_issue(peer=dave)[1],
                "erin": services.token_issue(peer=erin)[1],
                "carol": services.token_issue(peer=w.curator)[1]}
    with account_context(w.other_account.id):
        people.person_update(peer=w.outsider, actor="system:test", role="admin")
        keys["mallory"] = services.token_issue(peer=w.outsider)[1]
    return keys


def _document(live_server: Any, key: str, text: str, **extra: Any) -> httpx.Response:
    r = api(live_server, key, "POST", "documents", json={
        "scope": "/marketing/social", "title": "Secret plans", "text": text, "wait": 10,
        **extra})
    assert r.status_code == 201, r.text
    return r


def _too_many(live_server: Any, w: Any, settings: Any) -> dict[str, Any]:
    settings.MEMHOUSE_MAX_STATEMENTS_PER_VERSION = 2
    body = _document(live_server, w.agent_key, "\n".join(
        f"Team {n} meets on floor {n} every week." for n in range(1, 5))).json()
    assert body["outcome"]["error"] == "too_many_statements"
    return body


def test_failed_versions_are_listed_beside_messages(live_server: Any, committed_world: Any,
                                                    admins: dict[str, str], settings: Any,
                                                    poison: Any) -> None:
    w = committed_world
    too_many = _too_many(live_server, w, settings)
    raised = _document(live_server, w.agent_key, "The office moves to Zanzibar.").json()
    assert raised["outcome"]["processing"] == "failed"
    assert raised["outcome"]["error"] == "processing_failed"
    # A message set aside too (its extraction raised).
    with poisoned_messages():
        r = api(live_server, w.agent_key, "POST", "messages", json={
            "scope": "/", "messages": [{"peer_key": "alice", "id": "m-1",
                                        "text": "I moved to Zanzibar."}]})
        assert r.status_code == 202, r.text
    message_id = r.json()["messages"][0]["id"]

    listing = api(live_server, admins["dave"], "GET", "admin/dead-letters")
    assert listing.status_code == 200, listing.text
    items = listing.json()["items"]
    # Newest failure first, both kinds, the same keys for each.
    assert [(x["kind"], x["id"]) for x in items] == [
        ("message", message_id), ("document_version", raised["version_id"]),
        ("document_version", too_many["version_id"])]
    assert len({frozenset(x) for x in items}) == 1
    version = items[1]
    assert (version["document_id"], version["version"], version["scope"],
            version["peer_key"], version["attempts"]) == (
        raised["document_id"], 1, "/marketing/social", "scribe", 1)
    assert version["error"] == "processing_failed"
    assert "poisoned for the test" in version["error_message"]
    assert version["client_message_id"] is None and version["failed_at"]
    assert items[2]["error"] == "too_many_statements"
    assert "MEMHOUSE_MAX_STATEMENTS_PER_VERSION" in items[2]["error_message"]
    assert (items[0]["error"], items[0]["document_id"], items[0]["version"]) == (
        "extraction_failed", None, None)
    # Never the text, never a title.
    assert not {"Zanzibar", "Secret plans", "floor"} & set(listing.text.split())
    assert "Zanzibar" not in listing.text and "Secret" not in listing.text

    # Paged as one list: a cursor walks both kinds in the same order.
    seen, cursor = [], None
    while True:
        page = api(live_server, admins["dave"], "GET", "admin/dead-letters",
                   params={"limit": 1, **({"cursor": cursor} if cursor else {})}).json()
        seen += [x["id"] for x in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [x["id"] for x in items]
    kept = api(live_server, admins["dave"], "GET", "admin/dead-letters",
               params={"kind": "document_version"}).json()["items"]
    assert [x["id"] for x in kept] == [x["id"] for x in items[1:]]
    assert_error(api(live_server, admins["dave"], "GET", "admin/dead-letters",
                     params={"kind": "everything"}), 400, "invalid_kind")
    assert_error(api(live_server, admins["dave"], "GET", "admin/dead-letters",
                     params={"cursor": "forged"}), 400, "invalid_cursor")

    # Administrators only; of this Account only; within their scopes only.
    for key in (w.agent_key, admins["carol"]):
        assert_error(api(live_server, key, "GET", "admin/dead-letters"), 403)
    other = api(live_server, admins["mallory"], "GET", "admin/dead-letters")
    assert other.status_code == 200 and other.json()["items"] == []
    limited = api(live_server, admins["erin"], "GET", "admin/dead-letters")
    assert limited.status_code == 200 and limited.json()["items"] == []

    # A deleted document's versions wait for nobody: no longer listed.
    assert api(live_server, w.agent_key, "DELETE",
               f"documents/{too_many['document_id']}").status_code in (200, 204)
    after = api(live_server, admins["dave"], "GET", "admin/dead-letters").json()["items"]
    assert too_many["version_id"] not in {x["id"] for x in after}
    assert_error(api(live_server, admins["dave"], "POST",
                     f"admin/dead-letters/document-versions/{too_many['version_id']}/retry"),
                 404, "not_found")


def test_retrying_a_failed_version_processes_it_as_the_administrator(
        live_server: Any, committed_world: Any, admins: dict[str, str], settings: Any
) -> None:
    w = committed_world
    live = _document(live_server, w.agent_key, "The canteen opens at noon.").json()
    failed = _too_many(live_server, w, settings)
    retry = f"admin/dead-letters/document-versions/{failed['version_id']}/retry"

    # Not an administrator, another Account, another administrator's scopes: refused,
    # and across Accounts exactly as an id that does not exist.
    assert_error(api(live_server, w.agent_key, "POST", retry), 403)
    assert_error(api(live_server, admins["carol"], "POST", retry), 403)
    theirs = api(live_server, admins["mallory"], "POST", retry)
    ghost = api(live_server, admins["mallory"], "POST",
                "admin/dead-letters/document-versions/"
                "00000000-0000-4000-8000-000000000000/retry")
    assert_error(theirs, 404, "not_found")
    assert theirs.json() == ghost.json()
    assert_error(api(live_server, admins["erin"], "POST", retry), 404, "not_found")
    # A live version (processed) is not a dead letter.
    error = assert_error(api(live_server, admins["dave"], "POST",
                             f"admin/dead-letters/document-versions/{live['version_id']}/retry"),
                         409, "not_dead_lettered")
    assert "not set aside" in error["message"]
    # The message route does not take a version's id (nor the other way round).
    assert_error(api(live_server, admins["dave"], "POST",
                     f"admin/dead-letters/{failed['version_id']}/retry"), 404, "not_found")
    with account_context(w.account.id):
        assert not AuditEntry.objects.filter(
            event_type="document_version.processing_retried").exists()

    # The cause fixed (the cap raised), a retry processes it.
    settings.MEMHOUSE_MAX_STATEMENTS_PER_VERSION = 100
    r = api(live_server, admins["dave"], "POST", retry)
    assert r.status_code == 202, r.text
    assert r.json() == {"kind": "document_version", "id": failed["version_id"],
                        "document_id": failed["document_id"], "version": 1,
                        "status": "queued"}
    detail = api(live_server, w.agent_key, "GET", f"documents/{failed['document_id']}").json()
    assert (detail["processing"], detail["versions"][0]["error"]) == ("processed", None)
    with account_context(w.account.id):
        assert Knowledge.objects.filter(
            sources__document_version_id=failed["version_id"]).count() == 4
        entry = AuditEntry.objects.get(event_type="document_version.processing_retried")
        assert (entry.actor, entry.target_type, entry.target_id) == (
            "peer:dave", "document_version", failed["version_id"])
        assert entry.payload == {"document_id": failed["document_id"], "version": 1,
                                 "attempts": 1, "error": "too_many_statements"}
    assert api(live_server, admins["dave"], "GET", "admin/dead-letters").json()["items"] == []
    # Once is enough: a second retry finds nothing set aside, and queues nothing.
    assert_error(api(live_server, admins["dave"], "POST", retry), 409, "not_dead_lettered")
    with account_context(w.account.id):
        assert AuditEntry.objects.filter(
            event_type="document_version.processing_retried").count() == 1


def test_an_older_version_processed_after_a_newer_one_writes_nothing(
        live_server: Any, committed_world: Any, admins: dict[str, str]) -> None:
    from governance.tasks import sweep_unprocessed

    w = committed_world
    doc = _document(live_server, w.agent_key, "The office moves to Leeds in June.").json()
    # Version 2's task lost in a restart; version 3 added and processed meanwhile.
    with account_context(w.account.id):
        text = "The office moves to York in July."
        lost = DocumentVersion.objects.create(
            account_id=w.account.id, document=Document.objects.get(pk=doc["document_id"]),
            number=2, blob=text.encode(), sha256="0" * 64, text=text,
            created_at=timezone.now() - timedelta(minutes=10))
    r = api(live_server, w.agent_key, "POST", f"documents/{doc['document_id']}/versions",
            json={"text": "The office moves to Hull in August.", "wait": 10})
    assert r.status_code == 201 and r.json()["outcome"]["processing"] == "processed"
    assert sweep_unprocessed(older_than_seconds=300) == 1
    with account_context(w.account.id):
        states = {k.statement: k.state for k in Knowledge.objects.all()}
        lost.refresh_from_db()
    # The document says what version 3 says: version 2 superseded nothing, added nothing.
    assert set(states) == {"The office moves to Leeds in June.",
                           "The office moves to Hull in August."}, states
    assert states["The office moves to Leeds in June."] == lifecycle.SUPERSEDED
    assert states["The office moves to Hull in August."] in lifecycle.CURRENT, states
    assert lost.processed_at is not None
