"""Issue #34 (low): a document's raw text is readable only by a credential that may
inspect every statement drawn from it, or by the document's owner, curators and
administrators. A public-only key (or a member) listing documents with include_text does
not read the sentence behind someone's provisional or personal statement (real HTTP)."""

from __future__ import annotations

from typing import Any

import pytest

from knowledge import lifecycle, services
from knowledge.models import Knowledge
from memhouse.core.tenancy import account_context
from tests.reliability.helpers import api

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "Alice is planning to leave the company in spring."


def _texts(live_server: Any, key: str) -> dict[str, Any]:
    r = api(live_server, key, "GET", "documents",
            params={"scope": "/marketing/social", "include_text": "true"})
    assert r.status_code == 200, r.text
    return {d["title"]: d["latest_version"] for d in r.json()["items"]}


def test_document_text_follows_the_statements_drawn_from_it(live_server: Any,
                                                            committed_world: Any) -> None:
    w = committed_world
    for title, text in (("Private", f"{SECRET}\n\nThe office moves to Leeds in June."),
                        ("Public", "The canteen opens at noon every weekday.")):
        r = api(live_server, w.agent_key, "POST", "documents", json={
            "scope": "/marketing/social", "title": title, "text": text, "wait": 10})
        assert r.status_code == 201, r.text
    with account_context(w.account.id):
        assert Knowledge.objects.get(statement__icontains="leave the company").state == \
            lifecycle.PROVISIONAL
        # The canteen statement is made active, public: anyone in the scope may read it.
        for item in Knowledge.objects.filter(statement__icontains="canteen"):
            if item.state != lifecycle.ACTIVE:
                lifecycle.transition(item, lifecycle.ACTIVE, actor=w.curator,
                                     reason="f4_curator_approved")
        Knowledge.objects.filter(statement__icontains="canteen").update(sensitivity="public")
        _, public_only = services.credential_create(account_id=w.account.id, peer=None)
        _, bob = services.token_issue(peer=w.member)
        _, carol = services.token_issue(peer=w.curator)
    for name, key in (("public-only key", public_only), ("member", bob)):
        docs = _texts(live_server, key)
        assert docs["Private"]["text"] is None and docs["Private"]["text_withheld"], name
        assert docs["Public"]["text"].startswith("The canteen"), name
        assert docs["Public"]["text_withheld"] is False
    # The uploader and a curator read it.
    for name, key in (("owner", w.agent_key), ("curator", carol)):
        docs = _texts(live_server, key)
        assert docs["Private"]["text"].startswith(SECRET), name
        assert docs["Private"]["text_withheld"] is False
    # Without include_text nothing changes; the other Account sees neither document.
    r = api(live_server, public_only, "GET", "documents", params={"scope": "/marketing/social"})
    assert all("text" not in d["latest_version"] for d in r.json()["items"])
    r = api(live_server, w.outsider_key, "GET", "documents", params={"include_text": "true"})
    assert r.status_code == 200 and r.json()["items"] == []
