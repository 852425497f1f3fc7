"""Schemathesis against the live OpenAPI schema (/api/schema/) over real HTTP.

Every operation is fuzzed with schema-driven inputs (valid and invalid), authenticated
with the agent's API key, and each response is checked: no server error, a status code
the schema declares, and a body that conforms to the declared schema (the one error shape
for every 4xx). Examples per operation are bounded and the run is derandomised (seeded),
so CI sees the same inputs every time; the number of requests is recorded as the junit
property `inputs_tried`.
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)

from knowledge import services
from memhouse.core.tenancy import account_context

MAX_EXAMPLES = int(os.environ.get("MEMHOUSE_FUZZ_EXAMPLES", "8"))
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]


def _generated_schema() -> dict:
    """The schema /api/schema/ serves, generated the same way at collection time (the
    lazy fixture loader of schemathesis does not work with this pytest); the last test
    below checks that the live one is identical."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    return json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(
        request=None, public=True)))


SCHEMA = _generated_schema()
schema = schemathesis.openapi.from_dict(SCHEMA)


@pytest.fixture
def fuzz_world(live_server, committed_world, settings):
    settings.MEMHOUSE_RATE_LIMIT_PER_MINUTE = 0  # hundreds of requests from one key
    w = committed_world
    with account_context(w.account.id):
        # The schema's examples (docs/api.md) use these, so valid requests reach the 2xx paths.
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
        services.scope_ensure(account_id=w.account.id, path="/demo")
    return w


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def test_api_never_errors_and_matches_its_schema(case, fuzz_world, live_server, request):
    tried = getattr(request.node, "inputs_tried", 0) + 1
    request.node.inputs_tried = tried
    # One junit property per operation, updated in place (record_property would append).
    props = request.node.user_properties
    props[:] = [p for p in props if p[0] != "inputs_tried"] + [("inputs_tried", tried)]
    case.call_and_validate(base_url=live_server.url, checks=CHECKS, timeout=60,
                           headers={"Authorization": f"Bearer {fuzz_world.agent_key}"})


@pytest.mark.django_db(transaction=True)
def test_the_fuzzed_schema_is_the_live_one(live_server):
    r = httpx.get(f"{live_server.url}/api/schema/?format=json", timeout=30)
    assert r.status_code == 200
    assert r.json() == SCHEMA
    assert len(SCHEMA["paths"]) >= 20 and "/api/v1/messages" in SCHEMA["paths"]
