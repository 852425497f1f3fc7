"""The OpenAPI schema covers the API and documents the error shape."""

from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.django_db


def test_schema_lists_every_endpoint_with_request_bodies_and_errors(client):
    r = client.get("/api/schema/")
    assert r.status_code == 200
    schema = yaml.safe_load(r.content)
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    for path in ("/api/v1/messages", "/api/v1/search", "/api/v1/documents",
                 "/api/v1/curator/queue", "/api/v1/auth/token"):
        assert path in paths, path
    search = paths["/api/v1/search"]["post"]
    body = search["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    fields = schema["components"]["schemas"][body.rsplit("/", 1)[-1]]["properties"]
    assert {"query", "scope", "peer_key", "profile", "limit", "as_of"} <= set(fields)
    assert "strategies" not in fields  # evaluation-only, never part of the public API
    error = search["responses"]["400"]["content"]["application/json"]["schema"]["$ref"]
    assert error.endswith("/Error")
    assert "bearer" in str(schema["components"]["securitySchemes"]).lower()


def test_docs_page_is_served_without_a_cdn(client):
    r = client.get("/api/docs/")
    assert r.status_code == 200
    assert b"swagger-ui" in r.content and b"cdn.jsdelivr" not in r.content
