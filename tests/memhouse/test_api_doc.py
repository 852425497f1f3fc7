"""docs/api.md is generated from the OpenAPI schema: it is current, every endpoint has a
request and a response example, and a new endpoint shows up without hand edits."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from memhouse import api_doc

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


@pytest.fixture(scope="module")
def schema() -> dict:
    return api_doc.build_schema()


def _blocks(text: str) -> dict[str, str]:
    """Each '### `METHOD /path`' heading with the text up to the next heading."""
    parts = re.split(r"^### `([A-Z]+ [^`]+)`$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_docs_api_md_is_current(schema):
    assert DOC.read_text() == api_doc.render(schema), (
        "docs/api.md is stale: run `python manage.py api_doc`")


def test_every_operation_has_a_request_and_a_response_example(schema):
    blocks = _blocks(DOC.read_text())
    operations = [(m.upper(), p, op) for p, methods in schema["paths"].items()
                  for m, op in methods.items()]
    assert len(operations) >= 40
    assert set(blocks) == {f"{m} {p}" for m, p, _ in operations}
    for method, path, op in operations:
        block = blocks[f"{method} {path}"]
        request = re.search(r"Request:\n\n```sh\n(curl -X (\w+) \"\$MEMHOUSE(\S+)\".*?)```",
                            block, flags=re.S)
        assert request, f"{method} {path}: no request example"
        assert request.group(2) == method
        assert "{" not in request.group(3), f"{method} {path}: path parameter left unfilled"
        if "requestBody" in op:
            assert " -d '" in request.group(1), f"{method} {path}: no request body"
        assert (" -H \"Authorization: Bearer $KEY\"" in request.group(1)) == (
            op.get("security") != [{}]), f"{method} {path}: credential header"
        response = re.search(r"Response `(2\d\d)`:\n\n```json\n(.+?)```", block, flags=re.S)
        assert response, f"{method} {path}: no response example"
        assert response.group(1) in op["responses"]
    # The examples are the schema's own: the ingest example, its 202, a query string.
    messages = blocks["POST /api/v1/messages"]
    assert "I went to a support group yesterday" in messages and "Response `202`" in messages
    assert "/api/v1/curator/queue?state=held" in blocks["GET /api/v1/curator/queue"]
    token = blocks["POST /api/v1/auth/token"]
    assert "Authorization" not in token.split("Response")[0]


def test_a_new_endpoint_is_documented_without_hand_edits(schema):
    grown = copy.deepcopy(schema)
    op = copy.deepcopy(grown["paths"]["/api/v1/peers"]["post"])
    op["operationId"] = "v1_people_invite_create"
    op["summary"] = "Invite a person"
    grown["paths"]["/api/v1/people/invitations"] = {"post": op}
    other = copy.deepcopy(grown["paths"]["/api/v1/me"]["get"])
    other["operationId"] = "v1_widgets_retrieve"
    other["summary"] = ""
    other["description"] = "List widgets. More words."
    grown["paths"]["/api/v1/widgets"] = {"get": other}

    text = api_doc.render(grown)
    blocks = _blocks(text)
    assert "POST /api/v1/people/invitations" in blocks and "GET /api/v1/widgets" in blocks
    assert "## People and invitations" in text and "## Widgets" in text
    assert "| GET | [`/api/v1/widgets`](#get-apiv1widgets) | List widgets | 200 |" in text
    assert text != DOC.read_text()


def test_check_fails_on_a_stale_file_and_the_command_rewrites_it(tmp_path, settings, capsys):
    settings.BASE_DIR = tmp_path
    (tmp_path / "docs").mkdir()
    stale = tmp_path / "docs" / "api.md"
    stale.write_text(DOC.read_text().replace("Response `202`", "Response `200`", 1))
    with pytest.raises(SystemExit) as exc:
        call_command("api_doc", "--check")
    assert exc.value.code == 1
    assert "docs/api.md is stale" in capsys.readouterr().err
    call_command("api_doc")
    assert stale.read_text() == DOC.read_text()
    call_command("api_doc", "--check")
    assert "docs/api.md is current" in capsys.readouterr().out
