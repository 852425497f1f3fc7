"""POST /api/v1/search over real HTTP against real PostgreSQL + pgvector."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from django.db import connection

from knowledge import services
from knowledge.models import Knowledge, Scope
from memhouse.core.tenancy import account_context
from retrieval import engine
from retrieval.strategies.base import StrategyResult
from retrieval.vectors import embed_knowledge
from tests.factories import walk_to

pytestmark = pytest.mark.django_db(transaction=True)


def _add(w, statement, *, subject="alice", scope=None, sensitivity="internal", state="active",
         **kw) -> str:
    from knowledge.models import Peer

    subject_peer = Peer.objects.get(key=subject) if subject else None
    item = services.knowledge_propose(
        account_id=w.account.id, statement=statement, scope=scope or w.scope,
        subject_peer=subject_peer, actor="system:test", sensitivity=sensitivity,
        level="peer" if subject else "scope", **kw)
    return str(walk_to(item, state).id)


@pytest.fixture
def corpus(committed_world):
    w = committed_world
    ids = {}
    with account_context(w.account.id):
        sibling = services.scope_ensure(account_id=w.account.id, path="/marketing/paid")
        marketing = Scope.objects.get(path="/marketing")
        ids["support"] = _add(w, "Alice went to an LGBTQ support group.",
                              relevant_from=datetime(2023, 5, 7, tzinfo=UTC),
                              relevant_until=datetime(2023, 5, 8, tzinfo=UTC))
        ids["hiking"] = _add(w, "Alice loves hiking in the mountains with her dog.")
        ids["asthma"] = _add(w, "Alice has asthma and uses an inhaler.", sensitivity="personal")
        ids["public"] = _add(w, "Alice leads the design team.", sensitivity="public")
        ids["team"] = _add(w, "The marketing team ships a newsletter every Friday.",
                           subject=None, scope=marketing)
        ids["paid"] = _add(w, "The paid ads budget is ten thousand euros.", subject=None,
                           scope=sibling)
        ids["bob_prov"] = _add(w, "Bob might move to Oslo next year.", subject="bob",
                               state="provisional")
        ids["bob_hike"] = _add(w, "Bob enjoys hiking on weekends.", subject="bob")
        ids["painting"] = _add(w, "Alice painted a sunrise over a lake.",
                               relevant_from=datetime(2022, 8, 1, tzinfo=UTC),
                               relevant_until=datetime(2022, 9, 1, tzinfo=UTC))
    embed_knowledge(w.account.id, list(ids.values()))
    return w, ids


def _search(live_server, key, **body) -> httpx.Response:
    body.setdefault("scope", "/marketing/social")
    # Behaviour tests must not depend on machine load; the deadline itself is tested
    # separately (the hanging-strategy test) and the defaults by `profile_defaults=True`.
    if not body.pop("profile_defaults", False):
        body.setdefault("deadline_ms", 5000)
    return httpx.post(f"{live_server.url}/api/v1/search", json=body,
                      headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _ids(r: httpx.Response) -> list[str]:
    assert r.status_code == 200, r.text
    return [c["id"] for c in r.json()["candidates"]]


def test_search_answers_a_question_with_the_full_diagnostics(live_server, corpus):
    w, ids = corpus
    r = _search(live_server, w.agent_key, query="Where did Alice go for support?",
                peer_key="alice", profile_defaults=True)
    body = r.json()
    assert _ids(r)[0] == ids["support"]
    assert body["reader_posture"] == "peer" and body["profile"] == "balanced"
    assert body["profile_version"] == "balanced-v5"
    assert body["analyzer_version"] == "lexical-question-v2"
    assert body["deadline_ms"] == 300 and body["reserved_rerank_ms"] == 0
    assert {"semantic", "lexical"} <= set(body["strategies"]["contributed"])
    assert {"strategy": "temporal", "outcome": "not_applicable",
            "reason_class": "applicability"} in body["retrieval_outcomes"]
    top = body["candidates"][0]
    assert 0 <= top["fusion_score"] <= 1 and top["rank"] == 1
    assert set(top["scores"]) >= {"semantic", "lexical"}
    assert set(top["scores"]["semantic"]) == {"raw", "normalized", "rank", "contribution"}
    scores = [c["fusion_score"] for c in body["candidates"]]
    assert scores == sorted(scores, reverse=True)  # the returned order is the answer
    assert "query_dependent_empty" in body["disagreement"]


def test_reader_visibility_is_enforced_inside_every_strategy(live_server, corpus):
    w, ids = corpus
    q = "Does Alice have asthma or an inhaler?"
    assert ids["asthma"] in _ids(_search(live_server, w.agent_key, query=q, peer_key="alice"))
    bob = _search(live_server, w.agent_key, query=q, peer_key="bob")
    assert ids["asthma"] not in _ids(bob)
    prov_q = "Will Bob move to Oslo?"
    assert ids["bob_prov"] in _ids(_search(live_server, w.agent_key, query=prov_q,
                                           peer_key="bob"))
    assert ids["bob_prov"] not in _ids(_search(live_server, w.agent_key, query=prov_q,
                                               peer_key="alice"))
    # the curator is no exception for another subject's provisional row
    assert ids["bob_prov"] not in _ids(_search(live_server, w.agent_key, query=prov_q,
                                               peer_key="carol"))
    sibling = _ids(_search(live_server, w.agent_key, query="paid ads budget euros"))
    assert ids["paid"] not in sibling  # siblings are never read
    assert ids["team"] in _ids(_search(live_server, w.agent_key, query="newsletter Friday"))


def test_peerless_credential_reads_public_statements_only(live_server, corpus):
    w, ids = corpus
    with account_context(w.account.id):
        _, key = services.credential_create(account_id=w.account.id, peer=None)
    r = _search(live_server, key, query="What does Alice lead or love?")
    assert r.json()["reader_posture"] == "public_only"
    assert set(_ids(r)) == {ids["public"]}


def test_hidden_matches_report_authorization_filtered_without_leaking(live_server, corpus):
    w, ids = corpus
    r = _search(live_server, w.agent_key, query="inhaler", peer_key="bob")
    body = r.json()
    assert body["candidates"] == [] or ids["asthma"] not in _ids(r)
    assert {"strategy": "lexical", "outcome": "candidate_filter",
            "reason_class": "authorization_filtered"} in body["retrieval_outcomes"]
    text = json.dumps(body)
    assert ids["asthma"] not in text and "asthma" not in text and "inhaler" not in text
    # A term that matches nothing at all is not an authorisation filter.
    body = _search(live_server, w.agent_key, query="xylophone", peer_key="bob").json()
    assert all(o["outcome"] != "candidate_filter" for o in body["retrieval_outcomes"])


def test_temporal_runs_only_with_as_of(live_server, corpus):
    w, ids = corpus
    body = _search(live_server, w.agent_key, query="Alice painted or support group",
                   peer_key="alice", as_of="2022-08-15T00:00:00Z").json()
    assert "temporal" in body["strategies"]["contributed"]
    temporal = [c for c in body["candidates"] if "temporal" in c["scores"]]
    best = max(temporal, key=lambda c: c["scores"]["temporal"]["raw"])
    assert best["id"] == ids["painting"]


def test_websearch_operators_switch_the_whole_query(live_server, corpus):
    w, ids = corpus
    r = _search(live_server, w.agent_key, query='"support group" -dog', peer_key="alice",
                profile="balanced")
    lexical_hits = [c["id"] for c in r.json()["candidates"] if "lexical" in c["scores"]]
    assert lexical_hits == [ids["support"]]
    r = _search(live_server, w.agent_key, query="hiking -dog", peer_key="alice")
    lexical_hits = [c["id"] for c in r.json()["candidates"] if "lexical" in c["scores"]]
    assert lexical_hits == [ids["bob_hike"]]


def test_thorough_reserves_rerank_and_reranks_model_free(live_server, corpus):
    w, _ = corpus  # no generation provider configured (tests/retrieval/test_rerank.py has one)
    body = _search(live_server, w.agent_key, query="Alice hiking", peer_key="alice",
                   profile="thorough", profile_defaults=True).json()
    assert body["profile"] == "thorough" and body["reserved_rerank_ms"] == 500
    assert body["rerank"]["status"] == "done" and body["rerank"]["reranker"] == "maxsim"
    assert body["deadline_ms"] == 1500
    names = (set(body["strategies"]["contributed"]) | set(body["strategies"]["empty"])
             | set(body["strategies"]["not_applicable"]))
    assert "relation_expand" in names and "salience_recency" in names
    # salience-recency never turns a text search into a recency page
    assert "salience_recency" in body["strategies"]["not_applicable"]


def test_relation_expand_follows_one_hop_inside_authorised_scopes(live_server, corpus):
    w, ids = corpus
    from knowledge.models import Relation

    with account_context(w.account.id):
        Relation.objects.create(account=w.account, source_id=ids["hiking"],
                                target_id=ids["public"], type="related")
        Relation.objects.create(account=w.account, source_id=ids["hiking"],
                                target_id=ids["paid"], type="related")  # sibling scope
    body = _search(live_server, w.agent_key, query="mountains dog", peer_key="alice",
                   profile="thorough").json()
    expanded = [c["id"] for c in body["candidates"] if "relation_expand" in c["scores"]]
    assert ids["public"] in expanded and ids["paid"] not in expanded


def test_scope_profile_inherits_nearest_wins(live_server, corpus):
    w, _ = corpus
    with account_context(w.account.id):
        Scope.objects.filter(path="/").update(settings={"retrieval_profile": "fast"})
        Scope.objects.filter(path="/marketing").update(
            settings={"retrieval_profile": "thorough",
                      "retrieval_profiles": {"thorough": {"rrf_k": 30}}})
    body = _search(live_server, w.agent_key, query="hiking").json()
    assert body["profile"] == "thorough" and body["profile_version"].startswith("thorough-v6+")
    body = _search(live_server, w.agent_key, query="hiking", scope="/").json()
    assert body["profile"] == "fast"


def test_minimal_profile_needs_its_flag_and_reports_lanes(live_server, corpus, settings):
    w, _ = corpus
    r = _search(live_server, w.agent_key, query="hiking", profile="minimal")
    assert r.status_code == 400 and r.json()["error"]["code"] == "profile_disabled"
    settings.MEMHOUSE_EXPERIMENTAL_MINIMAL_RECALL = True
    body = _search(live_server, w.agent_key, query="hiking", profile="minimal").json()
    assert body["profile"] == "minimal"
    lanes = [c["lane"] for c in body["candidates"] if "lane" in c]
    assert lanes and all(lane["lane"] in {"direct", "derived"} for lane in lanes)
    assert all("cosine_distance" in lane for lane in lanes)


def test_operator_allowlist_switches_a_strategy_off(live_server, corpus, settings):
    w, _ = corpus
    settings.MEMHOUSE_STRATEGY_ALLOWLIST = ["semantic", "temporal", "entity_match"]
    body = _search(live_server, w.agent_key, query="hiking").json()
    assert {"name": "lexical", "reason": "disabled"} in body["strategies"]["dropped"]
    assert all("lexical" not in c["scores"] for c in body["candidates"])


def test_expired_rows_are_hidden_before_the_sweeper_runs(live_server, corpus):
    w, ids = corpus
    with account_context(w.account.id):
        Knowledge.objects.filter(pk=ids["hiking"]).update(
            expires_at=datetime.now(UTC) - timedelta(seconds=1))
    assert ids["hiking"] not in _ids(_search(live_server, w.agent_key, query="hiking mountains",
                                             peer_key="alice"))


def test_vectors_of_another_space_are_never_used(live_server, corpus):
    w, _ = corpus
    from retrieval.models import EmbeddingSpace, KnowledgeVector

    with account_context(w.account.id):
        other = EmbeddingSpace.objects.create(provider="other", model="m", version="1", dims=384)
        new_id = _add(w, "Alice collects antique typewriters.")
        KnowledgeVector.objects.create(account=w.account, knowledge_id=new_id, space=other,
                                       embedding=[0.05] * 384)
    body = _search(live_server, w.agent_key, query="antique typewriters", peer_key="alice",
                   profile="fast").json()
    assert new_id not in [c["id"] for c in body["candidates"]]  # no vector in this space


def test_a_hanging_strategy_is_dropped_at_the_deadline_and_cancelled(live_server, corpus,
                                                                     monkeypatch):
    w, _ = corpus

    def hang(ctx):
        with connection.cursor() as cur:
            cur.execute("SELECT pg_sleep(10)")
        return StrategyResult("lexical")

    monkeypatch.setitem(engine.FIRST_STAGE, "lexical", hang)
    started = time.monotonic()
    body = _search(live_server, w.agent_key, query="hiking", deadline_ms=400).json()
    assert time.monotonic() - started < 3
    assert {"name": "lexical", "reason": "timeout"} in body["strategies"]["dropped"]
    assert "semantic" in body["strategies"]["contributed"]
    time.sleep(0.5)
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%%'"
                    " AND state = 'active'")
        assert cur.fetchone()[0] == 0  # the backend query was cancelled


@pytest.mark.parametrize(("body", "code"), [
    ({"query": "x", "peer_key": "ghost"}, "unknown_peer_key"),
    ({"query": "x", "strategies": ["lexical"]}, "strategy_override_forbidden"),
    ({"query": "x", "limit": 0}, "invalid_input"),
    ({"query": "x", "limit": 10_000}, "invalid_input"),
    ({"query": "x", "profile": "turbo"}, "unknown_profile"),
    ({"query": ""}, "invalid_input"),
    ({"query": "x", "as_of": "soon"}, "invalid_input"),
    ({"query": 'unbalanced "quote -'}, None),
])
def test_bad_search_input_is_a_clear_4xx(live_server, corpus, body, code):
    w, _ = corpus
    r = _search(live_server, w.agent_key, **body)
    if code is None:
        assert r.status_code == 200  # malformed websearch syntax degrades, never 500s
    else:
        assert r.status_code in (400, 404) and r.json()["error"]["code"] == code


def test_outsider_and_unauthorised_scopes_look_missing(live_server, corpus):
    w, _ = corpus
    r = _search(live_server, w.outsider_key, query="hiking", scope="/marketing/social")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_pagination_continues_the_same_fused_order(live_server, corpus):
    w, _ = corpus
    full = _ids(_search(live_server, w.agent_key, query="Alice team hiking", peer_key="alice",
                        limit=6))
    first = _search(live_server, w.agent_key, query="Alice team hiking", peer_key="alice",
                    limit=3)
    second = _search(live_server, w.agent_key, query="Alice team hiking", peer_key="alice",
                     limit=3, offset=3)
    assert _ids(first) + _ids(second) == full
    assert first.json()["page"]["next_offset"] == 3


def test_identity_profile_is_added_beside_the_ranking_without_changing_it(live_server, corpus):
    w, _ = corpus
    plain = _search(live_server, w.agent_key, query="Alice team hiking", peer_key="alice")
    with_profile = _search(live_server, w.agent_key, query="Alice team hiking",
                           peer_key="alice", include_identity_profile=True)
    assert _ids(plain) == _ids(with_profile)
    assert "identity_profile" not in plain.json()
    profile = with_profile.json()["identity_profile"]
    assert profile is not None and "entries" in profile


def test_lexical_coverage_weighs_rare_terms_above_a_name_found_everywhere(corpus):
    """Both statements cover one of the two terms; the rare word outranks the name that
    five visible statements share, although the name's statement is shorter (plain
    coverage would tie and cover density would then prefer the shorter one)."""
    from dataclasses import replace

    from memhouse.core.principal import internal_reader
    from retrieval.profiles import BASE_PROFILES

    w, _ids = corpus
    with account_context(w.account.id):
        oboe = _add(w, "Carol keeps an old oboe from her school band at home.",
                    subject="carol")
        short = _add(w, "Alice reads.")
    with account_context(w.account.id):  # strategies read committed rows on their own connections
        lexical_only = replace(BASE_PROFILES["balanced"], strategies=("lexical",),
                               weights={"lexical": 1.0}, deadline_ms=5000)
        res = engine.search(reader=internal_reader(w.account.id), scope=w.scope,
                            query="Alice oboe", profile=lexical_only, limit=10)
    ranked = [c["id"] for c in res.candidates]
    assert ranked[0] == oboe
    assert short in ranked and ranked.index(short) > ranked.index(oboe)


def _lexical_only(w, query, limit=10):
    from dataclasses import replace

    from memhouse.core.principal import internal_reader
    from retrieval.profiles import BASE_PROFILES

    profile = replace(BASE_PROFILES["balanced"], strategies=("lexical",),
                      weights={"lexical": 1.0}, deadline_ms=5000)
    with account_context(w.account.id):
        res = engine.search(reader=internal_reader(w.account.id), scope=w.scope, query=query,
                            profile=profile, limit=limit)
    return [c["id"] for c in res.candidates]


def test_lexical_pools_bound_a_common_term_but_keep_full_and_rare_matches(corpus, monkeypatch):
    """With the per-term pool cut to two rows, the name found in five statements
    contributes only two of them, yet the statement holding every term and the one
    holding the rare term are still ranked first."""
    from retrieval.strategies import lexical

    w, ids = corpus
    with account_context(w.account.id):
        both = _add(w, "Alice plays the oboe on Sundays.")
        rare = _add(w, "Carol keeps an old oboe at home.", subject="carol")
    unbounded = _lexical_only(w, "Alice oboe")
    monkeypatch.setattr(lexical, "POOL", 2)
    bounded = _lexical_only(w, "Alice oboe")
    assert bounded[:2] == [both, rare] == unbounded[:2]
    alice_rows = {ids[k] for k in ("support", "hiking", "asthma", "public", "painting")}
    assert len(alice_rows & set(unbounded)) == 5
    assert 0 < len(alice_rows & set(bounded)) <= 2


def test_visible_count_stops_at_its_cap(corpus, monkeypatch):
    from django.utils import timezone

    from memhouse.core.principal import internal_reader
    from retrieval.lexical import analyze
    from retrieval.strategies import sql
    from retrieval.strategies.base import StrategyContext

    w, _ = corpus
    with account_context(w.account.id):
        scope_ids = tuple(Scope.objects.filter(path__in=["/", "/marketing",
                                                         "/marketing/social"])
                          .values_list("id", flat=True))
        ctx = StrategyContext(reader=internal_reader(w.account.id), scope_ids=scope_ids,
                              query="x", lexical=analyze("x"), now=timezone.now(), limit=5)
        assert sql.visible_count(ctx) >= 6
        monkeypatch.setattr(sql, "COUNT_CAP", 3)
        assert sql.visible_count(ctx) == 3  # the test settings cache nothing (TTL 0)


def test_a_peer_readers_first_person_is_that_peer(committed_world):
    from knowledge.selectors import reader_for
    from memhouse.core.principal import Principal
    from retrieval.engine import for_the_reader

    w = committed_world
    with account_context(w.account.id):
        alice = reader_for(principal=Principal(account_id=w.account.id, peer=w.subject,
                                               via="session"))
        assert for_the_reader(alice, "Where do I work? Is my desk near me?") == (
            "Where do Alice work? Is Alice's desk near Alice?")
        assert for_the_reader(alice, "Where does Bob work?") == "Where does Bob work?"
        peerless = reader_for(principal=Principal(account_id=w.account.id, peer=None,
                                                  via="api_key"))
        assert for_the_reader(peerless, "Where do I work?") == "Where do I work?"
