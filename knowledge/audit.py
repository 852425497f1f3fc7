"""The per-Account hash-chained audit log.

hash(n) = sha256(hash(n-1) || canonical_json(entry n)), with hash(0) = 64 zeros. Appends
take a transaction-scoped advisory lock per Account, so concurrent writers see each
other's head and `seq` stays gapless. A trigger refuses UPDATE and DELETE.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

GENESIS = "0" * 64


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def _ts(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def entry_body(*, account_id: Any, seq: int, event_type: str, actor: str, target_type: str,
               target_id: str, payload: Any, created_at: datetime) -> dict[str, Any]:
    return {
        "account_id": str(account_id), "seq": seq, "event_type": event_type, "actor": actor,
        "target_type": target_type, "target_id": target_id, "payload": payload,
        "created_at": _ts(created_at),
    }


def chain_hash(prev_hash: str, body: dict[str, Any]) -> str:
    return hashlib.sha256((prev_hash + canonical_json(body)).encode("utf-8")).hexdigest()


def _lock_key(account_id: Any) -> int:
    # A signed 64-bit key derived from the Account id, namespaced away from other locks.
    digest = hashlib.sha256(f"audit:{account_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


# A block's appends held back for one write at its end (see deferred): (account, entries).
_deferred: ContextVar[tuple[str, list[dict[str, Any]]] | None] = ContextVar(
    "memhouse_audit_deferred", default=None)


@contextmanager
def deferred(account_id: Any) -> Iterator[None]:
    """Hold back this block's appends for `account_id` and append them, in order, when
    it ends: the Account's advisory lock is then taken once, for the end of the
    transaction only, instead of from the first append to the commit. Use inside the
    transaction; an exception discards them with the rest of its work."""
    queue: list[dict[str, Any]] = []
    token = _deferred.set((str(account_id), queue))
    try:
        yield
    finally:
        _deferred.reset(token)
    append_many(account_id=account_id, entries=queue)


def _held_back(account_id: Any, entries: list[dict[str, Any]]) -> bool:
    held = _deferred.get()
    if held is None or held[0] != str(account_id):
        return False
    held[1].extend(entries)
    return True


def append(*, account_id: Any, event_type: str, actor: str, target_type: str = "",
           target_id: str = "", payload: dict[str, Any] | None = None) -> Any:
    """Append one entry (None when held back by `deferred`; it is written at its end)."""
    from knowledge.models import AuditEntry

    if _held_back(account_id, [{"event_type": event_type, "actor": actor,
                                "target_type": target_type, "target_id": target_id,
                                "payload": payload}]):
        return None

    payload = json.loads(canonical_json(payload or {}))
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_key(account_id)])
        last = (AuditEntry.objects.filter(account_id=account_id).order_by("-seq")
                .values("seq", "hash").first())
        seq = (last["seq"] + 1) if last else 1
        prev = last["hash"] if last else GENESIS
        created_at = timezone.now()
        body = entry_body(account_id=account_id, seq=seq, event_type=event_type, actor=actor,
                          target_type=target_type, target_id=target_id, payload=payload,
                          created_at=created_at)
        return AuditEntry.objects.create(
            account_id=account_id, seq=seq, event_type=event_type, actor=actor,
            target_type=target_type, target_id=target_id, payload=payload,
            created_at=created_at, prev_hash=prev, hash=chain_hash(prev, body),
        )


def append_many(*, account_id: Any, entries: list[dict[str, Any]]) -> list[Any]:
    """Append several entries (dicts of append's keyword arguments but account_id) in
    order under one hold of the Account's advisory lock: one head read, one insert.
    The chain is the same as appending them one by one."""
    from knowledge.models import AuditEntry

    if not entries or _held_back(account_id, entries):
        return []
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_key(account_id)])
        last = (AuditEntry.objects.filter(account_id=account_id).order_by("-seq")
                .values("seq", "hash").first())
        seq = last["seq"] if last else 0
        prev = last["hash"] if last else GENESIS
        created_at = timezone.now()
        rows = []
        for entry in entries:
            seq += 1
            payload = json.loads(canonical_json(entry.get("payload") or {}))
            fields = {"event_type": entry["event_type"], "actor": entry["actor"],
                      "target_type": entry.get("target_type", ""),
                      "target_id": entry.get("target_id", "")}
            body = entry_body(account_id=account_id, seq=seq, payload=payload,
                              created_at=created_at, **fields)
            digest = chain_hash(prev, body)
            rows.append(AuditEntry(account_id=account_id, seq=seq, payload=payload,
                                   created_at=created_at, prev_hash=prev, hash=digest,
                                   **fields))
            prev = digest
        return AuditEntry.objects.bulk_create(rows)


@dataclass(frozen=True)
class VerifyResult:
    account_id: uuid.UUID
    ok: bool
    entries: int
    head_seq: int
    head_hash: str
    broken_seq: int | None = None
    problem: str = ""


def verify(account_id: Any, *, expected_head: tuple[int, str] | None = None) -> VerifyResult:
    """Recompute the chain and name the first broken link.

    `expected_head` is (seq, hash) from an earlier export: the chain must still contain
    that entry unchanged, which detects truncation of the tail after the export.
    """
    from knowledge.models import AuditEntry

    prev = GENESIS
    count = 0
    head_seq = 0
    rows = (AuditEntry.objects.filter(account_id=account_id).order_by("seq")
            .values_list("seq", "event_type", "actor", "target_type", "target_id", "payload",
                         "created_at", "prev_hash", "hash").iterator(chunk_size=2000))
    seen_expected = expected_head is None
    for seq, event_type, actor, target_type, target_id, payload, created_at, prev_hash, h in rows:
        count += 1
        if seq != head_seq + 1:
            return VerifyResult(uuid.UUID(str(account_id)), False, count, head_seq, prev,
                                head_seq + 1, f"sequence gap: expected {head_seq + 1}, found {seq}")
        if prev_hash != prev:
            return VerifyResult(uuid.UUID(str(account_id)), False, count, head_seq, prev, seq,
                                "prev_hash does not match the previous entry")
        body = entry_body(account_id=account_id, seq=seq, event_type=event_type, actor=actor,
                          target_type=target_type, target_id=target_id, payload=payload,
                          created_at=created_at)
        if chain_hash(prev, body) != h:
            return VerifyResult(uuid.UUID(str(account_id)), False, count, head_seq, prev, seq,
                                "entry content does not match its hash")
        if expected_head is not None and seq == expected_head[0]:
            if h != expected_head[1]:
                return VerifyResult(uuid.UUID(str(account_id)), False, count, seq, h, seq,
                                    "entry differs from the exported head")
            seen_expected = True
        prev, head_seq = h, seq
    if not seen_expected and expected_head is not None:
        return VerifyResult(uuid.UUID(str(account_id)), False, count, head_seq, prev,
                            expected_head[0], "chain is shorter than the exported head")
    return VerifyResult(uuid.UUID(str(account_id)), True, count, head_seq, prev)
