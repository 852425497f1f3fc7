"""Extractor interface and data types of the ingest pipeline.

An extractor turns one observed message into zero or more atomic, standalone claims. It is
pure: no database, no clock, no network except through an injected provider. The pipeline
owns persistence (a claim becomes a ``proposed`` Knowledge row with provenance pointing at
``source_message_id``) and governance.

The fields keep the memory model's dimensions apart:

* ``subject_peer_key`` is who the claim is about; the source is always the message
  (``source_message_id``), whose speaker may be someone else.
* ``relevant_from``/``relevant_until`` are valid time (half-open, ``[from, until)``) stated
  or implied by the text; ``ObservedMessage.occurred_at`` is belief-time evidence only.
* ``kind`` is the durable meaning of the claim and never encodes a date.
* ``confidence`` and ``sensitivity`` are independent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

__all__ = [
    "KINDS",
    "SENSITIVITIES",
    "ExtractedClaim",
    "ExtractionError",
    "Extractor",
    "ObservedMessage",
    "stricter_sensitivity",
    "validate_claim",
]

KINDS: tuple[str, ...] = ("fact", "preference", "relation", "skill", "event")
#: Ordered from least to most protected.
SENSITIVITIES: tuple[str, ...] = ("public", "internal", "personal", "restricted")


def _is_aware(value: datetime) -> bool:
    return value.tzinfo is not None and value.tzinfo.utcoffset(value) is not None


@dataclass(frozen=True)
class ObservedMessage:
    message_id: str  # uuid string of the stored Message
    text: str
    speaker_key: str  # peer_key of the speaking peer
    speaker_name: str  # display name of the speaker, e.g. "Caroline"
    occurred_at: datetime  # timezone-aware
    # lower-cased display name or alias -> peer_key
    known_peers: Mapping[str, str] = field(default_factory=dict)
    # The peer this message speaks to when the conversation leaves no doubt (the pipeline:
    # the only other speaker of a two-party session). An unnamed "you" resolves to it;
    # a vocative in the text ("Mel, you...") still wins.
    addressee_key: str | None = None
    # Current statements about the people in this message (id, subject key or None for the
    # scope, statement), nearest first: what a model-backed extractor may say a claim
    # replaces. The rule-based extractor ignores them (intake detects updates itself).
    current: tuple[tuple[str, str | None, str], ...] = ()
    # The conversation's turns just before this one as (speaker key, text), oldest first
    # (the pipeline: the previous messages of the session). What "she", "there" or "that
    # name" point back to; an extractor that ignores them keeps such words as said.
    recent_turns: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.occurred_at, datetime) or not _is_aware(self.occurred_at):
            raise ValueError("ObservedMessage.occurred_at must be a timezone-aware datetime")


@dataclass(frozen=True)
class ExtractedClaim:
    statement: str  # standalone natural-language statement
    subject_peer_key: str | None  # None = the claim is about the scope, not a person
    kind: str  # "fact" | "preference" | "relation" | "skill" | "event"
    confidence: float  # 0..1
    sensitivity: str  # "public" | "internal" | "personal" | "restricted"
    relevant_from: datetime | None  # valid time, aware, inclusive
    relevant_until: datetime | None  # valid time, aware, exclusive
    self_observation: bool  # speaker is the subject
    source_message_id: str
    evidence_span: tuple[int, int]  # char offsets into ObservedMessage.text
    # The id of an ObservedMessage.current statement this claim replaces (an update),
    # only ever one the extractor was shown.
    replaces: str | None = None


@runtime_checkable
class Extractor(Protocol):
    name: str
    version: str

    def extract(self, message: ObservedMessage) -> list[ExtractedClaim]: ...


class ExtractionError(Exception):
    """The extractor could not process the message (for example its model call failed).

    The pipeline should treat this as "no result, retry later", never as "no claims".
    """


def stricter_sensitivity(a: str, b: str) -> str:
    """The more protected of two sensitivity levels."""
    return a if SENSITIVITIES.index(a) >= SENSITIVITIES.index(b) else b


def validate_claim(claim: ExtractedClaim, message: ObservedMessage | None = None) -> None:
    """Raise ``ValueError`` when a claim has an out-of-range or inconsistent field.

    With ``message`` it also checks that the claim points at that message and that the
    evidence span lies inside its text.
    """
    if not isinstance(claim.statement, str) or not claim.statement.strip():
        raise ValueError("statement must be a non-empty string")
    if claim.subject_peer_key is not None and (
        not isinstance(claim.subject_peer_key, str) or not claim.subject_peer_key
    ):
        raise ValueError("subject_peer_key must be None or a non-empty string")
    if claim.kind not in KINDS:
        raise ValueError(f"kind {claim.kind!r} is not one of {KINDS}")
    if claim.sensitivity not in SENSITIVITIES:
        raise ValueError(f"sensitivity {claim.sensitivity!r} is not one of {SENSITIVITIES}")
    confidence = claim.confidence
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float))
        or not math.isfinite(confidence)
        or not 0.0 <= confidence <= 1.0
    ):
        raise ValueError(f"confidence {confidence!r} must be a number in [0, 1]")
    for label, value in (("relevant_from", claim.relevant_from),
                         ("relevant_until", claim.relevant_until)):
        if value is not None and (not isinstance(value, datetime) or not _is_aware(value)):
            raise ValueError(f"{label} must be None or a timezone-aware datetime")
    if (
        claim.relevant_from is not None
        and claim.relevant_until is not None
        and claim.relevant_from >= claim.relevant_until
    ):
        raise ValueError("relevant_from must be earlier than relevant_until")
    if not isinstance(claim.self_observation, bool):
        raise ValueError("self_observation must be a bool")
    if claim.self_observation and claim.subject_peer_key is None:
        raise ValueError("a self-observation needs a subject peer")
    if not isinstance(claim.source_message_id, str) or not claim.source_message_id:
        raise ValueError("source_message_id must be a non-empty string")
    span = claim.evidence_span
    if (
        not isinstance(span, tuple)
        or len(span) != 2
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in span)
        or not 0 <= span[0] < span[1]
    ):
        raise ValueError(f"evidence_span {span!r} must be (start, end) with 0 <= start < end")
    if message is not None:
        if claim.source_message_id != message.message_id:
            raise ValueError("source_message_id does not name the observed message")
        if span[1] > len(message.text):
            raise ValueError("evidence_span runs past the end of the message text")
        if claim.self_observation and claim.subject_peer_key != message.speaker_key:
            raise ValueError("a self-observation must have the speaker as subject")
