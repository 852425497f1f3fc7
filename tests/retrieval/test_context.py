"""POST /api/v1/context over real HTTP: projections, the fast fallback, the budget and
the reasoning-free guarantee (a recording fake model server receives nothing)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Message, Session
from memhouse.core.tenancy import account_context
from retrieval.models import Projection
from tests.fake_llm import FakeOpenAI
from tests.retrieval.test_search import _add, corpus  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)


def _context(live_server, key, **body) -> httpx.Response:
    body.setdefault("scope", "/marketing/social")
    return httpx.post(f"{live_server.url}/api/v1/context", json=body,
                      headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _ok(r: httpx.Response) -> dict:
    assert r.status_code == 200, r.text
    return r.json()


def _all_ids(body: dict) -> set[str]:
    ids = {e["id"] for e in body["knowledge"]}
    for card in body["scope_cards"]:
        ids |= {e["id"] for e in card["entries"]}
    for section in ("peer_profile", "session_summary"):
        if body[section]:
            ids |= {e["id"] for e in body[section]["entries"]}
    return ids


@pytest.fixture
def fake_model(fake_openai: FakeOpenAI) -> FakeOpenAI:
    """A configured generation provider that records every request it receives."""
    return fake_openai


def test_a_miss_runs_fast_live_then_projections_are_reused(live_server, corpus):  # noqa: F811
    w, ids = corpus
    first = _ok(_context(live_server, w.agent_key, peer_key="alice",
                         query="Where did Alice go for support?"))
    assert first["projection_cache_hit"] is False and first["fast_fallback"] is True
    # A question ranks the head with the scope's search profile (balanced by default).
    assert first["retrieval"]["profile"] == "balanced"
    assert first["knowledge"][0]["id"] == ids["support"]
    assert first["projections"]["missing"] == 6  # 3 scope cards + 3 profile slices
    # the rebuild ran in the background after that request committed
    second = _ok(_context(live_server, w.agent_key, peer_key="alice",
                          query="Where did Alice go for support?"))
    assert second["projection_cache_hit"] is True and second["fast_fallback"] is False
    assert second["retrieval"]["profile"] == "balanced"
    assert second["knowledge"][0]["id"] == ids["support"]
    assert second["peer_profile"]["peer_key"] == "alice"
    # With a question, projections earn their place: the blank read shows them all.
    blank = _ok(_context(live_server, w.agent_key, peer_key="alice"))
    assert blank["projection_cache_hit"] is True and blank["retrieval"] is None
    assert ids["asthma"] in _all_ids(blank)  # her own personal row, via her profile
    cards = {c["scope"]: {e["id"] for e in c["entries"]} for c in blank["scope_cards"]}
    assert list(cards) == ["/marketing/social", "/marketing", "/"]  # nearest first
    assert ids["team"] in cards["/marketing"] | _all_ids(blank)
    assert ids["paid"] not in _all_ids(second) | _all_ids(blank)
    # every statement appears once in the whole payload
    for body in (second, blank):
        listed = [e["id"] for e in body["knowledge"]] + [
            e["id"] for c in body["scope_cards"] for e in c["entries"]] + [
            e["id"] for e in body["peer_profile"]["entries"]]
        assert len(listed) == len(set(listed))


def test_a_question_is_ranked_by_search_on_a_hit_too(live_server, corpus, monkeypatch):  # noqa: F811
    from retrieval import projections

    w, ids = corpus
    # Projections that show nothing: the head comes from the search, not their entries.
    monkeypatch.setattr(projections, "MAX_ENTRIES", 0)
    q = "Where did Alice go for support?"
    _ok(_context(live_server, w.agent_key, peer_key="alice", query=q))  # miss: builds
    hit = _ok(_context(live_server, w.agent_key, peer_key="alice", query=q))
    assert hit["projection_cache_hit"] is True
    assert hit["knowledge"][0]["id"] == ids["support"]
    assert ids["paid"] not in _all_ids(hit)  # a sibling scope's row is in no pool
    bob = _ok(_context(live_server, w.agent_key, peer_key="bob", query="Alice asthma"))
    bob = _ok(_context(live_server, w.agent_key, peer_key="bob", query="Alice asthma"))
    assert bob["projection_cache_hit"] is True and ids["asthma"] not in _all_ids(bob)
    # A lifecycle change to a pooled statement is invisible at once.
    with account_context(w.account.id):
        transition(Knowledge.objects.get(pk=ids["support"]), "redacted", actor="system:test",
                   reason="f4_subject_redacted")
    after = _ok(_context(live_server, w.agent_key, peer_key="alice", query=q))
    assert after["projection_cache_hit"] is True and ids["support"] not in _all_ids(after)


def test_reader_semantics_apply_to_every_section(live_server, corpus):  # noqa: F811
    w, ids = corpus
    for _ in range(2):  # miss, then hit
        bob = _ok(_context(live_server, w.agent_key, peer_key="bob", query=""))
        assert ids["asthma"] not in _all_ids(bob)  # alice's personal row
        assert ids["bob_prov"] in _all_ids(bob)  # his own provisional row
    alice = _ok(_context(live_server, w.agent_key, peer_key="alice"))
    assert ids["bob_prov"] not in _all_ids(alice)
    with account_context(w.account.id):
        _, peerless = services.credential_create(account_id=w.account.id, peer=None)
    for _ in range(2):
        public = _ok(_context(live_server, peerless))
        assert public["reader_posture"] == "public_only" and public["peer_profile"] is None
        assert _all_ids(public) == {ids["public"]}


def test_blank_query_miss_uses_salience_recency(live_server, corpus):  # noqa: F811
    w, _ids = corpus
    body = _ok(_context(live_server, w.agent_key, peer_key="alice"))
    assert body["fast_fallback"] is True
    assert "salience_recency" in body["retrieval"]["strategies"]["contributed"]
    assert body["knowledge"]


def test_a_state_change_dirties_and_refreshes_the_projections(live_server, corpus):  # noqa: F811
    w, ids = corpus
    _ok(_context(live_server, w.agent_key, peer_key="bob"))
    assert ids["hiking"] in _all_ids(_ok(_context(live_server, w.agent_key, peer_key="bob")))
    with account_context(w.account.id):
        card = Projection.objects.get(kind="scope_card", audience="shared", scope=w.scope)
        version = card.version
        transition(Knowledge.objects.get(pk=ids["hiking"]), "redacted", actor="system:test",
                   reason="f4_subject_redacted")
    with account_context(w.account.id):
        card.refresh_from_db()
    assert card.version >= version + 2 and not card.dirty  # dirtied, then rebuilt
    body = _ok(_context(live_server, w.agent_key, peer_key="bob"))
    assert body["projection_cache_hit"] is True
    assert ids["hiking"] not in _all_ids(body)


def test_the_budget_bounds_the_rendered_context(live_server, corpus):  # noqa: F811
    w, _ = corpus
    _ok(_context(live_server, w.agent_key, peer_key="alice"))
    for budget in (200, 350, 50_000):
        body = _ok(_context(live_server, w.agent_key, peer_key="alice", budget_chars=budget))
        assert body["used_chars"] == len(body["context"]) <= budget
        for e in body["knowledge"]:
            assert f"- [{e['when']}] {e['statement']}\n" in body["context"]
    small = _ok(_context(live_server, w.agent_key, peer_key="alice", budget_chars=200))
    assert small["truncated"] is True and small["omitted_statements"] > 0
    assert _ok(_context(live_server, w.agent_key, peer_key="alice"))["budget_chars"] == 4000


def test_session_summary_section(live_server, corpus):  # noqa: F811
    w, _ = corpus
    with account_context(w.account.id):
        session = Session.objects.create(account=w.account, scope=w.scope, external_id="s-42")
        msg = Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                     session=session, text="We picked Tuesday for launches.",
                                     occurred_at=datetime.now(UTC))
        launch = _add(w, "The team launches on Tuesdays.", subject=None,
                      sources=[{"message": msg, "excerpt": "Tuesday for launches"}])
    _ok(_context(live_server, w.agent_key, peer_key="alice", session="s-42"))
    body = _ok(_context(live_server, w.agent_key, peer_key="alice", session="s-42",
                        query="When do we launch?"))
    assert body["projection_cache_hit"] is True
    assert body["session_summary"]["session"] == "s-42"
    assert launch in _all_ids(body)
    r = _context(live_server, w.agent_key, peer_key="alice", session="nope")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_no_generation_model_is_called_on_the_context_path(live_server, corpus,  # noqa: F811
                                                           fake_model):
    w, ids = corpus
    miss = _ok(_context(live_server, w.agent_key, peer_key="alice", query="hiking"))
    hit = _ok(_context(live_server, w.agent_key, peer_key="alice", query="hiking"))
    with account_context(w.account.id):  # a dirty mark and background rebuild as well
        transition(Knowledge.objects.get(pk=ids["painting"]), "redacted", actor="system:test",
                   reason="f4_subject_redacted")
    again = _ok(_context(live_server, w.agent_key, peer_key="alice", query=""))
    assert miss["fast_fallback"] and hit["projection_cache_hit"] and again["knowledge"]
    assert fake_model.requests == []


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"peer_key": "ghost"}, 400, "unknown_peer_key"),
    ({"budget_chars": 199}, 400, "invalid_input"),
    ({"budget_chars": 50_001}, 400, "invalid_input"),
    ({"budget_chars": "lots"}, 400, "invalid_input"),
    ({"scope": "/nowhere"}, 404, "not_found"),
    ({"scope": "/marketing/paid", "session": 7}, 404, "not_found"),
])
def test_bad_context_input_is_a_clear_4xx(live_server, corpus, body, status, code):  # noqa: F811
    w, _ = corpus
    r = _context(live_server, w.agent_key, **body)
    assert r.status_code == status and r.json()["error"]["code"] == code


def test_scope_is_required(live_server, corpus):  # noqa: F811
    w, _ = corpus
    r = httpx.post(f"{live_server.url}/api/v1/context", json={},
                   headers={"Authorization": f"Bearer {w.agent_key}"}, timeout=30)
    assert r.status_code == 400 and "scope" in r.json()["error"]["details"]


def test_outsider_gets_404(live_server, corpus):  # noqa: F811
    w, _ = corpus
    r = _context(live_server, w.outsider_key)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = _context(live_server, w.outsider_key, scope="/marketing", session="s-42")
    assert r.status_code == 404
