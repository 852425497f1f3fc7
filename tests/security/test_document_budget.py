"""Issue #34 item 3 over real HTTP: documents spend the ingest text budget messages spend
(a first version and a new one; 429 `rate_limited` over the window, 413
`request_too_large` over one request's cap), a version that would yield more statements
than MEMHOUSE_MAX_STATEMENTS_PER_VERSION is set aside with the code
`too_many_statements` and writes nothing (its document keeps what it held), and a
version whose work was cut off by a restart is picked up by the sweeper."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from knowledge import lifecycle, services
from knowledge.models import Document, DocumentVersion, Knowledge, Message, UsageEntry
from memhouse.core.tenancy import account_context
from tests.reliability.helpers import api, assert_error

pytestmark = pytest.mark.django_db(transaction=True)


def _document(live_server: Any, key: str, text: str, **extra: Any) -> httpx.Response:
    return api(live_server, key, "POST", "documents", json={
        "scope": "/marketing/social", "title": "Notes", "text": text, **extra})


def test_documents_spend_the_ingest_budget(live_server: Any, committed_world: Any,
                                           settings: Any) -> None:
    w = committed_world
    settings.MEMHOUSE_INGEST_CHARS_PER_WINDOW = 1_000
    settings.MEMHOUSE_INGEST_WINDOW_SECONDS = 600
    settings.MEMHOUSE_MAX_REQUEST_CHARS = 5_000
    first = _document(live_server, w.agent_key, "The office moves to Leeds. " + "a" * 570)
    assert first.status_code == 201, first.text
    doc = first.json()["document_id"]
    # A new version over the budget is refused and stores nothing.
    r = api(live_server, w.agent_key, "POST", f"documents/{doc}/versions",
            json={"text": "The office moves to York. " + "b" * 570})
    error = assert_error(r, 429, "rate_limited")
    assert "budget" in error["message"] and int(r.headers["Retry-After"]) >= 1
    # So is a new document, and a message after documents spent the budget.
    assert_error(_document(live_server, w.agent_key, "The lift is broken. " + "c" * 570),
                 429, "rate_limited")
    assert_error(api(live_server, w.agent_key, "POST", "messages", json={
        "scope": "/", "messages": [{"peer_key": "alice", "text": "I like tea. " + "d" * 570}]}),
        429, "rate_limited")
    # A small new version still fits the budget.
    r = api(live_server, w.agent_key, "POST", f"documents/{doc}/versions",
            json={"text": "The office moves to Hull."})
    assert r.status_code == 201, r.text
    # One request's cap applies to a document too.
    settings.MEMHOUSE_INGEST_CHARS_PER_WINDOW = 0
    error = assert_error(_document(live_server, w.agent_key, "Long. " + "e" * 5_000), 413,
                         "request_too_large")
    assert "5000" in error["message"]
    # The other Account's budget is its own.
    with account_context(w.other_account.id):
        services.scope_ensure(account_id=w.other_account.id, path="/marketing/social")
    settings.MEMHOUSE_INGEST_CHARS_PER_WINDOW = 1_000
    assert _document(live_server, w.outsider_key,
                     "The office moves to Leeds. " + "f" * 570).status_code == 201
    with account_context(w.account.id):
        assert Document.objects.count() == 1
        assert list(DocumentVersion.objects.order_by("number").values_list("number", flat=True)
                    ) == [1, 2]
        assert not Message.objects.exists()
        spent = sorted(UsageEntry.objects.filter(kind="ingest_chars")
                       .values_list("units", flat=True))
        assert spent == sorted([len("The office moves to Leeds. ") + 570,
                                len("The office moves to Hull.")])


def test_a_version_with_too_many_statements_is_set_aside_and_writes_nothing(
        live_server: Any, committed_world: Any, settings: Any) -> None:
    w = committed_world
    settings.MEMHOUSE_MAX_STATEMENTS_PER_VERSION = 3
    first = _document(live_server, w.agent_key,
                      "The office moves to Leeds in June. The canteen opens at noon.",
                      wait=10)
    assert first.status_code == 201, first.text
    assert first.json()["outcome"]["processing"] == "processed"
    assert first.json()["outcome"]["error"] is None
    doc = first.json()["document_id"]
    with account_context(w.account.id):
        before = {k.pk: k.state for k in Knowledge.objects.all()}
    assert len(before) == 2
    lines = [f"Team {n} meets on floor {n} every week." for n in range(1, 9)]
    r = api(live_server, w.agent_key, "POST", f"documents/{doc}/versions",
            json={"text": "\n".join(lines), "wait": 10})
    assert r.status_code == 201, r.text
    outcome = r.json()["outcome"]
    assert outcome["processing"] == "failed" and outcome["error"] == "too_many_statements"
    assert r.json()["timed_out"] is False
    detail = api(live_server, w.agent_key, "GET", f"documents/{doc}").json()
    assert detail["processing"] == "failed"
    assert [v["error"] for v in detail["versions"]] == [None, "too_many_statements"]
    with account_context(w.account.id):
        # Nothing from the refused version; the first version's statements stand.
        assert {k.pk: k.state for k in Knowledge.objects.all()} == before
        assert lifecycle.SUPERSEDED not in before.values()


def test_a_version_cut_off_by_a_restart_is_swept(live_server: Any, committed_world: Any
                                                 ) -> None:
    from governance.tasks import sweep_unprocessed

    w = committed_world
    first = _document(live_server, w.agent_key, "The office moves to Leeds in June.", wait=10)
    assert first.status_code == 201, first.text
    doc = first.json()["document_id"]
    # Version 2 committed, its task lost with the worker (what a restart leaves behind).
    with account_context(w.account.id):
        document = Document.objects.get(pk=doc)
        text = "The office moves to York in July."
        lost = DocumentVersion.objects.create(
            account_id=w.account.id, document=document, number=2, blob=text.encode(),
            sha256="0" * 64, text=text, created_at=timezone.now() - timedelta(minutes=10))
    detail = api(live_server, w.agent_key, "GET", f"documents/{doc}").json()
    assert detail["processing"] == "queued"
    assert sweep_unprocessed(older_than_seconds=300) >= 1
    detail = api(live_server, w.agent_key, "GET", f"documents/{doc}").json()
    assert [v["processing"] for v in detail["versions"]] == ["processed", "processed"]
    with account_context(w.account.id):
        assert Knowledge.objects.filter(statement__icontains="York",
                                        sources__document_version=lost).exists()
        leeds = Knowledge.objects.get(statement__icontains="Leeds")
        assert leeds.state == lifecycle.SUPERSEDED
    # A swept version is not picked up again.
    assert sweep_unprocessed(older_than_seconds=0) == 0
