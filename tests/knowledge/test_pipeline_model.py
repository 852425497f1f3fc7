"""The model-backed extractor path: read -> model -> write with no connection held."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import connections
from django.utils import timezone

from knowledge import services
from knowledge.ingest.services import IncomingMessage, messages_ingest
from knowledge.models import Knowledge
from memhouse.principal import Principal
from memhouse.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)


class FakeModel:
    """An OpenAI-compatible server on loopback that records what it saw."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.connection_open_during_call: list[bool] = []
        self.watch = connections["default"]  # the caller thread's connection wrapper
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                fake.connection_open_during_call.append(fake.watch.connection is not None)
                content = json.dumps({"claims": [{
                    "statement": "Caroline adopted a greyhound.", "subject": "speaker",
                    "kind": "event", "confidence": 0.8, "sensitivity": "internal",
                    "relative_date": None, "absolute_from": None, "absolute_until": None,
                    "evidence": "I adopted a greyhound", "replaces": None}]})
                body = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def fake_model(settings):
    model = FakeModel()
    settings.MEMHOUSE_LLM_BASE_URL = model.url
    settings.MEMHOUSE_LLM_MODEL = "fake-extractor"
    settings.MEMHOUSE_LLM_MAX_RETRIES = 0
    yield model
    model.close()


def _ingest(w, text: str) -> None:
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
        messages_ingest(principal=Principal(account_id=w.account.id, peer=w.agent, act_for_all=True,
                                            via="api_key"),
                        scope_path="/", messages=[IncomingMessage(
                            text=text, occurred_at=timezone.now(), peer_key="caroline")])


def test_model_extraction_runs_with_no_database_connection_held(committed_world, fake_model):
    _ingest(committed_world, "Guess what, I adopted a greyhound!")
    assert fake_model.connection_open_during_call == [False]
    with account_context(committed_world.account.id):
        k = Knowledge.objects.get()
        assert (k.statement, k.state, k.extractor) == (
            "Caroline adopted a greyhound.", "active", "llm/llm-v3")


def test_a_failing_model_degrades_to_the_rule_based_extractor(committed_world, fake_model):
    fake_model.status = 500
    _ingest(committed_world, "I adopted a greyhound named Pixel.")
    with account_context(committed_world.account.id):
        k = Knowledge.objects.get()
        assert k.extractor == "rule-based/rule-v4"  # recorded, never passed off as the model's
        assert k.statement == "Caroline adopted a greyhound named Pixel."
