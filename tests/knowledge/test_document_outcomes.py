"""Read your writes for documents: POST /api/v1/documents and POST
/api/v1/documents/<id>/versions take the same `wait` as POST /api/v1/messages and answer
with the version's outcome; GET /api/v1/documents/<id> shows each version's processing
state. Real HTTP against live_server, real PostgreSQL, extraction through the real
pipeline (eager Celery: it runs when the request commits)."""

from __future__ import annotations

import json

import httpx
import pytest

from governance.intake import pipeline
from knowledge.ingest import services as ingest_services
from knowledge.models import Document, DocumentVersion, KnowledgeSource
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)
SCOPE = "/marketing/social"
HANDBOOK = "Alice loves hiking in the Alps.\nThe office is in Lisbon.\n"


def _post(live_server, key: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{live_server.url}/api/v1/{path}", json=body,
                      headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _get(live_server, key: str, path: str) -> httpx.Response:
    return httpx.get(f"{live_server.url}/api/v1/{path}",
                     headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _create(live_server, key: str, text: str = HANDBOOK, **extra) -> httpx.Response:
    return _post(live_server, key, "documents",
                 {"scope": SCOPE, "title": "Handbook", "text": text, **extra})


def _key(w, peer) -> str:
    from knowledge import services

    with account_context(w.account.id):
        _, key = services.credential_create(account_id=w.account.id, peer=peer)
    return key


def test_wait_returns_the_versions_statements_with_ids_and_states(live_server,
                                                                   committed_world):
    """Alice uploads a note: her claim about herself is hers to read (provisional until
    confirmed, as any document claim); the scope claim is held for a curator, so she gets
    a count and a state."""
    w = committed_world
    alice = _key(w, w.subject)
    r = _create(live_server, alice, wait=5)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["timed_out"] is False
    assert (body["version"], body["media_type"]) == (1, "text/plain")
    out = body["outcome"]
    assert out["processing"] == "processed" and out["refused"] == []
    assert out["not_visible"] == {"count": 1, "states": {"held": 1}}
    assert "Lisbon" not in r.text
    [stmt] = out["statements"]
    assert (stmt["statement"], stmt["subject"], stmt["state"]) == (
        "Alice loves hiking in the Alps.", "alice", "provisional")
    # The id is the statement's: the knowledge endpoint shows it to the same key ...
    got = _get(live_server, alice, f"knowledge/{stmt['id']}")
    assert got.status_code == 200, got.text
    assert got.json()["knowledge"]["statement"] == stmt["statement"]
    # ... and a search right after finds it, the first time.
    found = httpx.post(f"{live_server.url}/api/v1/search",
                       json={"query": "Where does Alice go hiking?", "scope": SCOPE},
                       headers={"Authorization": f"Bearer {alice}"}, timeout=60)
    assert stmt["id"] in [c["id"] for c in found.json()["candidates"]]
    detail = _get(live_server, alice, f"documents/{body['document_id']}").json()
    assert detail["processing"] == "processed"
    assert [(v["version"], v["processing"]) for v in detail["versions"]] == [(1, "processed")]


def test_a_new_version_with_wait_names_what_it_still_supports(live_server, committed_world):
    w = committed_world
    alice = _key(w, w.subject)
    first = _create(live_server, alice, wait=5,
                    text="Alice loves hiking in the Alps.\nAlice works in Lisbon.\n").json()
    kept = {s["statement"]: s["id"] for s in first["outcome"]["statements"]}
    assert set(kept) == {"Alice loves hiking in the Alps.", "Alice works in Lisbon."}
    text = "Alice loves hiking in the Alps.\nAlice works in Porto.\n"
    r = _post(live_server, alice, f"documents/{first['document_id']}/versions",
              {"text": text, "wait": 5})
    assert r.status_code == 201, r.text
    body = r.json()
    assert (body["version"], body["timed_out"]) == (2, False)
    out = body["outcome"]
    assert out["processing"] == "processed"
    by_text = {s["statement"]: s for s in out["statements"]}
    assert set(by_text) == {"Alice loves hiking in the Alps.", "Alice works in Porto."}
    # The statement version 1 already held is named by its id; the new one is new.
    assert by_text["Alice loves hiking in the Alps."]["id"] == kept[
        "Alice loves hiking in the Alps."]
    assert by_text["Alice works in Porto."]["id"] not in kept.values()
    lisbon = _get(live_server, alice, f"knowledge/{kept['Alice works in Lisbon.']}")
    assert lisbon.json()["knowledge"]["state"] == "superseded"
    # The same bytes again: the latest version, already processed, no new one.
    again = _post(live_server, alice, f"documents/{first['document_id']}/versions",
                  {"text": text, "wait": 5})
    assert (again.json()["version"], again.json()["outcome"]) == (2, out)
    detail = _get(live_server, alice, f"documents/{first['document_id']}").json()
    assert [(v["version"], v["processing"]) for v in detail["versions"]] == [
        (1, "processed"), (2, "processed")]


def test_a_claim_about_someone_else_is_counted_not_shown(live_server, committed_world):
    """Bob (a member, not a curator) uploads a note about Alice: her provisional claim is
    hers to read, so Bob's outcome counts it by state and never carries its text."""
    w = committed_world
    r = _create(live_server, _key(w, w.member), text="Alice painted a lake last week.\n", wait=5)
    assert r.status_code == 201, r.text
    out = r.json()["outcome"]
    assert out["processing"] == "processed" and out["statements"] == []
    assert out["not_visible"]["count"] >= 1, out
    assert "lake" not in r.text


def test_without_wait_the_answers_are_unchanged(live_server, committed_world):
    w = committed_world
    keys = {"document_id", "version", "version_id", "sha256", "media_type"}
    r = _create(live_server, w.agent_key)
    assert r.status_code == 201 and set(r.json()) == keys
    zero = _post(live_server, w.agent_key, f"documents/{r.json()['document_id']}/versions",
                 {"text": "The office is in Porto.\n", "wait": 0})
    assert zero.status_code == 201 and set(zero.json()) == keys
    null = _post(live_server, w.agent_key, f"documents/{r.json()['document_id']}/versions",
                 {"text": "The office is in Faro.\n", "wait": None})
    assert null.status_code == 201 and set(null.json()) == keys


@pytest.mark.parametrize("wait", ["10.5", "-1", '"5"', "true", "[]", "1e309"])
def test_a_bad_wait_is_400_invalid_wait_and_writes_nothing(live_server, committed_world,
                                                            wait):
    w = committed_world
    headers = {"Authorization": f"Bearer {w.agent_key}", "Content-Type": "application/json"}
    raw = json.dumps({"scope": SCOPE, "title": "Handbook", "text": HANDBOOK})[:-1]
    r = httpx.post(f"{live_server.url}/api/v1/documents", headers=headers, timeout=30,
                   content=(raw + f', "wait": {wait}}}').encode())
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_wait", err
    assert err["message"] == "wait must be a number of seconds from 0 to 10"
    with account_context(w.account.id):
        assert not Document.objects.exists()
    doc = _create(live_server, w.agent_key).json()
    raw = json.dumps({"text": "The office is in Porto."})[:-1]
    r = httpx.post(f"{live_server.url}/api/v1/documents/{doc['document_id']}/versions",
                   headers=headers, timeout=30, content=(raw + f', "wait": {wait}}}').encode())
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_wait", r.text
    with account_context(w.account.id):
        assert DocumentVersion.objects.count() == 1


def test_the_wait_runs_out_when_nothing_processes_the_version(live_server, committed_world,
                                                               monkeypatch):
    class Lost:  # a broker that accepted the task and lost it
        @staticmethod
        def delay(*args):
            return None

    monkeypatch.setitem(ingest_services._INTAKE_TASKS, "document_version", Lost)
    w = committed_world
    r = _create(live_server, w.agent_key, wait=0.3)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["timed_out"] is True
    assert body["outcome"] == {"processing": "queued", "statements": [], "refused": [],
                               "not_visible": {"count": 0, "states": {}}, "error": None}
    detail = _get(live_server, w.agent_key, f"documents/{body['document_id']}").json()
    assert detail["processing"] == "queued"
    # The task, delivered late, processes it; a redelivery is then a no-op.
    assert pipeline.process_document_version(w.account.id, body["version_id"]).proposed == 2
    assert pipeline.process_document_version(w.account.id, body["version_id"]).proposed == 0
    with account_context(w.account.id):
        assert KnowledgeSource.objects.filter(document_version_id=body["version_id"]).count() == 2
    detail = _get(live_server, w.agent_key, f"documents/{body['document_id']}").json()
    assert detail["processing"] == "processed"


def test_a_version_whose_processing_fails_is_reported_failed(live_server, committed_world,
                                                              monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("the extractor broke")

    monkeypatch.setattr(pipeline, "document_claims", broken)
    w = committed_world
    r = _create(live_server, w.agent_key, wait=5)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["timed_out"] is False  # set aside is done, not pending
    assert body["outcome"] == {"processing": "failed", "statements": [], "refused": [],
                               "not_visible": {"count": 0, "states": {}},
                               "error": "processing_failed"}
    with account_context(w.account.id):
        version = DocumentVersion.objects.get(pk=body["version_id"])
    assert version.processed_at is None and version.processing_failed_at is not None
    assert version.processing_error == "RuntimeError: the extractor broke"
    detail = _get(live_server, w.agent_key, f"documents/{body['document_id']}").json()
    assert detail["processing"] == "failed"
    assert detail["versions"][0]["error"] == "processing_failed"  # a code, never the text


def test_a_version_with_nothing_to_extract_is_processed(live_server, committed_world):
    w = committed_world
    r = _create(live_server, w.agent_key, text="# Notes\n\nWhat now?\n", wait=5)
    assert r.status_code == 201, r.text
    assert r.json()["timed_out"] is False
    assert r.json()["outcome"]["processing"] == "processed"
    assert r.json()["outcome"]["statements"] == []


def test_the_migration_marks_versions_stored_before_the_marker(committed_world):
    """0018's backfill: a version with a statement drawn from it, or older than ten
    minutes, is processed (at its creation time); a recent one with none stays queued,
    so a task still in flight processes it."""
    import importlib
    from datetime import timedelta
    from types import SimpleNamespace

    from django.db import connection, transaction
    from django.utils import timezone

    from knowledge.services import knowledge_propose

    backfill = importlib.import_module(
        "knowledge.migrations.0018_document_version_processed").mark_processed_versions
    w = committed_world
    with account_context(w.account.id):
        document = Document.objects.create(account_id=w.account.id, scope=w.scope,
                                           title="Old")
        now = timezone.now()

        def version(number: int, age: timedelta) -> DocumentVersion:
            return DocumentVersion.objects.create(
                account_id=w.account.id, document=document, number=number, blob=b"x",
                sha256=str(number), text="x", created_at=now - age)

        old, sourced, recent = (version(1, timedelta(hours=2)),
                                version(2, timedelta(minutes=1)),
                                version(3, timedelta(minutes=1)))
        knowledge_propose(account_id=w.account.id, statement="Old news.", scope=w.scope,
                          subject_peer=None, actor="system:test",
                          sources=[{"document_version": sourced, "excerpt": "Old news."}])
    with transaction.atomic():
        backfill(None, SimpleNamespace(connection=connection))
    with account_context(w.account.id):
        got = {v.pk: v.processed_at for v in DocumentVersion.objects.filter(document=document)}
    assert got[old.pk] == old.created_at and got[sourced.pk] == sourced.created_at
    assert got[recent.pk] is None
