"""The OpenAPI schema covers the API and documents the error shape."""

from __future__ import annotations

from datetime import datetime

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


def _schema(client) -> dict:
    r = client.get("/api/schema/")
    assert r.status_code == 200
    return yaml.safe_load(r.content)


def _validator(schema: dict, subschema: dict):
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    # OpenAPI 3.0 schemas are JSON Schema with `nullable`; allow null where it is set.
    def nullable(node):
        if isinstance(node, dict):
            node = {k: nullable(v) for k, v in node.items()}
            if node.pop("nullable", False):
                return {"anyOf": [node, {"type": "null"}]}
            return node
        if isinstance(node, list):
            return [nullable(v) for v in node]
        return node

    root = nullable(schema)
    registry = Registry().with_resource(
        "urn:memhouse", Resource.from_contents(root, default_specification=DRAFT202012))
    resolved = nullable(subschema)
    if "$ref" in resolved:
        resolved = {"$ref": "urn:memhouse" + resolved["$ref"]}
    else:
        resolved = json_refs(resolved)
    checker = jsonschema.FormatChecker()

    @checker.checks("date-time", raises=ValueError)
    def _date_time(value) -> bool:  # rfc3339-validator is not installed: check it here
        if not isinstance(value, str):
            return True
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return "T" in value and parsed.tzinfo is not None

    return jsonschema.Draft202012Validator(resolved, registry=registry, format_checker=checker)


def json_refs(node):
    if isinstance(node, dict):
        return {k: ("urn:memhouse" + v if k == "$ref" else json_refs(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [json_refs(v) for v in node]
    return node


def test_every_operation_has_examples_that_validate_against_its_schema(client):
    schema = _schema(client)
    seen = 0
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            seen += 1
            where = f"{method.upper()} {path}"
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                assert "examples" in body, f"{where}: no request example"
                for example in body["examples"].values():
                    _validator(schema, body["schema"]).validate(example["value"])
            success = [c for c in op["responses"] if c.startswith("2")]
            assert len(success) == 1, where
            content = op["responses"][success[0]]["content"]["application/json"]
            assert content.get("examples"), f"{where}: no response example"
            for example in content["examples"].values():
                _validator(schema, content["schema"]).validate(example["value"])
            for code in ("400", "401", "404"):
                error = op["responses"][code]["content"]["application/json"]
                for example in error["examples"].values():
                    _validator(schema, error["schema"]).validate(example["value"])
    assert seen >= 29


def test_success_statuses_and_examples_follow_the_api_guide(client):
    from memhouse.schema_examples import EXAMPLES

    schema = _schema(client)
    ops = {op["operationId"]: op for methods in schema["paths"].values()
           for op in methods.values()}
    assert set(EXAMPLES) == set(ops)  # no stale examples, none missing
    assert "202" in ops["v1_messages_create"]["responses"]
    assert "201" in ops["v1_peers_create"]["responses"]
    assert "201" in ops["v1_auth_token_create"]["responses"]
    assert "200" in ops["v1_search_create"]["responses"]
    # The examples are docs/api.md's: the same message, query and response fields.
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    ingest = EXAMPLES["v1_messages_create"]["request"]["messages"][0]
    assert ingest["text"] in guide and ingest["id"] in guide
    search = EXAMPLES["v1_search_create"]["response"]
    for key in search:
        assert f'"{key}"' in guide, key
