"""memhouse.core.llm against the fake OpenAI-compatible HTTP server on 127.0.0.1
(tests.fake_llm)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memhouse.core import llm
from memhouse.core.llm import (
    ERROR_KINDS,
    ChatProvider,
    OpenAICompatibleProvider,
    ProviderError,
    SchemaValidationError,
    validate_json,
)
from tests.fake_llm import FakeOpenAI, Reply, completion, ok

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["answer", "score"],
    "properties": {
        "answer": {"type": "string"},
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
    },
}
GOOD = {"answer": "forty-two", "score": 7}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def call(provider: OpenAICompatibleProvider, **kwargs: Any) -> dict[str, Any]:
    return provider.complete_json(system="You answer.", user="What is it?", schema=SCHEMA,
                                  schema_name="answer_v1", **kwargs)


# ------------------------------------------------------------------------------------------
# Happy path and request shape
# ------------------------------------------------------------------------------------------


def test_valid_answer_and_exact_request(fake: FakeOpenAI) -> None:
    fake.script = [ok(GOOD)]
    provider = fake.provider()
    assert isinstance(provider, ChatProvider)

    assert call(provider) == GOOD

    assert len(fake.requests) == 1
    request = fake.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer sk-test-123"
    assert request["headers"]["content-type"].startswith("application/json")
    body = request["json"]
    assert body["model"] == "test-model"
    assert body["temperature"] == 0
    assert body["messages"] == [
        {"role": "system", "content": "You answer."},
        {"role": "user", "content": "What is it?"},
    ]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer_v1", "strict": True, "schema": SCHEMA},
    }


# ------------------------------------------------------------------------------------------
# Response format negotiation
# ------------------------------------------------------------------------------------------

SCHEMA_TEXT = json.dumps(SCHEMA, separators=(",", ":"))


def test_a_server_without_json_schema_gets_json_mode_with_the_schema_and_is_remembered() -> None:
    # llama-cpp-python's server: json_schema refused (HTTP 500 naming it), json_object with
    # a "schema" member taken (it becomes a grammar).
    with FakeOpenAI(structured="json_object") as fake:
        fake.script = [ok(GOOD)]
        provider = fake.provider(max_retries=0)  # the refusal costs no retry
        assert provider.response_format == "json_schema"
        assert llm.structured_output(fake.base_url) is None
        assert call(provider) == GOOD
        assert fake.response_formats() == ["json_schema", "json_object"]
        second = fake.requests[1]["json"]
        assert second["response_format"] == {"type": "json_object", "schema": SCHEMA}
        system = second["messages"][0]["content"]
        assert system.startswith("You answer.") and SCHEMA_TEXT in system
        assert second["messages"][1] == {"role": "user", "content": "What is it?"}
        # Remembered for this base URL: the next call (any provider object) asks that way.
        assert llm.structured_output(fake.base_url + "/") == "json_object_schema"
        fake.script = [ok(GOOD)]
        again = fake.provider()
        assert again.response_format == "json_object_schema"
        assert call(again) == GOOD
        assert fake.response_formats() == ["json_schema", "json_object", "json_object"]


def test_a_server_refusing_the_schema_member_gets_plain_json_mode(fake: FakeOpenAI) -> None:
    # A strict validator (FastAPI's 422 shape) that takes json_object but no extra member.
    fake.script = [
        Reply(400, {"error": {"message": "response_format.type 'json_schema' is unsupported"}}),
        Reply(422, {"detail": [{"loc": ["body", "response_format", "schema"],
                                "msg": "Extra inputs are not permitted"}]}),
        ok(GOOD)]
    assert call(fake.provider(max_retries=0)) == GOOD
    third = fake.requests[2]["json"]
    assert third["response_format"] == {"type": "json_object"}
    assert SCHEMA_TEXT in third["messages"][0]["content"]
    assert llm.structured_output(fake.base_url) == "json_object"


def test_a_server_with_no_structured_output_fails_clearly_and_is_remembered() -> None:
    with FakeOpenAI(structured="none") as fake:
        fake.script = [ok(GOOD)]
        with pytest.raises(ProviderError) as caught:
            call(fake.provider(max_retries=2))
        error = caught.value
        assert (error.kind, error.status_code, error.retryable) == ("http_error", 500, False)
        assert error.unsupported
        assert "takes no structured output" in str(error)
        assert "json_schema, json_object_schema, json_object" in str(error)
        assert error.attempts == 3 and len(fake.requests) == 3  # one per rung, no retries
        assert fake.script == [ok(GOOD)]  # nothing was answered
        assert llm.structured_output(fake.base_url) == "unsupported"
        # The server is upgraded behind the same URL: the next call negotiates again.
        fake.structured = "json_schema"
        assert call(fake.provider()) == GOOD
        assert llm.structured_output(fake.base_url) == "json_schema"


def test_a_remembered_lower_rung_that_is_refused_later_tries_the_upper_ones(
        fake: FakeOpenAI) -> None:
    fake.script = [Reply(500, {"error": {"message": "response_format json_schema: no"}}),
                   ok(GOOD)]
    assert call(fake.provider()) == GOOD
    assert llm.structured_output(fake.base_url) == "json_object_schema"
    # The server behind the URL now takes json_schema and refuses JSON mode.
    fake.script = [Reply(400, {"error": {"message": "json_object response format removed"}}),
                   ok(GOOD)]
    assert call(fake.provider(max_retries=0)) == GOOD
    assert fake.response_formats()[2:] == ["json_object", "json_schema"]
    assert llm.structured_output(fake.base_url) == "json_schema"


def test_an_answer_that_breaks_the_schema_is_refused_in_json_mode_too() -> None:
    with FakeOpenAI(structured="json_object") as fake:
        fake.script = [ok({"unexpected": 1}), ok({"answer": "x", "score": 99}), ok(GOOD)]
        with pytest.raises(ProviderError) as caught:
            call(fake.provider(max_retries=1))
        assert caught.value.kind == "invalid_response" and caught.value.attempts == 3
        assert fake.response_formats() == ["json_schema", "json_object", "json_object"]
        # The server took the format even though the model's answers were wrong.
        assert llm.structured_output(fake.base_url) == "json_object_schema"


def test_the_schema_sent_as_a_grammar_leaves_out_huge_size_bounds() -> None:
    # llama.cpp refuses grammars with more than 2000 repetitions (llama-cpp-python then
    # crashes): the hint drops such bounds, the answer is still checked against them.
    schema = {"type": "object", "additionalProperties": False, "required": ["answer"],
              "properties": {"answer": {"type": "string", "maxLength": 4000},
                             "tags": {"type": "array", "maxItems": 24,
                                      "items": {"type": "string", "maxLength": 100}}}}
    with FakeOpenAI(structured="json_object") as fake:
        fake.script = [ok({"answer": "x" * 4001}), ok({"answer": "fine"})]
        provider = fake.provider(max_retries=1, max_tokens=300)
        assert provider.complete_json(system="s", user="u", schema=schema,
                                      schema_name="answer_v1") == {"answer": "fine"}
        hint = fake.requests[1]["json"]["response_format"]["schema"]
        assert "maxLength" not in hint["properties"]["answer"]
        assert hint["properties"]["tags"]["maxItems"] == 24  # small bounds stay
        assert hint["properties"]["tags"]["items"]["maxLength"] == 100
        assert schema["properties"]["answer"]["maxLength"] == 4000  # the caller's is intact
        assert [r["json"]["max_tokens"] for r in fake.requests] == [300, 300, 300]
    with FakeOpenAI() as fake:
        fake.script = [ok(GOOD)]
        call(fake.provider())
        assert "max_tokens" not in fake.requests[0]["json"]  # not sent unless configured


def test_an_unrelated_server_error_is_no_refusal(fake: FakeOpenAI) -> None:
    fake.script = [Reply(500, {"error": {"message": "CUDA out of memory"}}), ok(GOOD)]
    assert call(fake.provider()) == GOOD
    assert fake.response_formats() == ["json_schema", "json_schema"]  # a plain retry
    assert llm.structured_output(fake.base_url) == "json_schema"


def test_negotiation_is_metered_as_one_call_with_every_request(fake: FakeOpenAI) -> None:
    from memhouse import observability as obs

    def calls(outcome: str) -> float:
        return float(obs.MODEL_CALLS.labels("answer_v1", outcome)._value.get())

    before = calls("ok")
    fake.structured = "json_object"
    fake.script = [ok(GOOD)]
    assert call(fake.provider()) == GOOD
    assert calls("ok") == before + 1


def test_the_probe_finds_the_format_with_a_tiny_call() -> None:
    with FakeOpenAI(structured="json_object") as fake:
        fake.script = [ok({"ok": True})]
        assert fake.provider(max_retries=3).probe() == "json_object_schema"
        assert fake.response_formats() == ["json_schema", "json_object"]
        assert all(r["json"]["max_tokens"] == llm.PROBE_MAX_TOKENS for r in fake.requests)
        assert fake.requests[0]["json"]["response_format"]["json_schema"]["name"] == \
            llm.PROBE_PURPOSE
    with FakeOpenAI(structured="json_schema") as fake:
        # A model that answers the probe wrongly still shows the server takes the format.
        fake.script = [ok({"ok": "yes please"})]
        assert fake.provider(max_retries=3).probe() == "json_schema"
        assert len(fake.requests) == 1  # no retries for a probe
    with FakeOpenAI(structured="none") as fake:
        assert fake.provider().probe() == "unsupported"
    with FakeOpenAI() as fake:
        fake.script = [Reply(401, {"error": {"message": "invalid key"}})]
        with pytest.raises(ProviderError) as caught:
            fake.provider().probe()
        assert caught.value.status_code == 401


def test_no_authorization_header_without_key(fake: FakeOpenAI) -> None:
    fake.script = [ok(GOOD)]
    assert call(fake.provider(api_key=None)) == GOOD
    assert "authorization" not in fake.requests[0]["headers"]


def test_trailing_slash_in_base_url(fake: FakeOpenAI) -> None:
    fake.script = [ok(GOOD)]
    provider = OpenAICompatibleProvider(fake.base_url + "/", "test-model", backoff_seconds=0)
    assert call(provider) == GOOD
    assert fake.requests[0]["path"] == "/v1/chat/completions"


def test_code_fenced_content_is_accepted(fake: FakeOpenAI) -> None:
    fake.script = [Reply(body=completion("```json\n" + json.dumps(GOOD) + "\n```"))]
    assert call(fake.provider()) == GOOD


def test_repr_never_shows_the_key(fake: FakeOpenAI) -> None:
    assert "sk-test-123" not in repr(fake.provider())


# ------------------------------------------------------------------------------------------
# Retries
# ------------------------------------------------------------------------------------------


def test_invalid_json_then_valid_is_retried(fake: FakeOpenAI) -> None:
    fake.script = [Reply(body=completion("{not json")), ok(GOOD)]
    assert call(fake.provider()) == GOOD
    assert len(fake.requests) == 2


def test_schema_violation_then_valid_is_retried(fake: FakeOpenAI) -> None:
    fake.script = [ok({"answer": "x", "score": 11}), ok({"answer": "x"}),
                   ok({"answer": "x", "score": 1, "extra": True}), ok(GOOD)]
    assert call(fake.provider(max_retries=3)) == GOOD
    assert len(fake.requests) == 4


def test_server_error_then_valid_is_retried(fake: FakeOpenAI) -> None:
    fake.script = [Reply(500, {"error": {"message": "boom"}}), ok(GOOD)]
    assert call(fake.provider()) == GOOD
    assert len(fake.requests) == 2


def test_rate_limit_then_valid_is_retried(fake: FakeOpenAI) -> None:
    fake.script = [Reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0"}),
                   ok(GOOD)]
    assert call(fake.provider()) == GOOD
    assert len(fake.requests) == 2


def test_client_error_is_not_retried(fake: FakeOpenAI) -> None:
    fake.script = [Reply(400, {"error": {"message": "bad schema, sk-test-123 is not echoed"}}),
                   ok(GOOD)]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider())
    error = caught.value
    assert error.kind == "http_error"
    assert error.status_code == 400
    assert error.attempts == 1
    assert len(fake.requests) == 1
    assert "HTTP 400" in str(error)


def test_unauthorized_is_not_retried(fake: FakeOpenAI) -> None:
    fake.script = [Reply(401, {"error": {"message": "invalid key"}}), ok(GOOD)]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider())
    assert (caught.value.kind, caught.value.status_code) == ("http_error", 401)
    assert len(fake.requests) == 1


def test_server_errors_exhaust_retries(fake: FakeOpenAI) -> None:
    fake.script = [Reply(503, {}), Reply(502, {}), Reply(500, {}), ok(GOOD)]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(max_retries=2))
    assert caught.value.kind == "http_error"
    assert caught.value.status_code == 500
    assert caught.value.attempts == 3
    assert len(fake.requests) == 3


def test_invalid_answers_exhaust_retries(fake: FakeOpenAI) -> None:
    fake.script = [Reply(body=completion("nope")) for _ in range(3)] + [ok(GOOD)]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(max_retries=2))
    assert caught.value.kind == "invalid_response"
    assert len(fake.requests) == 3


def test_no_retries_when_max_retries_is_zero(fake: FakeOpenAI) -> None:
    fake.script = [Reply(500, {}), ok(GOOD)]
    with pytest.raises(ProviderError):
        call(fake.provider(max_retries=0))
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [
        Reply(body="<html>not json</html>"),
        Reply(body={"choices": []}),
        Reply(body={"choices": [{"message": {"role": "assistant", "content": None,
                                             "refusal": "I can't help with that"}}]}),
        Reply(body=completion("[1, 2, 3]")),
        Reply(body=completion('{"answer": "x", "score": NaN}')),
    ],
    ids=["html-body", "no-choices", "refusal", "not-an-object", "nan"],
)
def test_malformed_responses_are_invalid_response(fake: FakeOpenAI, reply: Reply) -> None:
    fake.script = [reply]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(max_retries=0))
    assert caught.value.kind == "invalid_response"


def test_slow_response_times_out_and_is_retried(fake: FakeOpenAI) -> None:
    fake.script = [Reply(body=completion(json.dumps(GOOD)), delay=1.0),
                   Reply(body=completion(json.dumps(GOOD)), delay=1.0)]
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(timeout=0.2, max_retries=1))
    assert caught.value.kind == "timeout"
    assert caught.value.attempts == 2
    assert len(fake.requests) == 2
    assert time.monotonic() - started < 1.5


def test_slow_then_fast_recovers(fake: FakeOpenAI) -> None:
    fake.script = [Reply(body=completion(json.dumps(GOOD)), delay=1.0), ok(GOOD)]
    assert call(fake.provider(timeout=0.2, max_retries=1)) == GOOD


def test_per_call_timeout_overrides_the_default(fake: FakeOpenAI) -> None:
    fake.script = [Reply(body=completion(json.dumps(GOOD)), delay=1.0)]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(timeout=30.0, max_retries=0), timeout=0.2)
    assert caught.value.kind == "timeout"


def test_total_timeout_bounds_the_whole_retried_call(fake: FakeOpenAI) -> None:
    slow = Reply(body=completion(json.dumps(GOOD)), delay=1.5)
    fake.script = [slow, slow, slow, slow, ok(GOOD)]
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(timeout=0.3, max_retries=4), total_timeout=0.5)
    elapsed = time.monotonic() - started
    assert caught.value.kind == "timeout"
    # the second attempt only gets what was left of the 0.5 s; no third one starts
    assert len(fake.requests) == 2 and caught.value.attempts == 2
    assert 0.45 <= elapsed < 1.2


def test_total_timeout_starts_no_retry_whose_backoff_would_overrun(fake: FakeOpenAI) -> None:
    fake.script = [Reply(500, {"error": {"message": "boom"}}), ok(GOOD)]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(backoff_seconds=1.0, max_retries=2), total_timeout=0.3)
    assert caught.value.kind == "http_error" and caught.value.status_code == 500
    assert len(fake.requests) == 1


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_refused_is_connection_error() -> None:
    delays: list[float] = []
    provider = OpenAICompatibleProvider(f"http://127.0.0.1:{_closed_port()}/v1", "m",
                                        max_retries=2, backoff_seconds=0.01,
                                        sleep=delays.append)
    with pytest.raises(ProviderError) as caught:
        call(provider)
    assert caught.value.kind == "connection"
    assert caught.value.attempts == 3
    assert len(delays) == 2


def test_backoff_doubles_and_is_capped(fake: FakeOpenAI) -> None:
    fake.script = [Reply(500, {}), Reply(500, {}), Reply(500, {}), ok(GOOD)]
    delays: list[float] = []
    provider = fake.provider(max_retries=3, backoff_seconds=0.1, max_backoff_seconds=0.15,
                             sleep=delays.append)
    assert call(provider) == GOOD
    assert len(delays) == 3
    assert 0.1 <= delays[0] <= 0.11
    assert 0.15 <= delays[1] <= 0.165  # 0.2 capped to 0.15 (+ at most 10% jitter)
    assert 0.15 <= delays[2] <= 0.165


def test_provider_error_kind_is_checked() -> None:
    assert set(ERROR_KINDS) == {"timeout", "http_error", "invalid_response", "connection"}
    with pytest.raises(ValueError):
        ProviderError("weird", "x")
    assert ProviderError("timeout", "slow").kind == "timeout"


def test_constructor_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        OpenAICompatibleProvider("", "m")
    with pytest.raises(ValueError):
        OpenAICompatibleProvider("http://x/v1", "")
    with pytest.raises(ValueError):
        OpenAICompatibleProvider("http://x/v1", "m", max_retries=-1)


# ------------------------------------------------------------------------------------------
# The validator
# ------------------------------------------------------------------------------------------

NESTED: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["items", "note"],
    "properties": {
        "note": {"type": ["string", "null"]},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["kind", "weight", "flag"],
                "properties": {
                    "kind": {"type": "string", "enum": ["a", "b"]},
                    "weight": {"type": "number", "minimum": 0, "maximum": 1},
                    "flag": {"type": "boolean"},
                },
            },
        },
    },
}


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ({"items": [], "note": None}, True),
        ({"items": [{"kind": "a", "weight": 0.5, "flag": True}], "note": "x"}, True),
        ({"items": [{"kind": "b", "weight": 1, "flag": False}], "note": None}, True),
        ({"items": [{"kind": "c", "weight": 0.5, "flag": True}], "note": None}, False),
        ({"items": [{"kind": "a", "weight": 1.5, "flag": True}], "note": None}, False),
        ({"items": [{"kind": "a", "weight": -0.1, "flag": True}], "note": None}, False),
        ({"items": [{"kind": "a", "weight": 0.5, "flag": 1}], "note": None}, False),
        ({"items": [{"kind": "a", "weight": True, "flag": True}], "note": None}, False),
        ({"items": [{"kind": "a", "weight": 0.5}], "note": None}, False),
        ({"items": [{"kind": "a", "weight": 0.5, "flag": True, "x": 1}], "note": None}, False),
        ({"items": [], "note": None, "extra": 1}, False),
        ({"items": []}, False),
        ({"items": {}, "note": None}, False),
        ({"items": [], "note": 3}, False),
        ([], False),
    ],
)
def test_validate_json(value: Any, valid: bool) -> None:
    if valid:
        validate_json(value, NESTED)
    else:
        with pytest.raises(SchemaValidationError):
            validate_json(value, NESTED)


def test_validate_json_scalars() -> None:
    validate_json(3, {"type": "integer"})
    validate_json(3.0, {"type": "integer"})
    validate_json(None, {"type": "null"})
    validate_json(None, {"type": ["string", "null"], "enum": ["x", None]})
    for value, schema in [
        (3.5, {"type": "integer"}),
        (True, {"type": "integer"}),
        ("3", {"type": "number"}),
        (1, {"type": "boolean"}),
        (1, {"enum": [True]}),
        ("2023-5-1", {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}),
        (0, {"type": "number", "exclusiveMinimum": 0}),
    ]:
        with pytest.raises(SchemaValidationError):
            validate_json(value, schema)


def test_validate_json_reports_the_path() -> None:
    with pytest.raises(SchemaValidationError) as caught:
        validate_json({"items": [{"kind": "a", "weight": 2, "flag": True}], "note": None},
                      NESTED)
    assert caught.value.path == "$.items[0].weight"


def test_an_invalid_schema_is_a_programming_error_and_refs_resolve() -> None:
    import jsonschema

    with pytest.raises(jsonschema.SchemaError):
        validate_json({}, {"type": "objekt"})
    # The whole standard, not a subset: $defs and $ref work.
    schema = {"$defs": {"w": {"type": "number", "maximum": 1}},
              "type": "object", "properties": {"w": {"$ref": "#/$defs/w"}}}
    validate_json({"w": 0.5}, schema)
    with pytest.raises(SchemaValidationError) as caught:
        validate_json({"w": 2}, schema)
    assert caught.value.path == "$.w"


# ------------------------------------------------------------------------------------------
# get_provider (in a subprocess, so this process's Django settings are untouched)
# ------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def _get_provider_in_subprocess(settings: dict[str, Any]) -> dict[str, Any]:
    code = f"""
import json
from django.conf import settings
settings.configure(**{settings!r})
from memhouse.core.llm import get_provider
try:
    provider = get_provider()
except Exception as exc:
    print(json.dumps({{"error": type(exc).__name__}}))
else:
    if provider is None:
        print(json.dumps(None))
    else:
        print(json.dumps({{"base_url": provider.base_url, "model": provider.model,
                          "timeout": provider.timeout, "max_retries": provider.max_retries,
                          "auth": provider._headers().get("Authorization")}}))
"""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_get_provider_from_settings() -> None:
    assert _get_provider_in_subprocess({}) is None
    assert _get_provider_in_subprocess({"MEMHOUSE_LLM_BASE_URL": ""}) is None
    configured = _get_provider_in_subprocess({
        "MEMHOUSE_LLM_BASE_URL": "http://127.0.0.1:9/v1/",
        "MEMHOUSE_LLM_MODEL": "gpt-test",
        "MEMHOUSE_LLM_API_KEY": "sk-abc",
        "MEMHOUSE_LLM_TIMEOUT": 7,
    })
    assert configured == {"base_url": "http://127.0.0.1:9/v1", "model": "gpt-test",
                          "timeout": 7.0, "max_retries": 2, "auth": "Bearer sk-abc"}
    missing_model = _get_provider_in_subprocess({"MEMHOUSE_LLM_BASE_URL": "http://x/v1"})
    assert missing_model == {"error": "ImproperlyConfigured"}
