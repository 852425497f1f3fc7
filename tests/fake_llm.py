"""The one fake OpenAI-compatible generation server of the tests: real HTTP on 127.0.0.1.

Every test that needs a generation provider talks to :class:`FakeOpenAI`, through the
``fake_openai`` fixture (tests/conftest.py: started and configured as
``MEMHOUSE_LLM_BASE_URL``) or directly (``with FakeOpenAI() as fake:`` for a subprocess
worker). It

* answers ``POST .../chat/completions`` from ``script``, in order: each entry a
  :class:`Reply`, or a callable ``(request) -> Reply`` (which may inspect the request, or
  block on an event to hold the request open); once the script is empty ``default``
  answers (by default HTTP 599 "script exhausted", so an unplanned call fails loudly);
* records every request it receives in ``requests``: ``path``, ``headers`` (lower-case
  names) and ``json`` (the parsed body);
* takes the response formats a real server takes (``structured``): ``"json_schema"``
  (OpenAI, vLLM, Ollama, llama.cpp's own server), ``"json_object"`` (llama-cpp-python's
  server: a ``json_schema`` request is refused as it refuses it, see
  :func:`refusal`) or ``"none"`` (no structured output at all: ``json_object``
  is refused too). A refusal is recorded but consumes no scripted reply.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memhouse.core.llm import OpenAICompatibleProvider

__all__ = ["FakeOpenAI", "Reply", "completion", "ok", "refusal"]


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list -> JSON, str/bytes -> raw
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


Responder = Callable[[dict[str, Any]], Reply]


def completion(content: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    """A chat.completion body whose message content is ``content``."""
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [
            {"index": 0, "finish_reason": "stop",
             "message": {"role": "assistant", "content": content}}
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def ok(value: Any, usage: dict[str, int] | None = None) -> Reply:
    """HTTP 200 whose message content is ``value`` as JSON."""
    return Reply(body=completion(json.dumps(value), usage))


# What llama-cpp-python's server (0.3.36) answers a response_format type it does not take:
# its route handler turns the request validation error into HTTP 500 with this body
# (checked against the real server in tests/memhouse/test_real_llm.py).
def refusal(kind: str) -> Reply:
    detail = ("1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
              "'response_format', 'type'), 'msg': \"Input should be 'text' or "
              f"'json_object'\", 'input': '{kind}', 'ctx': {{'expected': \"'text' or "
              "'json_object'\"}}\n")
    return Reply(500, {"error": {"message": detail, "type": "internal_server_error",
                                 "param": None, "code": None}})


_TAKES = {"json_schema": {"text", "json_schema", "json_object"},
          "json_object": {"text", "json_object"},
          "none": {"text"}}


class FakeOpenAI:
    def __init__(self, *, structured: str = "json_schema",
                 default: Reply | Responder | None = None) -> None:
        if structured not in _TAKES:
            raise ValueError(f"structured must be one of {sorted(_TAKES)}")
        self.structured = structured
        self.script: list[Reply | Responder] = []
        self.default: Reply | Responder = default or Reply(
            599, {"error": {"message": "script exhausted"}})
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                request = {"path": self.path,
                           "headers": {k.lower(): v for k, v in self.headers.items()},
                           "json": json.loads(raw or b"null")}
                with fake._lock:
                    fake.requests.append(request)
                    reply = fake.refuses(request["json"])
                    if reply is None:
                        reply = fake.script.pop(0) if fake.script else fake.default
                if callable(reply):
                    reply = reply(request)
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
                except OSError:
                    pass  # the client gave up (timeouts) or was killed (worker crash tests)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            block_on_close = False

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.02}, daemon=True)

    def refuses(self, body: Any) -> Reply | None:
        """The refusal this server answers to a request body, or None if it takes it."""
        response_format = body.get("response_format") if isinstance(body, dict) else None
        kind = response_format.get("type", "text") if isinstance(response_format, dict) \
            else "text"
        return None if kind in _TAKES[self.structured] else refusal(kind)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- use ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def provider(self, **kwargs: Any) -> OpenAICompatibleProvider:
        """A provider for this server, with test-friendly defaults (no backoff)."""
        options: dict[str, Any] = {"api_key": "sk-test-123", "timeout": 5.0,
                                   "backoff_seconds": 0.0}
        options.update(kwargs)
        return OpenAICompatibleProvider(self.base_url, "test-model", **options)

    def response_formats(self) -> list[str]:
        """The response_format type of each request received, in order."""
        return [(r["json"].get("response_format") or {}).get("type", "text")
                for r in self.requests]

    def schema_names(self) -> list[str | None]:
        """The schema name each request asked for (json_schema mode), in order."""
        return [((r["json"].get("response_format") or {}).get("json_schema") or {})
                .get("name") for r in self.requests]
