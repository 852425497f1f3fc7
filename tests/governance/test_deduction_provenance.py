"""Deduction provenance: every statement a synthesis is split into carries the prompt's
durable identity (operation + digest of version, system text and schema); lineage reports
the typed operation `reasoning_synthesis` from it, and no API output shows the identity
or the version string. The model is the loopback OpenAI-compatible fake (real HTTP)."""

from __future__ import annotations

import json

import httpx
import pytest

from governance import workers
from knowledge.models import Knowledge
from knowledge.prompts import operation_of, prompt_identity
from memhouse.core.tenancy import account_context
from tests.fake_llm import ok
from tests.governance.helpers import active_about

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_identity_hashes_version_template_and_schema():
    base = {"version": "deduction_v1", "system": "Derive.", "schema": {"type": "object"}}
    one = prompt_identity("reasoning_synthesis", **base)
    assert one == prompt_identity("reasoning_synthesis", **base)  # durable: recomputable
    assert one.startswith("reasoning_synthesis:") and "deduction_v1" not in one
    for change in ({"version": "deduction_v2"}, {"system": "Derive!"},
                   {"schema": {"type": "array"}}):
        assert prompt_identity("reasoning_synthesis", **{**base, **change}) != one
    assert operation_of(one) == "reasoning_synthesis"
    for foreign in ("", "deduction", "reasoning_synthesis:abc", "extraction:" + "0" * 64):
        assert operation_of(foreign) is None
    with pytest.raises(ValueError):
        prompt_identity("free_text", **base)


def test_deductions_carry_the_prompt_identity_and_lineage_reports_it(
        committed_world, fake_openai, live_server):
    w = committed_world
    with account_context(w.account.id):
        active_about(w, "Alice likes jazz.")
        active_about(w, "Alice likes camping.")
    # One synthesis split into two statements.
    fake_openai.script.append(ok({"deductions": [
        {"statement": "Alice enjoys outdoor music festivals.", "kind": "preference",
         "confidence": 0.9, "contributors": ["S1", "S2"]},
        {"statement": "Alice would like a festival with a campsite.", "kind": "preference",
         "confidence": 0.7, "contributors": ["S1", "S2"]}]}))
    result = workers.deduce(w.account.id)
    assert (result["status"], result["created"]) == ("ok", 2)
    assert len(fake_openai.requests) == 1
    assert fake_openai.requests[0]["json"]["response_format"]["json_schema"]["name"] == \
        workers.DEDUCTION_PROMPT_VERSION

    expected = prompt_identity("reasoning_synthesis", version=workers.DEDUCTION_PROMPT_VERSION,
                               system=workers.DEDUCTION_SYSTEM,
                               schema=workers.DEDUCTION_SCHEMA)
    with account_context(w.account.id):
        derived = list(Knowledge.objects.filter(extractor="deduction").order_by("statement"))
        extracted = Knowledge.objects.exclude(extractor="deduction").values_list(
            "prompt_identity", flat=True)
        assert set(extracted) == {""}  # only model-derived statements carry one
        # The operation comes from the identity, not from the extractor label.
        Knowledge.objects.filter(pk=derived[1].pk).update(extractor="")
    assert len(derived) == 2
    assert {d.prompt_identity for d in derived} == {expected}
    assert expected == workers.DEDUCTION_PROMPT_IDENTITY

    for d in derived:
        r = httpx.post(f"{live_server.url}/api/v1/lineage",
                       json={"knowledge_id": str(d.pk), "peer_key": "alice"},
                       headers={"Authorization": f"Bearer {w.agent_key}"}, timeout=30)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["nodes"][0]["id"] == str(d.pk)
        ops = {n["id"]: n["operation"] for n in body["nodes"] if n["ref"] == "knowledge"}
        assert ops[str(d.pk)] == "reasoning_synthesis"
        # Its contributors are extractions; the synthesis' other half (reached through
        # them) is a reasoning synthesis too.
        assert {op for kid, op in ops.items() if kid not in {str(x.pk) for x in derived}} \
            == {"extraction"}
        assert all(ops.get(str(x.pk), "reasoning_synthesis") == "reasoning_synthesis"
                   for x in derived)
        text = json.dumps(body)
        for private in (expected, expected.split(":")[1], workers.DEDUCTION_PROMPT_VERSION,
                        "prompt", "version"):
            assert private not in text
    # Nor does the knowledge detail the subject reads.
    r = httpx.get(f"{live_server.url}/api/v1/knowledge/{derived[0].pk}",
                  params={"peer_key": "alice"},
                  headers={"Authorization": f"Bearer {w.agent_key}"}, timeout=30)
    assert r.status_code == 200, r.text
    assert expected.split(":")[1] not in r.text and "prompt_identity" not in r.text
