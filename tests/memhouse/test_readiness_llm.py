"""/readyz reports the configured generation provider: which structured-output form it
takes, and clearly when it takes none (over real HTTP, against tests.fake_llm)."""

from __future__ import annotations

import socket
import time
from typing import Any

import httpx
import pytest

from tests.fake_llm import FakeOpenAI, Reply, ok

pytestmark = pytest.mark.django_db


def _ready(live_server: Any) -> httpx.Response:
    return httpx.get(f"{live_server.url}/readyz", timeout=60)


def _configure(settings: Any, base_url: str) -> None:
    settings.MEMHOUSE_LLM_BASE_URL = base_url
    settings.MEMHOUSE_LLM_MODEL = "test-model"
    settings.MEMHOUSE_LLM_TIMEOUT = 5


def test_without_a_provider_the_model_is_not_used(live_server, settings):
    settings.MEMHOUSE_LLM_BASE_URL = ""
    r = _ready(live_server)
    assert r.status_code == 200
    assert r.json()["checks"]["llm"] == "not_used" and r.json()["llm_response_format"] is None


@pytest.mark.parametrize(("structured", "expected", "requests"), [
    ("json_schema", "json_schema", ["json_schema"]),
    ("json_object", "json_object_schema", ["json_schema", "json_object"]),
])
def test_a_provider_with_structured_output_is_ready_and_says_which(
        live_server, settings, structured, expected, requests):
    with FakeOpenAI(structured=structured, default=ok({"ok": True})) as fake:
        _configure(settings, fake.base_url)
        r = _ready(live_server)
        assert r.status_code == 200, r.text
        assert r.json()["checks"]["llm"] == "ok"
        assert r.json()["llm_response_format"] == expected
        assert fake.response_formats() == requests
        # The answer is kept for minutes: probes do not cost a model call per request.
        assert _ready(live_server).json()["llm_response_format"] == expected
        assert len(fake.requests) == len(requests)


def test_a_provider_without_structured_output_makes_the_service_unready(live_server, settings):
    with FakeOpenAI(structured="none", default=ok({"ok": True})) as fake:
        _configure(settings, fake.base_url)
        r = _ready(live_server)
        assert r.status_code == 503
        assert r.json()["status"] == "unavailable"
        assert r.json()["checks"]["llm"] == "unsupported"
        assert r.json()["llm_response_format"] is None
        assert fake.response_formats() == ["json_schema", "json_object", "json_object"]


def test_a_provider_refusing_the_key_makes_the_service_unready(live_server, settings):
    with FakeOpenAI(default=Reply(401, {"error": {"message": "invalid api key"}})) as fake:
        _configure(settings, fake.base_url)
        r = _ready(live_server)
        assert r.status_code == 503 and r.json()["checks"]["llm"] == "rejected"


def test_an_unreachable_provider_is_degraded_but_ready(live_server, settings):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    _configure(settings, f"http://127.0.0.1:{port}/v1")
    r = _ready(live_server)
    assert r.status_code == 200 and r.json()["checks"]["llm"] == "degraded"


def test_a_misconfigured_provider_is_reported(live_server, settings):
    settings.MEMHOUSE_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.MEMHOUSE_LLM_MODEL = ""
    r = _ready(live_server)
    assert r.status_code == 503 and r.json()["checks"]["llm"] == "misconfigured"


def test_a_slow_first_probe_answers_probing_and_goes_on_in_the_background(
        live_server, settings, monkeypatch):
    from memhouse.core import llm

    monkeypatch.setattr(llm, "PROBE_WAIT_SECONDS", 0.2)
    with FakeOpenAI(default=Reply(body=ok({"ok": True}).body, delay=1.5)) as fake:
        _configure(settings, fake.base_url)
        r = _ready(live_server)
        assert r.status_code == 200 and r.json()["checks"]["llm"] == "probing"
        deadline = time.monotonic() + 30
        while _ready(live_server).json()["checks"]["llm"] == "probing":
            assert time.monotonic() < deadline
            time.sleep(0.3)
        r = _ready(live_server)
        assert r.json()["checks"]["llm"] == "ok" and r.json()["llm_response_format"] == \
            "json_schema"
        assert len(fake.requests) == 1  # one probe, however often readiness was asked
