"""POST /api/v1/ask over real HTTP, against a real fake OpenAI-compatible server on
127.0.0.1 configured through Django settings."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import UTC, datetime

import httpx
import pytest

from knowledge import services
from knowledge.models import Message, Relation
from memhouse.core.tenancy import account_context
from retrieval import ask as ask_mod
from retrieval.vectors import embed_knowledge, embed_messages
from tests.fake_llm import FakeOpenAI, Reply, ok
from tests.retrieval.test_context import fake_model  # noqa: F401 - fixture
from tests.retrieval.test_search import _add, corpus  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)
QUESTION = "Where did Alice go for support?"


def _ask(live_server, key, **body) -> httpx.Response:
    body.setdefault("scope", "/marketing/social")
    return httpx.post(f"{live_server.url}/api/v1/ask", json=body,
                      headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _ok(r: httpx.Response) -> dict:
    assert r.status_code == 200, r.text
    return r.json()


def _answer(citations: list[str], confidence: int, text: str = "An answer.") -> Reply:
    return ok({"answer": text, "citations": citations, "answer_confidence": confidence})


def _user_payload(request: dict) -> dict:
    return json.loads(request["json"]["messages"][1]["content"])


# With a provider, ask's thorough search first reranks its fused head (retrieval.rerank,
# tested in test_rerank.py): one call whose empty order keeps the fused order.
RERANK_KEEPS_ORDER = ok({"order": []})


def _schema_name(request: dict) -> str:
    return request["json"]["response_format"]["json_schema"]["name"]


@pytest.fixture(autouse=True)
def _deadlines_independent_of_load(monkeypatch):
    """Which strategies answer in time must not depend on machine load: ask's evidence
    and relevance gate read their lists (the deadline itself is tested in test_search)."""
    from retrieval.profiles import BASE_PROFILES

    for name, profile in list(BASE_PROFILES.items()):
        monkeypatch.setitem(BASE_PROFILES, name, replace(profile, deadline_ms=10_000))


@pytest.fixture
def model(fake_model, settings):  # noqa: F811
    settings.MEMHOUSE_LLM_MAX_RETRIES = 0
    return fake_model


def test_a_model_answer_cites_only_retrieved_ids(live_server, corpus, model):  # noqa: F811
    w, ids = corpus
    invented = str(uuid.uuid4())
    model.script = [RERANK_KEEPS_ORDER,
                    _answer([ids["support"], invented, "S1", ids["paid"]], 82,
                            "Alice went to an LGBTQ support group.")]
    body = _ok(_ask(live_server, w.agent_key, query=QUESTION, peer_key="alice"))
    assert [c["id"] for c in body["citations"]] == [ids["support"]]  # invented ones dropped
    assert body["supporting_statements"] == ["Alice went to an LGBTQ support group."]
    assert body["answer"] == "Alice went to an LGBTQ support group."
    assert body["answer_confidence"] == 82 and body["abstained"] is False
    assert body["answer_degraded"] is None and body["profile"] == "thorough"
    assert [_schema_name(r) for r in model.requests] == ["search_rerank_v1", "ask_answer_v1"]
    request = model.requests[1]
    sent = [e["id"] for e in _user_payload(request)["evidence"]]
    candidates = [c["id"] for c in body["candidates"]]
    # The model sees the candidates about the question, in search order; the search
    # payload itself is unchanged.
    assert sent == [e["id"] for e in body["recall_evidence"]]
    assert sent == [c for c in candidates if c in sent] and ids["support"] in sent
    relevance = body["recall"]["relevance"]
    assert relevance["surviving"] == len(sent)
    assert relevance["dropped"] == len(candidates) - len(sent)
    assert ids["asthma"] in candidates  # alice's own row is hers to read
    assert ids["paid"] not in candidates and ids["bob_prov"] not in candidates
    assert all(e["origin"] == "base" for e in body["recall_evidence"])


def test_only_invented_citations_mean_an_empty_abstention(live_server, corpus,  # noqa: F811
                                                          model):
    w, _ = corpus
    model.script = [RERANK_KEEPS_ORDER,
                    _answer([str(uuid.uuid4()), "made-up"], 95, "Alice went to Mars.")]
    body = _ok(_ask(live_server, w.agent_key, query=QUESTION, peer_key="alice"))
    assert body["citations"] == [] and body["supporting_statements"] == []
    assert body["abstained"] is True and body["answer_confidence"] == 0
    assert body["answer"] is None and "Mars" not in json.dumps(body)
    assert body["abstention_reason"] == "no_supported_citation"


def test_low_confidence_abstains_but_keeps_its_citations(live_server, corpus,  # noqa: F811
                                                         model):
    w, ids = corpus
    model.script = [RERANK_KEEPS_ORDER, _answer([ids["support"]], 30, "Possibly a support group.")]
    body = _ok(_ask(live_server, w.agent_key, query=QUESTION, peer_key="alice"))
    assert body["answer_confidence"] == 30 and body["abstained"] is True
    assert [c["id"] for c in body["citations"]] == [ids["support"]]
    assert body["answer"] == "Possibly a support group." and body["answer_degraded"] is None


def test_a_provider_failure_degrades_the_answer(live_server, corpus, model):  # noqa: F811
    w, _ = corpus
    model.script = [RERANK_KEEPS_ORDER, Reply(500, {"error": {"message": "boom"}})]
    body = _ok(_ask(live_server, w.agent_key, query=QUESTION, peer_key="alice"))
    assert body["answer_degraded"] == "http_error"
    assert body["abstained"] is True and body["answer_confidence"] == 0
    assert "failed" in body["answer"]
    sent = {e["id"] for e in body["recall_evidence"]}
    kept = [c for c in body["candidates"] if c["id"] in sent]
    assert [c["id"] for c in body["citations"]] == [c["id"] for c in kept]
    assert body["supporting_statements"] == [c["statement"] for c in kept]
    assert body["citations"]


def test_a_timeout_is_named_too(live_server, corpus, model, settings):  # noqa: F811
    w, _ = corpus
    settings.MEMHOUSE_LLM_TIMEOUT = 0.3
    model.script = [RERANK_KEEPS_ORDER, Reply(delay=1.0, body={})]
    body = _ok(_ask(live_server, w.agent_key, query=QUESTION, peer_key="alice"))
    assert body["answer_degraded"] == "timeout" and body["abstained"] is True


def test_empty_candidates_abstain_without_a_model_call(live_server, corpus, model):  # noqa: F811
    w, _ = corpus
    with account_context(w.account.id):
        services.scope_ensure(account_id=w.account.id, path="/engineering")
    body = _ok(_ask(live_server, w.agent_key, query=QUESTION, scope="/engineering"))
    assert body["candidates"] == [] and body["citations"] == []
    assert body["abstained"] is True and body["answer_confidence"] == 0
    assert body["abstention_reason"] == "no_candidates"
    assert model.requests == []


def test_without_a_provider_the_best_statement_answers_with_its_date(live_server, corpus,  # noqa: F811
                                                                      settings):
    w, ids = corpus
    settings.MEMHOUSE_LLM_BASE_URL = ""
    body = _ok(_ask(live_server, w.agent_key, query=QUESTION, peer_key="alice"))
    assert body["candidates"][0]["id"] == ids["support"]
    # One line, dated by its valid time, cited; not the top three pasted together.
    assert body["answer"] == "[7 May 2023] Alice went to an LGBTQ support group."
    assert [c["id"] for c in body["citations"]] == [ids["support"]]
    assert body["citations"][0]["when"] == "7 May 2023"
    assert body["answer_confidence"] == 40 and body["abstained"] is False
    assert body["answer_degraded"] is None
    assert body["supporting_statements"] == ["Alice went to an LGBTQ support group."]


def test_fixed_ask_retrieves_with_thorough_whatever_the_scope_searches_with(
        live_server, corpus, settings):  # noqa: F811
    from knowledge.models import Scope

    w, _ = corpus
    settings.MEMHOUSE_LLM_BASE_URL = ""
    with account_context(w.account.id):
        Scope.objects.filter(path="/").update(settings={"retrieval_profile": "fast"})
    body = _ok(_ask(live_server, w.agent_key, query=QUESTION, peer_key="alice"))
    assert body["profile"] == "thorough"


@pytest.fixture
def garden(corpus):  # noqa: F811
    """More garden statements than one 12-item page, a sourced stable fact and a relation
    from every garden statement to an otherwise unrelated one."""
    w, ids = corpus
    plants = ["tomatoes", "basil", "roses", "lavender", "peppers", "mint", "tulips",
              "strawberries", "courgettes", "sunflowers", "rosemary", "lettuce", "beans",
              "dahlias"]
    with account_context(w.account.id):
        ids["garden"] = [_add(w, f"Alice grows {p} in her garden.") for p in plants]
        m = Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                   text="I work as an architect in Lisbon.",
                                   occurred_at=datetime.now(UTC))
        ids["architect_msg"] = str(m.id)
        ids["architect"] = _add(w, "Alice works as an architect in Lisbon.",
                                sources=[{"message": m, "excerpt": "architect in Lisbon"}])
        ids["grandmother"] = _add(w, "Alice's grandmother was a schoolteacher in Braga.")
        for g in ids["garden"]:
            Relation.objects.create(account=w.account, source_id=g,
                                    target_id=ids["grandmother"], type="related")
        m2 = Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                    text="My asthma flares up at work sometimes.",
                                    occurred_at=datetime.now(UTC))
        ids["asthma_msg"] = str(m2.id)
        ids["asthma_at_work"] = _add(w, "Alice's asthma flares up at work.",
                                     sensitivity="personal",
                                     sources=[{"message": m2,
                                               "excerpt": "asthma flares up at work"}])
    # Every active statement has a vector in a running deployment; ask's relevance gate
    # reads the similarity, so these are embedded like the corpus's.
    embed_knowledge(w.account.id, [*ids["garden"], ids["architect"], ids["grandmother"],
                                   ids["asthma_at_work"]])
    embed_messages(w.account.id, [ids["architect_msg"], ids["asthma_msg"]])  # as intake does
    return w, ids


GARDEN_Q = "What grows in Alice's garden?"


def _check_shape(body: dict, retain: int) -> list[dict]:
    evidence = body["recall_evidence"]
    base = [c["id"] for c in body["candidates"]]
    assert len(base) == 12 and len(evidence) <= 12
    assert [e["id"] for e in evidence[:retain]] == base[:retain]
    assert [e["base_rank"] for e in evidence[:retain]] == list(range(1, retain + 1))
    new = [e for e in evidence if e["origin"] != "base"]
    assert new and all(e["id"] not in base for e in new)  # the whole page was reserved
    # new tool evidence comes before any refill from the base tail
    tail = [i for i, e in enumerate(evidence) if e["origin"] == "base" and i >= retain]
    assert all(i > max(evidence.index(e) for e in new) for i in tail)
    assert [e["rank"] for e in evidence] == list(range(1, len(evidence) + 1))
    return new


@pytest.mark.parametrize(("effort", "retain"), [("low", 11), ("medium", 8), ("high", 6)])
def test_effort_presets_keep_their_head_and_reserve_new_slots(live_server, garden,
                                                              settings, effort, retain):
    w, ids = garden
    settings.MEMHOUSE_LLM_BASE_URL = ""  # deterministic planner
    body = _ok(_ask(live_server, w.agent_key, query=GARDEN_Q, peer_key="alice",
                    effort=effort))
    new = _check_shape(body, retain)
    recall = body["recall"]
    assert recall["planner"] == "deterministic" and recall["tool_profile"] == "thorough"
    assert recall["retained_head"] == retain
    assert recall["used"]["tool_calls"] <= recall["budgets"]["tool_calls"]
    assert recall["used"]["planner_calls"] == 0
    assert all(c["profile"] == "thorough" for c in recall["tool_calls"]
               if c["tool"] == "knowledge_search")
    assert "source_exact" not in recall["tools"]  # not without include_source_recall
    if effort == "high":
        origins = {e["id"]: e["origin"] for e in new}
        assert origins.get(ids["architect"]) == "stable_profile"
        assert origins.get(ids["grandmother"]) == "lineage"
    assert body["answer"] is not None and body["answer_confidence"] == 40


def test_a_model_planner_runs_within_its_closed_tool_set(live_server, garden,
                                                         model):
    w, ids = garden
    model.script = [
        RERANK_KEEPS_ORDER,
        ok({"steps": [{"tool": "stable_profile", "query": ""}], "done": True}),
        _answer([ids["architect"]], 70, "Alice is an architect."),
    ]
    body = _ok(_ask(live_server, w.agent_key, query="What does Alice do for a living?",
                    peer_key="alice", effort="medium"))
    plan_request = model.requests[1]["json"]
    schema = plan_request["response_format"]["json_schema"]
    assert schema["name"] == "ask_plan_v1"
    assert schema["schema"]["properties"]["steps"]["items"]["properties"]["tool"]["enum"] == [
        "knowledge_search", "stable_profile", "lineage"]
    recall = body["recall"]
    assert recall["planner"] == "model" and recall["used"]["planner_calls"] == 1
    assert recall["used"]["tool_calls"] == 1
    assert [c["id"] for c in body["citations"]] == [ids["architect"]]
    assert body["answer_confidence"] == 70 and not body["abstained"]
    answered = [e["id"] for e in _user_payload(model.requests[2])["evidence"]]
    assert answered == [e["id"] for e in body["recall_evidence"]]


def test_source_tools_join_only_with_include_source_recall(live_server, garden,
                                                           model):
    w, ids = garden
    model.script = [
        RERANK_KEEPS_ORDER,
        ok({"steps": [{"tool": "source_exact", "query": "architect Lisbon"}], "done": True}),
        _answer([ids["architect_msg"]], 65, "She said she works as an architect."),
    ]
    body = _ok(_ask(live_server, w.agent_key, query="What does Alice do for a living?",
                    peer_key="alice", effort="low", include_source_recall=True))
    enum = model.requests[1]["json"]["response_format"]["json_schema"]["schema"][
        "properties"]["steps"]["items"]["properties"]["tool"]["enum"]
    assert enum == ["knowledge_search", "stable_profile", "lineage", "source_exact",
                    "source_semantic"]
    cited = body["citations"]
    assert [c["id"] for c in cited] == [ids["architect_msg"]]
    assert cited[0]["type"] == "source_message" and "architect" in cited[0]["excerpt"]


def test_source_recall_never_returns_a_message_with_hidden_derived_content(
        live_server, garden, settings, monkeypatch):
    from retrieval.profiles import BASE_PROFILES

    w, ids = garden
    settings.MEMHOUSE_LLM_BASE_URL = ""
    # What is under test is which messages the lane may return, not the rerank: a MaxSim
    # cut short by a loaded machine (a partial head) changes which evidence fills the
    # slots, so the fused order is pinned here.
    monkeypatch.setitem(BASE_PROFILES, "thorough",
                        replace(BASE_PROFILES["thorough"], rerank=False))
    q = "Where does Alice work and what happens at work?"
    alice = _ok(_ask(live_server, w.agent_key, query=q, peer_key="alice", effort="high",
                     include_source_recall=True))
    found = {e["id"]: e for e in alice["recall_evidence"]}
    assert found[ids["architect_msg"]]["type"] == "source_message"
    assert ids["asthma_msg"] in found  # her own words
    bob = _ok(_ask(live_server, w.agent_key, query=q, peer_key="bob", effort="high",
                   include_source_recall=True))
    assert ids["asthma_msg"] not in json.dumps(bob) and "flares" not in json.dumps(bob)
    assert ids["architect_msg"] in {e["id"] for e in bob["recall_evidence"]}


def test_the_evidence_token_ceiling_is_enforced(live_server, garden, settings,
                                                monkeypatch):
    w, _ = garden
    settings.MEMHOUSE_LLM_BASE_URL = ""
    monkeypatch.setitem(ask_mod.PRESETS, "medium",
                        replace(ask_mod.PRESETS["medium"], evidence_tokens=90, query_tokens=2))
    body = _ok(_ask(live_server, w.agent_key, query=GARDEN_Q, peer_key="alice",
                    effort="medium"))
    recall = body["recall"]
    assert {"evidence_tokens", "query_tokens"} <= set(recall["exhausted"])
    assert sum(e["tokens"] for e in body["recall_evidence"]) <= 90
    assert recall["used"]["evidence_tokens"] <= 90
    assert all(c["query_tokens"] <= 2 for c in recall["tool_calls"])


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"query": ""}, 400, "invalid_input"),
    ({"query": "x", "effort": "extreme"}, 400, "invalid_input"),
    ({"query": "x", "include_source_recall": "maybe"}, 400, "invalid_input"),
    ({"query": "x", "peer_key": "ghost"}, 400, "unknown_peer_key"),
    ({"query": "x", "scope": "/nowhere"}, 404, "not_found"),
    ({"query": "x", "strategies": ["lexical"]}, 400, "strategy_override_forbidden"),
])
def test_bad_ask_input_is_a_clear_4xx(live_server, corpus, settings, body, status,  # noqa: F811
                                      code):
    w, _ = corpus
    settings.MEMHOUSE_LLM_BASE_URL = ""
    r = _ask(live_server, w.agent_key, **body)
    assert r.status_code == status and r.json()["error"]["code"] == code


def test_outsider_gets_404(live_server, corpus, model):  # noqa: F811
    w, _ = corpus
    r = _ask(live_server, w.outsider_key, query=QUESTION)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert model.requests == []


def test_fake_server_is_loopback(model: FakeOpenAI) -> None:
    assert model.base_url.startswith("http://127.0.0.1:")


# --- relevance: ask abstains on questions the memory holds nothing about ------------------

@pytest.mark.parametrize("query", ["What is the capital of France?", "zxqv blorf",
                                   "How do I reset a Cisco router to factory settings?"])
def test_an_unrelated_question_is_an_empty_abstention(live_server, corpus, settings, query):  # noqa: F811
    w, _ = corpus
    settings.MEMHOUSE_LLM_BASE_URL = ""
    body = _ok(_ask(live_server, w.agent_key, query=query, peer_key="alice"))
    assert body["candidates"]  # nearest neighbours exist ...
    assert body["abstained"] is True and body["answer_confidence"] == 0  # ... but are no answer
    assert body["abstention_reason"] == "no_relevant_evidence"
    assert body["citations"] == [] and body["answer"] is None
    relevance = body["recall"]["relevance"]
    assert relevance["basis"] == "semantic" and relevance["surviving"] == 0
    assert relevance["top_similarity"] < relevance["min_similarity"]


def test_an_unrelated_question_costs_no_answer_call(live_server, corpus, model):  # noqa: F811
    w, _ = corpus
    model.script = [RERANK_KEEPS_ORDER, _answer([], 90)]
    body = _ok(_ask(live_server, w.agent_key, query="What is the capital of France?",
                    peer_key="alice", effort="medium"))
    assert body["abstention_reason"] == "no_relevant_evidence"
    # The relevance gate ran before the thorough search's rerank: no rerank, no planner,
    # no answer call - no model call at all.
    assert body["model_called"] is False
    assert model.requests == []
    assert body["retrieval"]["rerank"] == {"status": "skipped",
                                           "reason": "no_relevant_evidence"}
    assert body["recall"]["planner"] is None  # no planning over unrelated statements


def test_a_question_about_the_memory_is_still_reranked_by_the_model(live_server, corpus,  # noqa: F811
                                                                     model):
    w, _ = corpus
    model.script = [RERANK_KEEPS_ORDER, _answer([], 90)]
    body = _ok(_ask(live_server, w.agent_key, query="Where does Alice like to go hiking?",
                    peer_key="alice"))
    assert [_schema_name(r) for r in model.requests][:1] == ["search_rerank_v1"]
    assert body["retrieval"]["rerank"]["reranker"] == "model"


def test_a_question_about_the_memory_still_gets_its_answer(live_server, corpus, settings):  # noqa: F811
    w, ids = corpus
    settings.MEMHOUSE_LLM_BASE_URL = ""
    body = _ok(_ask(live_server, w.agent_key, query="Where does Alice like to go hiking?",
                    peer_key="alice"))
    assert body["abstained"] is False and body["answer_confidence"] == 40
    assert ids["hiking"] in [c["id"] for c in body["citations"]]


def test_the_floor_is_a_setting_and_zero_turns_it_off(live_server, corpus, settings):  # noqa: F811
    w, _ = corpus
    settings.MEMHOUSE_LLM_BASE_URL = ""
    settings.MEMHOUSE_ASK_MIN_SIMILARITY = 0
    body = _ok(_ask(live_server, w.agent_key, query="What is the capital of France?",
                    peer_key="alice"))
    assert body["abstained"] is False and body["recall"]["relevance"]["basis"] == "disabled"
    # Grounded: the best line, then only lines as much about the question as it is.
    assert 1 <= len(body["citations"]) <= 3
    assert body["citations"][0]["id"] == body["candidates"][0]["id"]
