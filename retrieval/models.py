"""Rebuildable retrieval stores: vectors per embedding space (and, later, entity rows).

Nothing here is durable: `manage.py reembed` and the entity rebuild regenerate it all
from governed knowledge.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from knowledge.models import Account, Knowledge


class EmbeddingSpace(models.Model):
    """A vector-space identity: vectors are comparable only within one space.

    Holds no Account data (it names a model), so it carries no account_id.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    provider = models.CharField(max_length=100)
    model = models.CharField(max_length=200)
    version = models.CharField(max_length=100)
    dims = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_embedding_space"
        constraints = [
            models.UniqueConstraint(fields=["provider", "model", "version", "dims"],
                                    name="embedding_space_identity"),
        ]

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}@{self.version}/{self.dims}"


class KnowledgeVector(models.Model):
    """One statement's embedding in one space. `source_updated_at` is the Knowledge
    watermark the vector was computed against."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    knowledge = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="vectors")
    space = models.ForeignKey(EmbeddingSpace, on_delete=models.CASCADE)
    embedding = VectorField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_knowledge_vector"
        constraints = [
            models.UniqueConstraint(fields=["knowledge", "space"], name="vector_one_per_space"),
        ]
        indexes = [models.Index(fields=["account", "space"])]
