"""How a statement and a page position travel in responses: the knowledge response fields
and the opaque keyset cursor, shared by every API that lists or returns statements."""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from knowledge.models import Knowledge
from memhouse.core.errors import ApplicationError


def encode_cursor(at: datetime, pk: uuid.UUID) -> str:
    """An opaque keyset cursor for (timestamp, id); every paginated listing uses it."""
    raw = f"{at.isoformat()}|{pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """(timestamp, id) of a cursor this API issued; 400 `invalid_cursor` otherwise."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at_text, pk_text = raw.split("|", 1)
        at = parse_datetime(at_text)
        if at is None:
            raise ValueError("no timestamp")
        return at, uuid.UUID(pk_text)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise ApplicationError("invalid_cursor", "the cursor is not one this API issued"
                               ) from exc


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def knowledge_out(k: Knowledge) -> dict[str, Any]:
    """The knowledge response fields, as every endpoint returning a statement shows it:
    statement, subject, scope, provenance count (the sources come from POST /lineage,
    which applies source visibility), confidence, sensitivity, belief and valid time,
    state and verification. Select subject_peer, scope and held_scope with the row."""
    return {
        "id": str(k.id), "statement": k.statement,
        "subject": k.subject_peer.key if k.subject_peer is not None else None,
        "scope": k.scope.path,
        "held_scope": k.held_scope.path if k.held_scope is not None else None,
        "kind": k.kind, "level": k.level, "confidence": k.confidence,
        "sensitivity": k.sensitivity, "state": k.state, "state_reason": k.state_reason,
        "verification": k.verification, "source_count": k.source_count,
        "inserted_at": iso(k.inserted_at), "updated_at": iso(k.updated_at),
        "revalidate_after": iso(k.revalidate_after), "expires_at": iso(k.expires_at),
        "relevant_from": iso(k.relevant_from), "relevant_until": iso(k.relevant_until),
        "supersedes": str(k.supersedes_id) if k.supersedes_id else None,
        # The unregistered person a held claim is about (registering them links it).
        "named_entity": k.named_entity or None,
        "lifecycle_doc": f"/docs/lifecycle.md#{k.state}",
    }
