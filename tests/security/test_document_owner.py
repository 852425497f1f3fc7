"""Revising or deleting a document retracts statements its subjects may have confirmed:
only the uploader, a curator or an account administrator may do it (real HTTP)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from knowledge import services
from knowledge.models import Document
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)


def call(base: str, key: str, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(method, f"{base}/api/v1/{path}", json=body, timeout=60,
                         headers={"Authorization": f"Bearer {key}"})


def test_only_the_uploader_a_curator_or_an_admin_revises_or_deletes(
        live_server: Any, committed_world: Any) -> None:
    w = committed_world
    base = live_server.url
    with account_context(w.account.id):
        _, bob = services.credential_create(account_id=w.account.id, peer=w.member)
        _, carol = services.credential_create(account_id=w.account.id, peer=w.curator)
    r = call(base, w.agent_key, "POST", "documents",
             {"scope": "/marketing/social", "title": "Handbook",
              "text": "Alice leads the design team."})
    assert r.status_code == 201, r.text
    doc = r.json()["document_id"]
    # A member who can read it cannot revise or delete it.
    assert call(base, bob, "GET", f"documents/{doc}").status_code == 200
    r = call(base, bob, "POST", f"documents/{doc}/versions", {"text": "Bob leads it now."})
    assert r.status_code == 403 and r.json()["error"]["code"] == "document_owner_only"
    r = call(base, bob, "DELETE", f"documents/{doc}")
    assert r.status_code == 403 and r.json()["error"]["code"] == "document_owner_only"
    with account_context(w.account.id):
        assert Document.objects.get(pk=doc).deleted_at is None
    # The uploader revises it; a curator deletes it.
    r = call(base, w.agent_key, "POST", f"documents/{doc}/versions",
             {"text": "Alice and Dana lead the design team."})
    assert r.status_code == 201, r.text
    r = call(base, carol, "DELETE", f"documents/{doc}")
    assert r.status_code == 200 and r.json()["deleted"] is True
