"""Projection and skill readiness over real HTTP: GET /api/v1/readiness.

The lifecycle contract's readiness column as behaviour: fresh statements make a kind
ready, needs_revalidation and expired rows (also active rows whose dates passed before the
workers ran) are reported gaps, a kind with neither is missing; the projections a read
would use are fresh, dirty, stale or missing. Only the subject reading their own report
sees the gap statements; everyone else gets statuses and counts, never ids or text.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Peer
from memhouse.core.tenancy import account_context
from retrieval import projections
from retrieval.models import Projection

pytestmark = pytest.mark.django_db(transaction=True)


def _add(w: Any, statement: str, *, subject: str | None = "alice", kind: str = "fact",
         sensitivity: str = "internal", path: list[tuple[str, str]] | None = None,
         **kw: Any) -> Knowledge:
    item = services.knowledge_propose(
        account_id=w.account.id, statement=statement, scope=w.scope,
        subject_peer=Peer.objects.get(key=subject) if subject else None, actor="system:test",
        kind=kind, sensitivity=sensitivity, level="peer" if subject else "scope", **kw)
    for to, reason in path or [("active", "f4_gate_a_b_accepted")]:
        transition(item, to, actor="system:test", reason=reason)
    return item


@pytest.fixture
def corpus(committed_world: Any) -> tuple[Any, dict[str, Knowledge], dict[str, str]]:
    w = committed_world
    past = timezone.now() - timedelta(days=1)
    with account_context(w.account.id):
        rows = {
            "tea": _add(w, "Alice prefers green tea.", kind="preference"),
            "oslo": _add(w, "Alice lives in Oslo.", path=[
                ("active", "f4_gate_a_b_accepted"),
                ("needs_revalidation", "f4_revalidation_due")]),
            # Active, but its expiry passed before the sweeper ran: already a gap.
            "trip": _add(w, "Alice is at the Lisbon offsite this week.", kind="event",
                         expires_at=past),
            "asthma": _add(w, "Alice has asthma.", sensitivity="personal"),
            "python": _add(w, "Alice writes Python.", kind="skill",
                           path=[("provisional", "f4_gate_a_b_deferred")]),
            "posts": _add(w, "The social team posts on Tuesdays.", subject=None),
        }
        keys = {"alice": services.token_issue(peer=w.subject)[1],
                "bob": services.token_issue(peer=w.member)[1]}
    keys["scribe"] = w.agent_key
    return w, rows, keys


def _get(live_server: Any, key: str, **params: str) -> httpx.Response:
    return httpx.get(f"{live_server.url}/api/v1/readiness", params=params,
                     headers={"Authorization": f"Bearer {key}"}, timeout=30)


def test_the_subjects_own_report_names_its_gaps(live_server, corpus):
    _, rows, keys = corpus
    r = _get(live_server, keys["alice"], scope="/marketing/social", subject="alice")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "gap" and body["subject"] == "alice"
    assert body["gaps"] == {"expired": 1, "needs_revalidation": 1}
    kinds = body["kinds"]
    assert kinds["preference"] == {"status": "ready", "fresh": 1,
                                   "gaps": {"expired": 0, "needs_revalidation": 0}}
    # Her provisional skill satisfies her own readiness (the contract's subject_only).
    assert kinds["skill"]["status"] == "ready"
    assert kinds["event"] == {"status": "gap", "fresh": 0,
                              "gaps": {"expired": 1, "needs_revalidation": 0}}
    assert kinds["fact"]["fresh"] == 1 and kinds["fact"]["gaps"]["needs_revalidation"] == 1
    assert kinds["relation"]["status"] == "missing"
    gaps = {g["id"]: (g["state"], g["statement"]) for g in body["gap_statements"]}
    assert gaps == {str(rows["oslo"].id): ("needs_revalidation", "Alice lives in Oslo."),
                    str(rows["trip"].id): ("expired",
                                           "Alice is at the Lisbon offsite this week.")}


def test_other_readers_get_a_content_free_report_of_what_they_may_see(live_server, corpus):
    _, rows, keys = corpus
    for key, extra in ((keys["bob"], {}), (keys["scribe"], {"peer_key": "bob"})):
        r = _get(live_server, key, scope="/marketing/social", subject="alice", **extra)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["gap_statements"] is None
        assert body["gaps"] == {"expired": 1, "needs_revalidation": 1}
        # Her personal fact and her provisional skill are not bob's to count.
        assert body["kinds"]["fact"]["fresh"] == 0
        assert body["kinds"]["skill"]["status"] == "missing"
        text = r.text
        for item in rows.values():
            assert str(item.id) not in text and item.statement not in text


def test_scope_report_and_projection_freshness(live_server, corpus):
    w, rows, keys = corpus

    def report() -> dict[str, Any]:
        r = _get(live_server, keys["bob"], scope="/marketing/social")
        assert r.status_code == 200, r.text
        return r.json()

    body = report()
    assert body["subject"] is None and body["status"] == "gap"
    # Shareable rows: the scope's own statement and alice's internal ones, not the
    # personal one.
    assert body["kinds"]["fact"] == {"status": "ready", "fresh": 1,
                                     "gaps": {"expired": 0, "needs_revalidation": 1}}
    cards = [(p["kind"], p["scope"], p["status"]) for p in body["projections"]]
    assert cards == [("scope_card", "/marketing/social", "missing"),
                     ("scope_card", "/marketing", "missing"), ("scope_card", "/", "missing")]
    # Asking changed nothing: no projection row was created.
    with account_context(w.account.id):
        assert not Projection.objects.exists()
        key = projections.Key(Projection.Kind.SCOPE_CARD, Projection.Audience.SHARED,
                              w.scope.id)
        projections.load(w.account.id, [key])  # creates it; the eager rebuild builds it
    assert report()["projections"][0]["status"] == "fresh"
    with account_context(w.account.id):
        Knowledge.objects.filter(pk=rows["posts"].pk).update(
            expires_at=timezone.now() - timedelta(minutes=1))
    assert report()["projections"][0]["status"] == "stale"
    with account_context(w.account.id):
        Projection.objects.filter(scope=w.scope).update(dirty=True)
    assert report()["projections"][0]["status"] == "dirty"


def test_bad_input_is_4xx(live_server, corpus):
    w, _, keys = corpus
    cases = [({"scope": "/nowhere"}, 404, "not_found"),
             ({"scope": "no-slash"}, 400, "invalid_scope_path"),
             ({"scope": "/" + "x" * 600}, 400, "invalid_input"),
             ({"scope": "/marketing/social", "subject": "ghost"}, 400, "unknown_subject"),
             ({"scope": "/marketing/social", "peer_key": "ghost"}, 400, "unknown_peer_key")]
    for params, status, code in cases:
        r = _get(live_server, keys["scribe"], **params)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), (params, r.text)
    r = _get(live_server, keys["bob"], scope="/marketing/social", peer_key="alice")
    assert (r.status_code, r.json()["error"]["code"]) == (403, "act_for_denied")
    r = _get(live_server, w.outsider_key, scope="/marketing/social", subject="alice")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
