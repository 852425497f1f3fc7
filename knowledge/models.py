"""The memory model: data and invariants only. Writes live in services, reads in selectors.

Every durable table carries `account_id`; PostgreSQL row-level security (migration
0002_rls) keeps each Account's rows invisible to every other Account.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Greatest, Least
from django.utils import timezone


class Account(models.Model):
    """The isolation boundary. Its own row is visible only inside its own context."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_account"

    def __str__(self) -> str:
        return self.slug


class AccountOwned(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, db_index=True)

    class Meta:
        abstract = True


@dataclass(frozen=True)
class ScopeChain:
    """A read scope and its ancestors, nearest first: what a read there may see (`ids`) and
    the settings it inherits (nearest wins)."""

    ids: tuple[uuid.UUID, ...]
    paths: tuple[str, ...]
    settings: tuple[dict[str, Any], ...]

    @classmethod
    def of(cls, scopes: Sequence[Scope]) -> ScopeChain:
        return cls(tuple(s.id for s in scopes), tuple(s.path for s in scopes),
                   tuple(s.settings or {} for s in scopes))

    def setting(self, key: str, default: Any = None) -> Any:
        for values in self.settings:
            if key in values:
                return values[key]
        return default


class Scope(AccountOwned):
    """A node of the containment tree, addressed by path ("/", "/marketing/social")."""

    path = models.CharField(max_length=500)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                               related_name="children")
    name = models.CharField(max_length=200, blank=True)
    # Per-scope overrides (e.g. {"retrieval_profile": "thorough"}), inherited nearest-wins.
    settings = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_scope"
        constraints = [
            models.UniqueConstraint(fields=["account", "path"], name="scope_unique_path"),
            models.CheckConstraint(
                condition=Q(path="/", parent__isnull=True)
                | (~Q(path="/") & Q(parent__isnull=False)),
                name="scope_root_has_no_parent",
            ),
        ]

    # Not a column: the scope and its ancestors as read once per request by
    # knowledge.selectors.scope_for_read (scope_chain reads it, or loads it once).
    read_chain: ScopeChain | None = None

    def __str__(self) -> str:
        return self.path


def default_scope_paths() -> list[str]:
    return ["/"]


class Peer(AccountOwned):
    """One participant: a human (signs in with a password) or an agent (uses API keys).

    A human's role is the pair (is_curator, is_admin): member (neither), curator, or
    admin (both; knowledge.people). `scope_paths` are the scopes a person may use
    (descendants included), whichever credential they sign in with; a deactivated person
    (`deactivated_at`) can neither sign in nor use a token or key."""

    class Kind(models.TextChoices):
        HUMAN = "human"
        AGENT = "agent"

    key = models.CharField(max_length=200, help_text="peer_key, unique per Account")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    display_name = models.CharField(max_length=200)
    aliases = models.JSONField(default=list, blank=True)
    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True,
                                on_delete=models.PROTECT, related_name="peer")
    is_curator = models.BooleanField(default=False)
    is_admin = models.BooleanField(default=False)
    scope_paths = models.JSONField(default=default_scope_paths)
    deactivated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_peer"
        constraints = [
            models.UniqueConstraint(fields=["account", "key"], name="peer_unique_key"),
            # Only humans sign in, and only humans may curate.
            models.CheckConstraint(condition=Q(kind="human") | Q(user__isnull=True),
                                   name="peer_only_humans_have_users"),
            models.CheckConstraint(condition=Q(kind="human") | Q(is_curator=False, is_admin=False),
                                   name="peer_only_humans_curate"),
        ]

    def __str__(self) -> str:
        return self.key


class Credential(AccountOwned):
    """A hashed API credential. The prefix is visible (for lookup and display); the secret
    is shown once at creation and stored only as a SHA-256 digest."""

    class Kind(models.TextChoices):
        API_KEY = "api_key"  # long-lived, per peer (agents) or peerless (machine keys)
        TOKEN = "token"  # short-lived, minted for a human after a password login
        # One-time and expiring: the invitee sets their password with it in the console
        # (knowledge.people). Never accepted as an API credential.
        INVITATION = "invitation"

    kind = models.CharField(max_length=10, choices=Kind.choices)
    peer = models.ForeignKey(Peer, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="credentials")
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=32, unique=True)
    secret_hash = models.CharField(max_length=64)
    # Scope paths this credential may read and write; descendants included.
    scope_paths = models.JSONField(default=list)
    # Act-for grant of a machine credential (an agent's or a peerless key): the peers it
    # may read for and relay messages of (`peer_key`). Humans' credentials never get one:
    # a human reads and speaks only as themself (memhouse.acting).
    act_for_all = models.BooleanField(default=False)
    act_for = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memhouse_credential"
        constraints = [
            models.CheckConstraint(condition=Q(kind="api_key") | Q(peer__isnull=False),
                                   name="credential_token_has_peer"),
        ]


class Session(AccountOwned):
    """A conversation: groups messages for session summaries."""

    scope = models.ForeignKey(Scope, on_delete=models.PROTECT)
    external_id = models.CharField(max_length=200)
    started_at = models.DateTimeField(default=timezone.now)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "memhouse_session"
        constraints = [
            # Per scope: a key limited to /a/x can neither probe nor join /a/y's sessions.
            models.UniqueConstraint(fields=["account", "scope", "external_id"],
                                    name="session_unique_scope_ext"),
        ]


class Message(AccountOwned):
    """An immutable raw observation. Durable; knowledge is derived from it."""

    peer = models.ForeignKey(Peer, on_delete=models.PROTECT, related_name="messages")
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT)
    session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.PROTECT)
    client_message_id = models.CharField(max_length=200, null=True, blank=True)
    text = models.TextField()
    occurred_at = models.DateTimeField()
    inserted_at = models.DateTimeField(default=timezone.now)
    metadata = models.JSONField(default=dict, blank=True)
    # Set once the pipeline has produced proposals, so redelivery does not extract twice.
    extracted_at = models.DateTimeField(null=True, blank=True)
    # Dead letter: extraction raised for this message (knowledge/ingest/dead_letter.py).
    # The sweeper skips it until an administrator retries it; the batch goes on without it.
    extraction_failed_at = models.DateTimeField(null=True, blank=True)
    extraction_error = models.CharField(max_length=500, blank=True, default="")
    # Crash counter: a task counts its start (committed before the work) and stamps the
    # time, so a message whose processing keeps being cut off (a worker killed mid-task)
    # is set aside after MEMHOUSE_MAX_INGEST_ATTEMPTS starts instead of swept for ever.
    # An administrator's retry starts the count again (the audit entry keeps the old one).
    extraction_attempts = models.PositiveIntegerField(default=0)
    extraction_started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memhouse_message"
        constraints = [
            # Per scope, so whether an id exists elsewhere is no oracle and no squatting.
            models.UniqueConstraint(fields=["account", "scope", "client_message_id"],
                                    condition=Q(client_message_id__isnull=False),
                                    name="message_unique_scope_client_id"),
        ]
        indexes = [models.Index(fields=["account", "occurred_at"])]


class Document(AccountOwned):
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT)
    peer = models.ForeignKey(Peer, null=True, blank=True, on_delete=models.PROTECT)
    title = models.CharField(max_length=500)
    external_id = models.CharField(max_length=200, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memhouse_document"
        constraints = [
            # Among live documents only: a tombstoned document's id may be used again
            # (a store that deletes a key and puts it later).
            models.UniqueConstraint(fields=["account", "scope", "external_id"],
                                    condition=Q(external_id__isnull=False,
                                                deleted_at__isnull=True),
                                    name="document_unique_scope_ext_live"),
        ]


class DocumentVersion(AccountOwned):
    """One immutable version: the original blob and its extracted text."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    media_type = models.CharField(max_length=100, default="text/plain")
    blob = models.BinaryField()
    sha256 = models.CharField(max_length=64)
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    tombstoned_at = models.DateTimeField(null=True, blank=True)
    # Set by the pipeline in the transaction that writes the version's statements (also
    # when it yields none), so a redelivered task does not extract it twice and a writer
    # waiting on it knows it is done (as Message.extracted_at).
    processed_at = models.DateTimeField(null=True, blank=True)
    # Extraction raised for this version (not a database error, which is retried): it is
    # set aside with the error's class and message, never a traceback.
    processing_failed_at = models.DateTimeField(null=True, blank=True)
    processing_error = models.CharField(max_length=500, blank=True, default="")
    # The crash counter, as a message's extraction_attempts / extraction_started_at.
    processing_attempts = models.PositiveIntegerField(default=0)
    processing_started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memhouse_document_version"
        constraints = [
            models.UniqueConstraint(fields=["document", "number"], name="docversion_unique_number"),
        ]


class Knowledge(AccountOwned):
    """One natural-language statement plus the metadata that governs it.

    `statement` is immutable (a database trigger refuses updates; a change mints a new row
    that supersedes this one) and `state` changes only through knowledge.lifecycle.transition.
    """

    class Kind(models.TextChoices):
        FACT = "fact"
        PREFERENCE = "preference"
        RELATION = "relation"
        SKILL = "skill"
        EVENT = "event"

    class Level(models.TextChoices):
        PEER = "peer"
        SCOPE = "scope"
        ACCOUNT = "account"

    class Sensitivity(models.TextChoices):
        PUBLIC = "public"
        INTERNAL = "internal"
        PERSONAL = "personal"
        RESTRICTED = "restricted"

    class Verification(models.TextChoices):
        PENDING = "pending"
        GATE_KEEP = "gate_keep"
        GATE_REJECT = "gate_reject"
        GATE_DEFER = "gate_defer"
        CURATOR_APPROVED = "curator_approved"
        CURATOR_REJECTED = "curator_rejected"
        SUBJECT_CONFIRMED = "subject_confirmed"
        SUBJECT_DISPUTED = "subject_disputed"
        SUBJECT_REDACTED = "subject_redacted"
        SUBJECT_DENIED = "subject_denied"
        WORKER = "worker"
        SOURCE_REMOVED = "source_removed"

    # Statement
    statement = models.TextField()
    # Subject: a peer, or (subject_peer null) the anchoring scope itself.
    subject_peer = models.ForeignKey(Peer, null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="knowledge_about")
    scope = models.ForeignKey(Scope, on_delete=models.PROTECT, related_name="knowledge",
                              help_text="Where the statement is anchored.")
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.FACT)
    level = models.CharField(max_length=8, choices=Level.choices, default=Level.PEER)
    # Confidence and sensitivity are independent on purpose.
    confidence = models.FloatField(default=0.5)
    sensitivity = models.CharField(max_length=12, choices=Sensitivity.choices,
                                   default=Sensitivity.INTERNAL)
    # Belief time: when the system holds the claim.
    inserted_at = models.DateTimeField(default=timezone.now)
    revalidate_after = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Valid time: when the claim is true in the world.
    relevant_from = models.DateTimeField(null=True, blank=True)
    relevant_until = models.DateTimeField(null=True, blank=True)
    # Governance.
    state = models.CharField(max_length=20, default="proposed")
    verification = models.CharField(max_length=20, choices=Verification.choices,
                                    default=Verification.PENDING)
    state_reason = models.CharField(max_length=80, default="f4_pipeline_proposed")
    held_scope = models.ForeignKey(Scope, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="held_knowledge")
    supersedes = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="superseded_by")
    # Provenance summary; the rows are KnowledgeSource.
    source_count = models.PositiveIntegerField(default=0)
    # Who proposed it (the source actor), distinct from the subject.
    proposed_by = models.ForeignKey(Peer, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="knowledge_proposed")
    extractor = models.CharField(max_length=40, blank=True)
    # Model-derived statements: the durable identity of the prompt that produced them
    # (knowledge.prompts; operation + digest, never the version string). Not returned by
    # any API; lineage reads the typed operation from it.
    prompt_identity = models.CharField(max_length=100, blank=True, default="")
    # The person a claim is about when they are not a registered peer ("Jordan told me he
    # is quitting Google": "Jordan"): the claim is held for a curator with no subject, and
    # registering that person later makes them its subject (governance.intake.named).
    named_entity = models.CharField(max_length=200, blank=True, default="")
    # Watermark for derived projections; bumped by every transition.
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_knowledge"
        constraints = [
            models.CheckConstraint(condition=Q(confidence__gte=0) & Q(confidence__lte=1),
                                   name="knowledge_confidence_range"),
            models.CheckConstraint(
                condition=Q(relevant_from__isnull=True) | Q(relevant_until__isnull=True)
                | Q(relevant_until__gte=models.F("relevant_from")),
                name="knowledge_valid_time_order",
            ),
            models.CheckConstraint(condition=~Q(statement=""),
                                   name="knowledge_statement_nonempty"),
        ]
        indexes = [
            models.Index(fields=["account", "state"]),
            models.Index(fields=["account", "subject_peer"]),
            models.Index(fields=["account", "scope", "state"]),
            # Registering a person looks up the held claims that name them.
            models.Index(fields=["account", "named_entity"], condition=~Q(named_entity=""),
                         name="knowledge_named_entity"),
        ]

    def __str__(self) -> str:
        return self.statement[:60]


class KnowledgeSource(AccountOwned):
    """Provenance: one supporting message or document version."""

    knowledge = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="sources")
    message = models.ForeignKey(Message, null=True, blank=True, on_delete=models.CASCADE)
    document_version = models.ForeignKey(DocumentVersion, null=True, blank=True,
                                         on_delete=models.CASCADE)
    excerpt = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_knowledge_source"
        constraints = [
            models.CheckConstraint(
                condition=(Q(message__isnull=False) & Q(document_version__isnull=True))
                | (Q(message__isnull=True) & Q(document_version__isnull=False)),
                name="source_exactly_one_origin",
            ),
            models.UniqueConstraint(fields=["knowledge", "message"],
                                    condition=Q(message__isnull=False), name="source_unique_msg"),
            models.UniqueConstraint(fields=["knowledge", "document_version"],
                                    condition=Q(document_version__isnull=False),
                                    name="source_unique_docv"),
        ]


class Relation(AccountOwned):
    """A typed edge between two knowledge items."""

    class Type(models.TextChoices):
        SUPPORTS = "supports"
        CONTRADICTS = "contradicts"
        DERIVED_FROM = "derived_from"
        CONSOLIDATES = "consolidates"
        SUPERSEDES = "supersedes"
        SAME_ENTITY = "same_entity"
        RELATED = "related"

    source = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="relations_out")
    target = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="relations_in")
    type = models.CharField(max_length=20, choices=Type.choices)
    confidence = models.FloatField(default=1.0)
    created_at = models.DateTimeField(default=timezone.now)
    # A `contradicts` edge points from the newer claim (by when it was said) to the older
    # one. Reads mark the older `possibly_outdated` until the pair is settled: the subject
    # or a curator keeps both (settled_at set) or supersedes the older one.
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memhouse_relation"
        constraints = [
            models.UniqueConstraint(fields=["source", "target", "type"], name="relation_unique"),
            models.CheckConstraint(condition=~Q(source=models.F("target")),
                                   name="relation_no_loop"),
        ]


class ScopeRelation(AccountOwned):
    """An administrator's link between two scopes (undirected: one row per pair).

    Relation expansion may follow it from a statement anchored at one endpoint to
    statements anchored at the other, and only when the reader is authorised for both
    endpoints (retrieval.strategies.relation): a link never grants access, it only follows
    access the reader already has. Durable configuration, so archives carry it."""

    source = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="links_out")
    target = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="links_in")
    created_by = models.ForeignKey(Peer, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_scope_relation"
        constraints = [
            models.CheckConstraint(condition=~Q(source=models.F("target")),
                                   name="scope_relation_no_loop"),
            # Undirected: (a, b) and (b, a) are the same link.
            models.UniqueConstraint(Least("source", "target"), Greatest("source", "target"),
                                    name="scope_relation_unique_pair"),
        ]


class LifecycleEvent(AccountOwned):
    """One state change (or governed self-edge), written only by lifecycle.transition."""

    knowledge = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=20, null=True, blank=True)
    to_state = models.CharField(max_length=20)
    reason = models.CharField(max_length=80)
    verification = models.CharField(max_length=20)
    actor_peer = models.ForeignKey(Peer, null=True, blank=True, on_delete=models.SET_NULL)
    actor = models.CharField(max_length=100, help_text="peer:<key> or system:<worker>")
    evidence = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_lifecycle_event"
        indexes = [models.Index(fields=["account", "knowledge", "created_at"])]


class AuditEntry(AccountOwned):
    """Append-only, hash-chained audit log per Account (see knowledge.audit)."""

    seq = models.BigIntegerField()
    event_type = models.CharField(max_length=60)
    actor = models.CharField(max_length=100)
    target_type = models.CharField(max_length=40, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        db_table = "memhouse_audit_entry"
        constraints = [
            models.UniqueConstraint(fields=["account", "seq"], name="audit_unique_seq"),
        ]
        ordering = ["seq"]


class AuditVerification(AccountOwned):
    """One recomputation of an Account's audit chain (schedule, on demand or command).

    The audit page shows the newest row instead of re-hashing the whole chain on every
    view; derived, so archives leave it out and it is dropped with its Account."""

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", "nightly schedule"
        ON_DEMAND = "on_demand", "on demand"
        COMMAND = "command", "manage.py verify_audit"

    verified_at = models.DateTimeField(default=timezone.now)
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    ok = models.BooleanField()
    entries = models.BigIntegerField()
    head_seq = models.BigIntegerField()
    head_hash = models.CharField(max_length=64)
    broken_seq = models.BigIntegerField(null=True, blank=True)
    problem = models.CharField(max_length=200, blank=True)

    class Meta:
        db_table = "memhouse_audit_verification"
        indexes = [models.Index(fields=["account", "-verified_at"])]


class DocumentChunk(AccountOwned):
    """A rebuildable slice of a document version's text (paragraph-sized)."""

    version = models.ForeignKey(DocumentVersion, on_delete=models.CASCADE, related_name="chunks")
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()

    class Meta:
        db_table = "memhouse_document_chunk"
        constraints = [
            models.UniqueConstraint(fields=["version", "ordinal"], name="chunk_unique_ordinal"),
        ]


class UsageEntry(AccountOwned):
    """The durable usage ledger: one row per successful metered API call."""

    class Kind(models.TextChoices):
        INGEST = "ingest"  # units = messages stored
        INGEST_CHARS = "ingest_chars"  # units = characters of stored message / version text
        DOCUMENT = "document"  # units = versions stored
        SEARCH = "search"
        ASK = "ask"
        MODEL_CALL = "model_call"  # generation-model calls made for a request
        CONTEXT = "context"
        LINEAGE = "lineage"
        STABLE_PROFILE = "stable_profile"

    kind = models.CharField(max_length=20, choices=Kind.choices)
    units = models.PositiveIntegerField(default=1)
    credential_id = models.UUIDField(null=True, blank=True)
    peer_key = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_usage_entry"
        indexes = [models.Index(fields=["account", "kind", "created_at"])]
