"""Rebuildable retrieval stores: vectors per embedding space and the entity mention index.

Nothing here is durable: `manage.py reembed` and the entity rebuild regenerate it all
from governed knowledge.
"""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from knowledge.models import Account, Knowledge, Message, Peer, Scope, Session


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


class MessageVector(models.Model):
    """One source message's embedding in one space: the semantic half of ask's source
    recall lane (the lexical half is the full-text index on the message text, migration
    0008). Rebuildable like KnowledgeVector (`manage.py reembed`); deleted with its
    message, so an erased message leaves no vector behind."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+")
    space = models.ForeignKey(EmbeddingSpace, on_delete=models.CASCADE)
    embedding = VectorField()
    # The message's scope and occurred_at (a message never changes), on the vector's own
    # row: semantic's message lanes filter their nearest-neighbour scan by scope and by
    # when the message was said without a lookup of the message per candidate, which
    # the planner also turned into a scan of every message of the scope (migration 0012,
    # bench/README.md "Search at 100k and 1M").
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+",
                              db_index=False)
    said_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_message_vector"
        constraints = [
            models.UniqueConstraint(fields=["message", "space"],
                                    name="message_vector_one_per_space"),
        ]
        indexes = [models.Index(fields=["account", "space"]),
                   models.Index(fields=["account", "space", "said_at"],
                                name="message_vector_said_at")]


class Entity(models.Model):
    """A named thing mentioned by the statements of one scope (the mention index).

    Rebuildable and pipeline-internal: no canonical name, alias or entity id ever reaches
    a caller. Retrieval joins through it and returns knowledge ids only. `scope` is the
    scope whose statements produced the entity, so a name never links across scopes on its
    own; expansion across scopes happens only between scopes the reader is authorised for.
    """

    class Kind(models.TextChoices):
        PERSON = "person"
        PLACE = "place"
        ORGANISATION = "organisation"
        THING = "thing"
        UNKNOWN = "unknown"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+")
    # Normalised key: case-folded, whitespace collapsed, possessive and periods stripped.
    canonical = models.CharField(max_length=200)
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.UNKNOWN)
    mention_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_entity"
        constraints = [
            models.UniqueConstraint(fields=["account", "scope", "canonical"],
                                    name="entity_unique_canonical"),
            models.CheckConstraint(condition=~models.Q(canonical=""),
                                   name="entity_canonical_nonempty"),
        ]


class EntityMention(models.Model):
    """One occurrence of an entity in one statement: the span [start, end) of its text."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="mentions")
    knowledge = models.ForeignKey(Knowledge, on_delete=models.CASCADE,
                                  related_name="entity_mentions")
    surface = models.CharField(max_length=200)
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    confidence = models.FloatField()

    class Meta:
        db_table = "memhouse_entity_mention"
        constraints = [
            models.UniqueConstraint(fields=["entity", "knowledge", "start"],
                                    name="entity_mention_unique_span"),
            models.CheckConstraint(condition=models.Q(end__gt=models.F("start")),
                                   name="entity_mention_span_order"),
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0) & models.Q(confidence__lte=1),
                name="entity_mention_confidence_range"),
        ]
        indexes = [
            models.Index(fields=["account", "knowledge"]),
            # entity_match reads each entity's strongest mentions first, up to its pool.
            # entity_match's pool walks it: strongest first, ties by statement.
            models.Index(fields=["entity", "-confidence", "knowledge"],
                         name="entity_mention_strongest"),
        ]


class EntityLink(models.Model):
    """A model-confirmed merge: `entity` is another name of `canonical`, in one scope.

    Rebuildable and pipeline-internal, like the index it links (see
    retrieval.entity_resolution). Both ends are entity rows of the same scope and cascade
    with them, so an index rebuild or an erasure that removes a name removes its links
    too; resolution writes them again from the cached verdicts. A canonical entity is
    never itself linked to another, so a group is one canonical plus its linked names.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+")
    entity = models.OneToOneField(Entity, on_delete=models.CASCADE, related_name="link")
    canonical = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_entity_link"
        constraints = [
            models.CheckConstraint(condition=~models.Q(entity=models.F("canonical")),
                                   name="entity_link_not_self"),
        ]
        indexes = [models.Index(fields=["canonical"], name="entity_link_canonical")]


class EntityJudgement(models.Model):
    """The model's verdict on one candidate pair of names in one scope, so a pair is
    asked about once. Keyed by a digest of (scope, both names): the cache holds no name,
    so a statement's erasure leaves no text of it here. Rebuildable (dropping it only
    costs model calls)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+")
    pair_digest = models.CharField(max_length=64)
    same = models.BooleanField()
    provider = models.CharField(max_length=100, blank=True, default="")
    judged_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_entity_judgement"
        constraints = [
            models.UniqueConstraint(fields=["account", "scope", "pair_digest"],
                                    name="entity_judgement_unique_pair"),
        ]


class Projection(models.Model):
    """A rebuildable context projection of governed knowledge: a peer profile, a scope
    card or a session summary, anchored at exactly one scope (see retrieval.projections).

    Not a second store: the payload is replaced wholesale by every rebuild, `dirty` is set
    by the lifecycle refresh hook inside the transaction of every state change, and
    `version` bumps on every rebuild and every dirty mark so a process-local payload cache
    can tell it is stale. Readers also check every source statement is still live (state
    and expiry) before serving a payload. A projection whose source statement is
    hard-deleted disappears in the same transaction (trigger on ProjectionSource,
    migration 0006).
    """

    class Kind(models.TextChoices):
        PEER_PROFILE = "peer_profile"
        SCOPE_CARD = "scope_card"
        SESSION_SUMMARY = "session_summary"

    class Audience(models.TextChoices):
        # Peer profile: read by its subject only; may hold the subject's provisional rows.
        SUBJECT = "subject"
        # Shared: public/internal, about the scope, or promoted; read by peer readers.
        SHARED = "shared"
        # Public statements only; read by peerless credentials.
        PUBLIC = "public"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    audience = models.CharField(max_length=10, choices=Audience.choices)
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+")
    peer = models.ForeignKey(Peer, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+")
    session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="+")
    payload = models.JSONField(default=dict, blank=True)
    # The knowledge ids the payload was built from, in payload order.
    source_ids = ArrayField(models.UUIDField(), default=list, blank=True)
    built_at = models.DateTimeField(null=True, blank=True)
    dirty = models.BooleanField(default=True)
    version = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_projection"
        constraints = [
            models.UniqueConstraint(
                fields=["account", "kind", "audience", "scope", "peer", "session"],
                nulls_distinct=False, name="projection_unique_key"),
            models.CheckConstraint(
                condition=(models.Q(kind="peer_profile", audience="subject",
                                    peer__isnull=False, session__isnull=True)
                           | models.Q(kind="scope_card", audience__in=["shared", "public"],
                                      peer__isnull=True, session__isnull=True)
                           | models.Q(kind="session_summary",
                                      audience__in=["shared", "public"],
                                      peer__isnull=True, session__isnull=False)),
                name="projection_kind_shape"),
        ]
        indexes = [models.Index(fields=["account", "scope", "kind"])]


class ProjectionSource(models.Model):
    """Which statement a projection holds: the dirty-marking index and the erasure link."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    projection = models.ForeignKey(Projection, on_delete=models.CASCADE, related_name="links")
    knowledge = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="+")

    class Meta:
        db_table = "memhouse_projection_source"
        constraints = [
            models.UniqueConstraint(fields=["projection", "knowledge"],
                                    name="projection_source_unique"),
        ]
        indexes = [models.Index(fields=["account", "knowledge"])]


class RecallDocument(models.Model):
    """The minimal profile's recall projection (retrieval.recall): one searchable
    statement's vector copied after embedding, with its lane and a source watermark.

    Non-authoritative and rebuildable: every lookup joins canonical Knowledge, applies
    every reader filter there and requires `source_updated_at` to equal the statement's
    current `updated_at`, so a lifecycle change hides the copy at once and a refresh then
    removes or re-copies it. Deleting the statement or its vector (erasure, a dropped
    space) deletes the copy in the same transaction. Account archives leave it out.
    """

    class Lane(models.TextChoices):
        DIRECT = "direct"
        DERIVED = "derived"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    knowledge = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="+")
    vector = models.OneToOneField(KnowledgeVector, on_delete=models.CASCADE,
                                  related_name="recall_document")
    space = models.ForeignKey(EmbeddingSpace, on_delete=models.CASCADE, related_name="+")
    lane = models.CharField(max_length=8, choices=Lane.choices)
    embedding = VectorField()
    source_updated_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_recall_document"
        constraints = [
            models.UniqueConstraint(fields=["knowledge", "space"],
                                    name="recall_document_one_per_space"),
        ]
        indexes = [models.Index(fields=["account", "space", "lane"])]
