"""The stable identity profile: the allowlist, contradictions side by side, live rebuild,
and POST /api/v1/stable-profile over real HTTP."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Message, Peer, Relation
from knowledge.selectors import reader_for
from memhouse.core.principal import Principal, Reader
from memhouse.core.tenancy import account_context
from retrieval import engine
from retrieval.profiles import BASE_PROFILES
from retrieval.stable_profile import stable_profile
from tests.retrieval.test_search import _add, corpus  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)


def _post(live_server, key, **body) -> httpx.Response:
    return httpx.post(f"{live_server.url}/api/v1/stable-profile", json=body,
                      headers={"Authorization": f"Bearer {key}"}, timeout=30)


@pytest.fixture
def identity(corpus):  # noqa: F811
    w, ids = corpus
    with account_context(w.account.id):
        m = Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                   text="About me: notes.", occurred_at=datetime.now(UTC))

        def sourced(statement: str, **kw) -> str:
            return _add(w, statement, sources=[{"message": m, "excerpt": statement[:20]}], **kw)

        ids["architect"] = sourced("Alice works as an architect.")
        ids["lisbon"] = sourced("Alice lives in Lisbon.", sensitivity="public")
        ids["porto"] = sourced("Alice lives in Porto.")
        ids["sister"] = sourced("Alice is Maria's sister.", kind="relation")
        ids["python"] = sourced("Alice can program in Python.", kind="skill")
        ids["mother"] = sourced("Alice's mother is Ana.", kind="relation",
                                scope=w.root)  # an ancestor scope
        ids["own_report"] = sourced("Alice said she grew up in Braga.")
        # An attitude, not a passing state: it stays.
        ids["attitude"] = sourced("Alice is tired of long commutes.")
        excluded = {
            "preference": sourced("Alice prefers tea over coffee.", kind="preference"),
            "event": sourced("Alice attended a conference.", kind="event"),
            "deduction": sourced("Alice is probably a designer at heart.",
                                 extractor="deduction"),
            "consolidation": sourced("Alice is an urbanist.", extractor="consolidation"),
            "personal": sourced("Alice has a chronic illness.", sensitivity="personal"),
            "restricted": sourced("Alice's passport number is on file.",
                                  sensitivity="restricted"),
            "transient": sourced("Alice is travelling this week.",
                                 expires_at=datetime.now(UTC) + timedelta(days=3)),
            "ended": sourced("Alice worked at Acme.",
                             relevant_from=datetime(2015, 1, 1, tzinfo=UTC),
                             relevant_until=datetime(2019, 1, 1, tzinfo=UTC)),
            "provisional": sourced("Alice may become a team lead.", state="provisional"),
            "bobs": sourced("Bob works as a plumber.", subject="bob"),
            "advice": sourced("Bob told Alice: Alice should bring her sketchbook."),
            "should": sourced("Alice should find a running club here."),
            "reported": sourced("Bob said Alice is a great runner."),
            # Passing states with no expiry stored: left out all the same.
            "exhausted": sourced("Alice is exhausted."),
            "sick_today": sourced("Alice feels sick today."),
            "starving": sourced("Alice was starving right now."),
            "stressed": sourced("Alice has been so stressed lately."),
            "late": sourced("Alice is running late."),
            "unsourced": ids["public"],  # "Alice leads the design team." has no source
        }
        Relation.objects.create(account=w.account, source_id=ids["lisbon"],
                                target_id=ids["porto"], type="contradicts")
    return w, ids, excluded


def _reader(w, key: str) -> Reader:
    peer = Peer.objects.get(key=key)
    principal = Principal(account_id=w.account.id, peer=peer, via="api_key")
    return reader_for(principal=principal)


def test_the_allowlist_keeps_stable_direct_sourced_facts_only(identity):
    w, ids, excluded = identity
    with account_context(w.account.id):
        profile = stable_profile(reader=_reader(w, "alice"), scope=w.scope)
    assert profile is not None and profile["peer_key"] == "alice"
    got = [e["knowledge_id"] for e in profile["entries"]]
    assert set(got) == {ids[k] for k in ("architect", "lisbon", "porto", "sister", "python",
                                         "mother", "own_report", "attitude")}
    assert not set(excluded.values()) & set(got)
    entry = next(e for e in profile["entries"] if e["knowledge_id"] == ids["architect"])
    assert len(entry["source_ids"]["messages"]) == 1
    assert entry["source_ids"]["document_versions"] == []
    # Dated as context lines are: no valid time, so when its source was said.
    with account_context(w.account.id):
        said = Message.objects.get(pk=entry["source_ids"]["messages"][0]).occurred_at
    assert entry["when"] == f"said {said.day} {said:%B} {said.year}"


def test_contradictory_claims_stay_side_by_side(identity):
    w, ids, _ = identity
    with account_context(w.account.id):
        profile = stable_profile(reader=_reader(w, "alice"), scope=w.scope)
    assert profile["conflicts"] == [[ids["lisbon"], ids["porto"]]] or \
        profile["conflicts"] == [[ids["porto"], ids["lisbon"]]]
    got = [e["knowledge_id"] for e in profile["entries"]]
    i, j = got.index(ids["lisbon"]), got.index(ids["porto"])
    assert abs(i - j) == 1  # adjacent
    lisbon = profile["entries"][i]
    assert lisbon["contradicts"] == [ids["porto"]]


def test_rebuilt_on_every_call_so_nothing_stale_remains(identity):
    w, ids, _ = identity
    with account_context(w.account.id):
        transition(Knowledge.objects.get(pk=ids["architect"]), "redacted", actor="system:test",
                   reason="f4_subject_redacted")
        Knowledge.objects.filter(pk=ids["python"]).update(
            expires_at=datetime.now(UTC) - timedelta(seconds=1))
        profile = stable_profile(reader=_reader(w, "alice"))
    got = {e["knowledge_id"] for e in profile["entries"]}
    assert ids["architect"] not in got and ids["python"] not in got
    assert ids["lisbon"] in got


def test_profile_is_about_the_reader_and_respects_scope(identity):
    w, ids, excluded = identity
    with account_context(w.account.id):
        bob = stable_profile(reader=_reader(w, "bob"))
        root_only = stable_profile(reader=_reader(w, "alice"), scope=w.root)
        peerless = Reader(account_id=w.account.id, posture="public_only")
        assert stable_profile(reader=peerless) is None
    assert [e["knowledge_id"] for e in root_only["entries"]] == [ids["mother"]]
    # about bob, not about whoever spoke the source (subject is not source)
    assert [e["knowledge_id"] for e in bob["entries"]] == [excluded["bobs"]]


def test_search_rank_does_not_depend_on_the_identity_profile(identity):
    """The search `include_identity_profile` flag only appends this function's output."""
    w, _, _ = identity
    with account_context(w.account.id):
        reader = _reader(w, "alice")
    kwargs = {"reader": reader, "scope": w.scope, "query": "Where does Alice live?",
              "profile": BASE_PROFILES["balanced"]}
    before = [c["id"] for c in engine.search(**kwargs).candidates]
    with account_context(w.account.id):
        profile = stable_profile(reader=reader, scope=w.scope)
    after = [c["id"] for c in engine.search(**kwargs).candidates]
    assert before == after and profile["entries"]


def test_stable_profile_over_http(live_server, identity):
    w, ids, excluded = identity
    r = _post(live_server, w.agent_key, peer_key="alice", scope="/marketing/social")
    assert r.status_code == 200, r.text
    body = r.json()
    assert {e["knowledge_id"] for e in body["entries"]} >= {ids["architect"], ids["mother"]}
    assert not {e["knowledge_id"] for e in body["entries"]} & {
        excluded[k] for k in ("exhausted", "sick_today", "starving")}
    assert body["allowlist"]["kinds"] == ["fact", "relation", "skill"]
    # the agent credential reads as its own peer by default: nothing about it
    assert _post(live_server, w.agent_key).json()["entries"] == []
    with account_context(w.account.id):
        _, peerless = services.credential_create(account_id=w.account.id, peer=None)
    r = _post(live_server, peerless)
    assert r.status_code == 400 and r.json()["error"]["code"] == "peer_required"
    r = _post(live_server, w.agent_key, peer_key="ghost")
    assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_peer_key"
    r = _post(live_server, w.agent_key, peer_key="alice", scope="/nowhere")
    assert r.status_code == 404
    r = _post(live_server, w.outsider_key, scope="/marketing/social")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
