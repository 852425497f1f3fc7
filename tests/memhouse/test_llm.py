"""memhouse.llm against a real fake OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from memhouse.llm import (
    ERROR_KINDS,
    ChatProvider,
    OpenAICompatibleProvider,
    ProviderError,
    SchemaValidationError,
    validate_json,
)

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


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict -> JSON, str/bytes -> raw
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


def completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [
            {"index": 0, "finish_reason": "stop",
             "message": {"role": "assistant", "content": content}}
        ],
    }


def ok(value: Any = GOOD) -> Reply:
    return Reply(body=completion(json.dumps(value)))


class FakeOpenAI:
    """A scripted ``/v1/chat/completions`` endpoint; records every request it receives."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                with fake._lock:
                    fake.requests.append({
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "json": json.loads(raw or b"null"),
                    })
                    reply = fake.script.pop(0) if fake.script else Reply(
                        599, {"error": {"message": "script exhausted"}})
                if reply.delay:
                    time.sleep(reply.delay)
                body = reply.body
                if isinstance(body, (dict, list)):
                    payload = json.dumps(body).encode()
                elif isinstance(body, str):
                    payload = body.encode()
                else:
                    payload = body or b""
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def provider(self, **kwargs: Any) -> OpenAICompatibleProvider:
        options: dict[str, Any] = {"api_key": "sk-test-123", "timeout": 5.0,
                                   "backoff_seconds": 0.0}
        options.update(kwargs)
        return OpenAICompatibleProvider(self.base_url, "test-model", **options)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def call(provider: OpenAICompatibleProvider, **kwargs: Any) -> dict[str, Any]:
    return provider.complete_json(system="You answer.", user="What is it?", schema=SCHEMA,
                                  schema_name="answer_v1", **kwargs)


# ------------------------------------------------------------------------------------------
# Happy path and request shape
# ------------------------------------------------------------------------------------------


def test_valid_answer_and_exact_request(fake: FakeOpenAI) -> None:
    fake.script = [ok()]
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


def test_a_server_without_structured_outputs_gets_json_object_and_is_remembered(
        fake: FakeOpenAI) -> None:
    # llama.cpp-style servers refuse response_format json_schema (HTTP 500 naming it).
    refused = Reply(500, {"error": {"message": "Unsupported response_format type: "
                                               "json_schema; use text or json_object"}})
    fake.script = [refused, ok()]
    provider = fake.provider(max_retries=0)  # the refusal costs no retry
    assert provider.response_format == "json_schema"
    assert call(provider) == GOOD
    first, second = (r["json"] for r in fake.requests)
    assert first["response_format"]["type"] == "json_schema"
    assert second["response_format"] == {"type": "json_object"}
    system = second["messages"][0]["content"]
    assert system.startswith("You answer.") and json.dumps(SCHEMA, separators=(",", ":")) in system
    # Remembered for this base URL: the next call (any provider object) asks that way.
    fake.script = [ok()]
    again = fake.provider()
    assert again.response_format == "json_object"
    assert call(again) == GOOD
    assert fake.requests[-1]["json"]["response_format"] == {"type": "json_object"}
    assert len(fake.requests) == 3


def test_an_answer_that_breaks_the_schema_is_refused_in_json_object_mode_too(
        fake: FakeOpenAI) -> None:
    refused = Reply(400, {"error": {"message": "response_format json_schema not supported"}})
    fake.script = [refused, Reply(body=completion(json.dumps({"unexpected": 1})))]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(max_retries=0))
    assert caught.value.kind == "invalid_response"


def test_no_authorization_header_without_key(fake: FakeOpenAI) -> None:
    fake.script = [ok()]
    assert call(fake.provider(api_key=None)) == GOOD
    assert "authorization" not in fake.requests[0]["headers"]


def test_trailing_slash_in_base_url(fake: FakeOpenAI) -> None:
    fake.script = [ok()]
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
    fake.script = [Reply(body=completion("{not json")), ok()]
    assert call(fake.provider()) == GOOD
    assert len(fake.requests) == 2


def test_schema_violation_then_valid_is_retried(fake: FakeOpenAI) -> None:
    fake.script = [ok({"answer": "x", "score": 11}), ok({"answer": "x"}),
                   ok({"answer": "x", "score": 1, "extra": True}), ok()]
    assert call(fake.provider(max_retries=3)) == GOOD
    assert len(fake.requests) == 4


def test_server_error_then_valid_is_retried(fake: FakeOpenAI) -> None:
    fake.script = [Reply(500, {"error": {"message": "boom"}}), ok()]
    assert call(fake.provider()) == GOOD
    assert len(fake.requests) == 2


def test_rate_limit_then_valid_is_retried(fake: FakeOpenAI) -> None:
    fake.script = [Reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0"}),
                   ok()]
    assert call(fake.provider()) == GOOD
    assert len(fake.requests) == 2


def test_client_error_is_not_retried(fake: FakeOpenAI) -> None:
    fake.script = [Reply(400, {"error": {"message": "bad schema, sk-test-123 is not echoed"}}),
                   ok()]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider())
    error = caught.value
    assert error.kind == "http_error"
    assert error.status_code == 400
    assert error.attempts == 1
    assert len(fake.requests) == 1
    assert "HTTP 400" in str(error)


def test_unauthorized_is_not_retried(fake: FakeOpenAI) -> None:
    fake.script = [Reply(401, {"error": {"message": "invalid key"}}), ok()]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider())
    assert (caught.value.kind, caught.value.status_code) == ("http_error", 401)
    assert len(fake.requests) == 1


def test_server_errors_exhaust_retries(fake: FakeOpenAI) -> None:
    fake.script = [Reply(503, {}), Reply(502, {}), Reply(500, {}), ok()]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(max_retries=2))
    assert caught.value.kind == "http_error"
    assert caught.value.status_code == 500
    assert caught.value.attempts == 3
    assert len(fake.requests) == 3


def test_invalid_answers_exhaust_retries(fake: FakeOpenAI) -> None:
    fake.script = [Reply(body=completion("nope")) for _ in range(3)] + [ok()]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(max_retries=2))
    assert caught.value.kind == "invalid_response"
    assert len(fake.requests) == 3


def test_no_retries_when_max_retries_is_zero(fake: FakeOpenAI) -> None:
    fake.script = [Reply(500, {}), ok()]
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
    fake.script = [Reply(body=completion(json.dumps(GOOD)), delay=1.0), ok()]
    assert call(fake.provider(timeout=0.2, max_retries=1)) == GOOD


def test_per_call_timeout_overrides_the_default(fake: FakeOpenAI) -> None:
    fake.script = [Reply(body=completion(json.dumps(GOOD)), delay=1.0)]
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(timeout=30.0, max_retries=0), timeout=0.2)
    assert caught.value.kind == "timeout"


def test_total_timeout_bounds_the_whole_retried_call(fake: FakeOpenAI) -> None:
    slow = Reply(body=completion(json.dumps(GOOD)), delay=1.5)
    fake.script = [slow, slow, slow, slow, ok()]
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        call(fake.provider(timeout=0.3, max_retries=4), total_timeout=0.5)
    elapsed = time.monotonic() - started
    assert caught.value.kind == "timeout"
    # the second attempt only gets what was left of the 0.5 s; no third one starts
    assert len(fake.requests) == 2 and caught.value.attempts == 2
    assert 0.45 <= elapsed < 1.2


def test_total_timeout_starts_no_retry_whose_backoff_would_overrun(fake: FakeOpenAI) -> None:
    fake.script = [Reply(500, {"error": {"message": "boom"}}), ok()]
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
    fake.script = [Reply(500, {}), Reply(500, {}), Reply(500, {}), ok()]
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
from memhouse.llm import get_provider
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
