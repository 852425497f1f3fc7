"""Thorough's listwise rerank over real HTTP, against the loopback fake OpenAI-compatible
server configured as the generation provider (tests.fake_llm.FakeOpenAI)."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest
from django.db.models import Sum

from knowledge.models import UsageEntry
from memhouse import observability as obs
from memhouse.core.tenancy import account_context
from retrieval.rerank import SCHEMA_NAME
from tests.fake_llm import FakeOpenAI, Reply, completion, ok
from tests.retrieval.test_search import _search, corpus  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)
QUESTION = "What does Alice like to do outdoors?"


@pytest.fixture
def model(fake_openai: FakeOpenAI) -> FakeOpenAI:
    """The provider keeps its default retries (2): the allowance must bound them."""
    return fake_openai


def _thorough(live_server, key, **body) -> dict:
    body.setdefault("query", QUESTION)
    body.setdefault("peer_key", "alice")
    body.setdefault("limit", 20)
    r = _search(live_server, key, profile="thorough", **body)
    assert r.status_code == 200, r.text
    return r.json()


def _ids(body: dict) -> list[str]:
    return [c["id"] for c in body["candidates"]]


def _fused(live_server, key, settings, **body) -> list[str]:
    """The fused order: the same search with thorough's rerank switched off."""
    from retrieval.profiles import BASE_PROFILES

    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(BASE_PROFILES, "thorough",
                      replace(BASE_PROFILES["thorough"], rerank=False))
        plain = _thorough(live_server, key, **body)
    assert plain["rerank"] == {"status": "not_requested"}
    return _ids(plain)


def _prompt(request: dict) -> dict:
    return json.loads(request["json"]["messages"][1]["content"])


def test_the_models_order_is_applied_to_the_head_and_the_tail_keeps_its_order(
        live_server, corpus, model, settings, monkeypatch):  # noqa: F811
    from retrieval.profiles import BASE_PROFILES

    monkeypatch.setitem(BASE_PROFILES, "thorough",
                        replace(BASE_PROFILES["thorough"], rerank_head=4))
    w, _ = corpus
    fused = _fused(live_server, w.agent_key, settings)
    assert len(fused) >= 6
    model.script = [ok({"order": ["S3", "S1", "S4"]})]
    body = _thorough(live_server, w.agent_key)
    # placed first in the model's order, then the head item it left out, then the tail
    assert _ids(body) == [fused[2], fused[0], fused[3], fused[1], *fused[4:]]
    assert [c["rank"] for c in body["candidates"]] == list(range(1, len(fused) + 1))
    assert body["rerank"]["status"] == "done" and body["rerank"]["head"] == 4
    assert body["rerank"]["moved"] == 4
    assert body["reserved_rerank_ms"] == 500
    (request,) = model.requests
    schema = request["json"]["response_format"]["json_schema"]
    assert schema["name"] == SCHEMA_NAME and schema["strict"] is True
    prompt = _prompt(request)
    assert prompt["question"] == QUESTION
    statements = {c["id"]: c["statement"] for c in body["candidates"]}
    assert prompt["statements"] == [{"id": f"S{n}", "statement": statements[i]}
                                    for n, i in enumerate(fused[:4], start=1)]


def test_invented_ids_are_ignored_and_nothing_hidden_gets_in(
        live_server, corpus, model, settings):  # noqa: F811
    w, ids = corpus
    query = "Does Alice have asthma or go hiking?"
    fused = _fused(live_server, w.agent_key, settings, query=query, peer_key="bob")
    assert ids["asthma"] not in fused  # Alice's personal statement, hidden from Bob
    # The model names the hidden statement's real id, ids never shown, and a repeat.
    model.script = [ok({"order": [ids["asthma"], "S99", str(uuid.uuid4()), " S2", "S2",
                                  ids["paid"], "s1"]})]
    body = _thorough(live_server, w.agent_key, query=query, peer_key="bob")
    assert body["rerank"]["status"] == "done"
    assert _ids(body) == [fused[1], fused[0], *fused[2:]]
    assert ids["asthma"] not in _ids(body) and ids["paid"] not in _ids(body)
    shown = " ".join(s["statement"] for s in _prompt(model.requests[0])["statements"])
    assert "inhaler" not in shown and "euros" not in shown  # never shown to the model


def test_a_model_slower_than_the_allowance_times_out_with_the_fused_order(
        live_server, corpus, model, settings):  # noqa: F811
    w, _ = corpus
    fused = _fused(live_server, w.agent_key, settings)
    model.script = [Reply(delay=1.5, body=completion(json.dumps({"order": ["S2", "S1"]})))]
    body = _thorough(live_server, w.agent_key)
    assert body["rerank"]["status"] == "timeout"
    assert _ids(body) == fused
    # bounded by the 500 ms allowance, not the 5 s per-attempt provider timeout or retries
    assert body["rerank"]["elapsed_ms"] < 1200
    assert len(model.requests) == 1


def test_the_allowance_is_a_scope_override_for_slower_models(live_server, corpus, model):  # noqa: F811
    from knowledge.models import Scope

    w, _ = corpus
    with account_context(w.account.id):
        Scope.objects.filter(path="/").update(settings={"retrieval_profiles": {"thorough": {
            "deadline_ms": 6000, "rerank_reserve_ms": 4000}}})
    model.script = [Reply(delay=1.5, body=completion(json.dumps({"order": ["S2", "S1"]})))]
    body = _thorough(live_server, w.agent_key, profile_defaults=True)  # the 6000 ms deadline
    assert body["reserved_rerank_ms"] == 4000
    assert body["rerank"]["status"] == "done"
    # An allowance that leaves the strategies no time is ignored, not obeyed.
    with account_context(w.account.id):
        Scope.objects.filter(path="/").update(settings={"retrieval_profiles": {"thorough": {
            "rerank_reserve_ms": 1500}}})
    model.script = [ok({"order": []})]
    assert _thorough(live_server, w.agent_key)["reserved_rerank_ms"] == 500


def test_a_provider_error_fails_the_rerank_and_keeps_the_fused_order(
        live_server, corpus, model, settings):  # noqa: F811
    w, _ = corpus
    fused = _fused(live_server, w.agent_key, settings)
    model.script = [Reply(500, {"error": {"message": "boom"}}), ok({"order": ["S2", "S1"]})]
    body = _thorough(live_server, w.agent_key)
    assert body["rerank"]["status"] == "failed"
    assert body["rerank"]["reason"] == "http_error"
    assert _ids(body) == fused
    # the retry's backoff (0.5 s) does not fit in the allowance: one request, no retry
    assert len(model.requests) == 1


def test_other_profiles_never_rerank(live_server, corpus, model):  # noqa: F811
    w, _ = corpus
    balanced = _search(live_server, w.agent_key, query=QUESTION, peer_key="alice").json()
    assert balanced["rerank"] == {"status": "not_requested"}
    assert balanced["reserved_rerank_ms"] == 0
    assert model.requests == []


def test_without_a_provider_maxsim_reorders_the_head_by_the_question(
        live_server, corpus, settings):  # noqa: F811
    w, ids = corpus
    query = "Who uses an inhaler?"
    fused = _fused(live_server, w.agent_key, settings, query=query)
    body = _thorough(live_server, w.agent_key, query=query)
    assert body["rerank"]["status"] == "done" and body["rerank"]["reranker"] == "maxsim"
    assert body["rerank"]["head"] == len(fused) and len(fused) >= 3
    assert sorted(_ids(body)) == sorted(fused)  # the same candidates, reordered
    assert _ids(body)[0] == ids["asthma"]  # "uses an inhaler" is read token by token
    assert body["rerank"]["moved"] > 0 and _ids(body) != fused, fused


def test_maxsim_reads_a_deeper_head_than_a_model_is_shown(
        live_server, corpus, model, settings, monkeypatch):  # noqa: F811
    """MaxSim costs no tokens, so it orders `maxsim_head` candidates; a configured model
    is still shown only `rerank_head`."""
    from retrieval.profiles import BASE_PROFILES

    monkeypatch.setitem(BASE_PROFILES, "thorough", replace(
        BASE_PROFILES["thorough"], rerank_head=2, maxsim_head=4))
    w, _ = corpus
    query = "Who uses an inhaler?"
    model.script = [ok({"order": ["S2", "S1"]})]
    body = _thorough(live_server, w.agent_key, query=query)
    assert body["rerank"]["reranker"] == "model" and body["rerank"]["head"] == 2
    assert len(_prompt(model.requests[0])["statements"]) == 2

    settings.MEMHOUSE_LLM_BASE_URL = ""
    fused = _fused(live_server, w.agent_key, settings, query=query)
    assert len(fused) >= 6
    body = _thorough(live_server, w.agent_key, query=query)
    assert body["rerank"]["reranker"] == "maxsim" and body["rerank"]["head"] == 4
    assert sorted(_ids(body)[:4]) == sorted(fused[:4])  # the head of 4, reordered
    assert _ids(body)[4:] == fused[4:]  # the tail keeps its fused order


class PooledOnly:
    """The shipped encoder behind the bare Embedder protocol: pooled vectors, no token
    embeddings (as an embedder of another runtime may be)."""

    def __init__(self, inner):
        self.inner = inner
        self.identity = inner.identity
        self.query_prefix = inner.query_prefix

    def embed_documents(self, texts, batch_size=64):
        return self.inner.embed_documents(texts, batch_size)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def test_without_a_provider_or_token_embeddings_rerank_is_skipped(
        live_server, corpus, settings, monkeypatch):  # noqa: F811
    from retrieval import embedding

    w, _ = corpus
    fused = _fused(live_server, w.agent_key, settings)
    monkeypatch.setattr(embedding, "_embedder", PooledOnly(embedding.get_embedder()))
    body = _thorough(live_server, w.agent_key)
    assert body["rerank"] == {"status": "skipped", "reason": "no_provider"}
    assert _ids(body) == fused


def test_the_rerank_call_is_metered_to_the_caller(live_server, corpus, model):  # noqa: F811
    w, _ = corpus
    before = obs.MODEL_CALLS.labels(SCHEMA_NAME, "ok")._value.get()
    body = completion(json.dumps({"order": ["S1"]}))
    body["usage"] = {"prompt_tokens": 200, "completion_tokens": 10, "total_tokens": 210}
    model.script = [Reply(body=body)]
    assert _thorough(live_server, w.agent_key)["rerank"]["status"] == "done"
    with account_context(w.account.id):
        rows = {r["kind"]: r["u"] for r in UsageEntry.objects.filter(
            kind__in=("model_call", "model_tokens")).values("kind").annotate(u=Sum("units"))}
        credentials = set(UsageEntry.objects.filter(kind="model_call")
                          .values_list("credential_id", flat=True))
    assert rows == {"model_call": 1, "model_tokens": 210}
    assert len(credentials) == 1 and None not in credentials  # the agent's credential
    assert obs.MODEL_CALLS.labels(SCHEMA_NAME, "ok")._value.get() == before + 1


def test_pages_continue_the_reranked_order(live_server, corpus, model):  # noqa: F811
    w, _ = corpus
    model.script = [ok({"order": ["S3", "S2", "S1"]}) for _ in range(3)]
    whole = _ids(_thorough(live_server, w.agent_key, limit=6))
    first = _ids(_thorough(live_server, w.agent_key, limit=3))
    second = _search(live_server, w.agent_key, profile="thorough", query=QUESTION,
                     peer_key="alice", limit=3, offset=3)
    assert first == whole[:3] and _ids(second.json()) == whole[3:6]


def test_a_shorter_request_deadline_shrinks_the_reservation_with_it(
        live_server, corpus, model):  # noqa: F811
    """A request's `deadline_ms` below the profile's keeps the reservation's share of it
    (500 of 1500 ms), so a slow model is cut off inside the deadline the caller asked for."""
    w, _ = corpus
    model.script = [Reply(delay=1.5, body=completion(json.dumps({"order": ["S2", "S1"]})))]
    body = _thorough(live_server, w.agent_key, deadline_ms=500)
    assert body["deadline_ms"] == 500 and body["reserved_rerank_ms"] == 166
    assert body["rerank"]["status"] == "timeout"
    assert body["rerank"]["elapsed_ms"] < 450  # the 166 ms allowance, not the 500 ms one
    # A longer deadline than the profile's leaves the reservation as it is.
    model.script = [ok({"order": ["S2", "S1"]})]
    body = _thorough(live_server, w.agent_key, deadline_ms=3000)
    assert body["deadline_ms"] == 3000 and body["reserved_rerank_ms"] == 500
    assert body["rerank"]["status"] == "done"


def test_a_deadline_too_short_for_any_rerank_skips_it_and_reserves_nothing(
        live_server, corpus, model):  # noqa: F811
    w, _ = corpus
    model.script = [ok({"order": ["S2", "S1"]})]
    body = _thorough(live_server, w.agent_key, deadline_ms=70)  # a 23 ms share
    assert body["reserved_rerank_ms"] == 0
    assert body["rerank"] == {"status": "skipped", "reason": "deadline"}
    assert model.requests == []  # no call the deadline could not wait for


def test_the_request_deadline_scales_a_scope_override_reservation_too():
    from retrieval.profiles import BASE_PROFILES, with_deadline

    thorough = replace(BASE_PROFILES["thorough"], deadline_ms=6000, rerank_reserve_ms=4000)
    assert with_deadline(thorough, 3000).rerank_reserve_ms == 2000
    assert with_deadline(thorough, 9000).rerank_reserve_ms == 4000
    balanced = with_deadline(BASE_PROFILES["balanced"], 50)
    assert balanced.deadline_ms == 50 and balanced.rerank_reserve_ms == 0


def test_maxsim_out_of_time_scores_the_prefix_it_encoded():
    import time

    import numpy as np

    from retrieval import rerank

    def slow(texts):  # 50 ms per encoder call, one 4-token matrix per text
        time.sleep(0.05)
        return [np.eye(4, 8) + len(t) for t in texts]

    rerank.token_cache.clear()
    statements = [f"statement {'x' * n}" for n in range(6)]
    encoder = ("slow-test", slow)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rerank, "ENCODE_BATCH", 2)
        # query at ~50 ms, first batch done at ~100 ms: the second batch starts too late
        scores = rerank.maxsim(encoder, "q", statements, ends=time.monotonic() + 0.08,
                               partial=True)
        assert [s is None for s in scores] == [False, False, True, True, True, True]
        rerank.token_cache.clear()
        with pytest.raises(TimeoutError):
            rerank.maxsim(encoder, "q", statements, ends=time.monotonic() + 0.08)
    rerank.token_cache.clear()


class SlowTokens(PooledOnly):
    """The shipped encoder whose token embeddings take 100 ms a call."""

    def embed_tokens(self, texts):
        import time

        time.sleep(0.1)
        return self.inner.embed_tokens(texts)


def test_maxsim_out_of_time_reorders_the_head_it_scored_and_keeps_the_rest(
        live_server, corpus, settings, monkeypatch):  # noqa: F811
    from retrieval import embedding, rerank

    w, _ = corpus
    query = "Who uses an inhaler?"
    fused = _fused(live_server, w.agent_key, settings, query=query)
    rerank.token_cache.clear()
    monkeypatch.setattr(embedding, "_embedder", SlowTokens(embedding.get_embedder()))
    monkeypatch.setattr(rerank, "ENCODE_BATCH", 1)
    body = _thorough(live_server, w.agent_key, query=query)  # 500 ms: about 4 statements
    rerank.token_cache.clear()
    got = body["rerank"]
    assert got["status"] == "done" and got["partial"] is True, got
    assert 2 <= got["head"] < got["of"] == min(len(fused), 40), fused
    assert got["elapsed_ms"] < 600  # 500 ms: no batch begun that would not end in time
    assert sorted(_ids(body)[:got["head"]]) == sorted(fused[:got["head"]])
    assert _ids(body)[got["head"]:] == fused[got["head"]:]  # the rest in fused order


def test_the_second_stage_reads_each_lists_rank_maxsim_and_the_question_terms():
    from retrieval.rerank import CROSS_WEIGHTS, FEATURE_NAMES, cross_features

    texts = {"a": "Alice uses an inhaler", "b": "Bob likes tea"}
    lists = {"lexical": [("a", 1.0)], "semantic": [("b", 0.5), ("a", 0.4)]}
    x = cross_features("Who uses an inhaler?", ["b", "a"], texts, lists, [0.3, 0.8])
    col = FEATURE_NAMES.index
    assert x[:, col("lexical_rr")].tolist() == [0.0, 1.0]
    assert x[:, col("semantic_rr")].tolist() == [1.0, 0.5]
    assert x[:, col("term_coverage")].tolist() == [0.0, 1.0]  # "use", "inhaler"
    assert x[:, col("maxsim")].tolist() == [0.3, 0.8]
    assert len(CROSS_WEIGHTS) == len(FEATURE_NAMES)
    score = x @ CROSS_WEIGHTS
    assert score[1] > score[0]  # the statement about the question rises above fused #1
