"""Governance records: validations (curator / consent / revalidation work items) and
peer questions (what a subject is asked to answer)."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from knowledge.models import Account, Knowledge, Peer, Scope


class Validation(models.Model):
    """One open or closed piece of review work on a knowledge item."""

    class Kind(models.TextChoices):
        REVIEW = "review"  # a held scope/account proposal awaiting a curator
        CONFIRMATION = "confirmation"  # a deferred peer-level statement awaiting its subject
        CONSENT = "consent"  # a promotion above peer level awaiting its subject's consent
        DISPUTE = "dispute"  # a subject contested the statement; a curator decides
        REVALIDATION = "revalidation"  # revalidate_after passed
        # a newer claim from someone else says otherwise; a curator decides which holds
        CONTRADICTION = "contradiction"

    class Status(models.TextChoices):
        OPEN = "open"
        RESOLVED = "resolved"
        EXPIRED = "expired"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    knowledge = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="validations")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    target_scope = models.ForeignKey(Scope, null=True, blank=True, on_delete=models.PROTECT)
    target_level = models.CharField(max_length=8, blank=True)
    reason = models.CharField(max_length=80)
    due_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.CharField(max_length=40, blank=True)
    resolved_by = models.ForeignKey(Peer, null=True, blank=True, on_delete=models.SET_NULL)
    note = models.TextField(blank=True)

    class Meta:
        db_table = "memhouse_validation"
        indexes = [models.Index(fields=["account", "status", "kind"])]
        constraints = [
            # At most one open validation of each kind per statement: redelivered pipeline
            # work cannot queue the same review twice.
            models.UniqueConstraint(fields=["knowledge", "kind"], condition=Q(status="open"),
                                    name="validation_one_open_per_kind"),
        ]


class PeerQuestion(models.Model):
    """A question put to a subject about a statement concerning them."""

    class Kind(models.TextChoices):
        CONFIRMATION = "confirmation"
        REVALIDATION = "revalidation"
        CONSENT = "consent"
        # Is the older of two claims that say otherwise still true? (yes keeps both)
        CONTRADICTION = "contradiction"

    class Status(models.TextChoices):
        OPEN = "open"
        ANSWERED = "answered"
        EXPIRED = "expired"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    validation = models.ForeignKey(Validation, on_delete=models.CASCADE, related_name="questions")
    knowledge = models.ForeignKey(Knowledge, on_delete=models.CASCADE, related_name="questions")
    peer = models.ForeignKey(Peer, on_delete=models.CASCADE, related_name="questions")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    text = models.TextField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    deadline = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)
    answered_at = models.DateTimeField(null=True, blank=True)
    answer = models.CharField(max_length=20, blank=True)

    class Meta:
        db_table = "memhouse_peer_question"
        indexes = [models.Index(fields=["account", "peer", "status"]),
                   models.Index(fields=["account", "status", "deadline"])]


class ErasureRecord(models.Model):
    """The durable erasure ledger: one row per hard-deleted message, document or peer.

    `account_id` is a plain column, not a foreign key, on purpose: the ledger outlives the
    Account row, so restoring an older archive of the Account skips what was erased after
    it was taken. It holds no erased content, only its SHA-256 (and, for a document, the
    SHA-256 of each version blob). Append-only (a trigger refuses UPDATE and DELETE) and
    under tenant RLS like every other Account table.
    """

    class Kind(models.TextChoices):
        MESSAGE = "message"
        DOCUMENT = "document"
        PEER = "peer"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account_id = models.UUIDField(db_index=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    target_id = models.UUIDField()
    sha256 = models.CharField(max_length=64)
    # Per-part digests: a document's version blobs; empty for messages and peers.
    content_hashes = models.JSONField(default=list, blank=True)
    erased_at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(max_length=100)
    # Counts only (messages, versions, knowledge deleted or retracted); never content.
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "memhouse_erasure_record"
        constraints = [
            models.UniqueConstraint(fields=["account_id", "kind", "target_id"],
                                    name="erasure_unique_target"),
        ]


class DeductionRun(models.Model):
    """One dream-time deduction attempt over a set of contributors (operational, not
    archived). The signature is the SHA-256 of the sorted contributor ids, so a
    redelivered or repeated run over the same inputs never asks the model again."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE)
    subject_peer = models.ForeignKey(Peer, on_delete=models.CASCADE, related_name="+")
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+")
    signature = models.CharField(max_length=64)
    provider = models.CharField(max_length=100)
    created = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memhouse_deduction_run"
        constraints = [
            models.UniqueConstraint(fields=["account", "signature"],
                                    name="deduction_run_unique_signature"),
        ]
