"""Ingest keeps the (internal, rebuildable) entity mention index up to date."""

from __future__ import annotations

import pytest
from django.utils import timezone

from knowledge import services
from knowledge.ingest.services import IncomingMessage, messages_ingest
from memhouse.core.principal import Principal
from memhouse.core.tenancy import account_context
from retrieval.models import EntityMention

pytestmark = pytest.mark.django_db(transaction=True)


def test_ingested_statements_are_indexed_for_entity_match(committed_world):
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
        messages_ingest(principal=Principal(account_id=w.account.id, peer=w.agent, act_for_all=True,
                                            via="api_key"),
                        scope_path="/", messages=[IncomingMessage(
                            text="I visited Lisbon with my friend Dana.",
                            occurred_at=timezone.now(), peer_key="caroline")])
    with account_context(w.account.id):
        surfaces = set(EntityMention.objects.values_list("surface", flat=True))
    assert {"Lisbon", "Dana"} <= surfaces
