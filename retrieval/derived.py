"""Retrieval's rows derived from statements (vectors, entity mentions), dropped when the
statements are withdrawn from use. Governance asks for that through
knowledge.lifecycle.drop_derived_rows, which calls what retrieval registered, so the
app that owns these tables is the one that deletes from them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce

from retrieval.models import Entity, EntityMention, KnowledgeVector


def drop_derived_rows(knowledge_ids: Iterable[Any]) -> None:
    """Delete retrieval's rebuildable rows (vectors, entity mentions) of statements withdrawn
    from use; registered with knowledge.lifecycle.register_derived_rows (retrieval.apps)."""
    ids = list(knowledge_ids)
    if not ids:
        return
    KnowledgeVector.objects.filter(knowledge_id__in=ids).delete()
    entity_ids = list(EntityMention.objects.filter(knowledge_id__in=ids)
                      .values_list("entity_id", flat=True).distinct())
    EntityMention.objects.filter(knowledge_id__in=ids).delete()
    if entity_ids:
        # An entity named only by withdrawn statements must not outlive them (its
        # canonical name is their text); the others get their counts recomputed.
        Entity.objects.filter(pk__in=entity_ids, mentions__isnull=True).delete()
        counts = (EntityMention.objects.filter(entity_id=OuterRef("pk")).values("entity_id")
                  .annotate(n=Count("id")).values("n"))
        Entity.objects.filter(pk__in=entity_ids).update(
            mention_count=Coalesce(Subquery(counts), 0))
