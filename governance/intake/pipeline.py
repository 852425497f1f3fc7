"""The extraction pipeline: message or document version -> proposed knowledge -> gates.

Each unit of work has the read -> model -> write shape: one short transaction reads what
the extractor needs, the extractor runs with no database connection held (a model call
can take seconds), and one transaction writes the proposals and gate decisions. The
write re-checks the source's `extracted_at` marker under a row lock, so a redelivered
task is a no-op.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from governance import belief_time
from governance.intake.gates import gate_a, gate_b, normalised
from governance.intake.supersession import settle_update
from knowledge import lifecycle
from knowledge.ingest.extraction import ExtractedClaim, ExtractionError, Extractor, ObservedMessage
from knowledge.ingest.rule_extractor import RuleBasedExtractor
from knowledge.lifecycle import transition
from knowledge.models import DocumentVersion, Knowledge, KnowledgeSource, Message, Peer
from knowledge.services import knowledge_propose
from memhouse.tenancy import account_context

log = logging.getLogger(__name__)
PIPELINE = "system:pipeline"


def get_extractor() -> Extractor:
    """The configured extractor: the LLM one when a provider is set (MEMHOUSE_EXTRACTOR
    auto|llm), otherwise the model-free rule-based one."""
    choice = getattr(settings, "MEMHOUSE_EXTRACTOR", "auto")
    if choice in {"auto", "llm"}:
        from memhouse.llm import get_provider

        provider = get_provider()
        if provider is not None:
            from knowledge.ingest.llm_extractor import LLMExtractor

            return LLMExtractor(provider)
    return RuleBasedExtractor()


def known_peer_names(account_id: uuid.UUID, scope_id: uuid.UUID | None = None
                     ) -> dict[str, str]:
    """Lower-cased display names and aliases -> peer_key, for third-person subjects.

    A name shared by several peers resolves only to the one of them who has spoken in
    this scope; when that does not single one out, the name is left out: an ambiguous
    name never guesses a subject (and never sends a confirmation question to the wrong
    person).
    """
    by_name: dict[str, set[str]] = {}
    for key, display, aliases in Peer.objects.filter(account_id=account_id).values_list(
            "key", "display_name", "aliases"):
        for name in [display, *(aliases or [])]:
            if name:
                by_name.setdefault(name.lower(), set()).add(key)
    local: set[str] = set()
    if scope_id is not None and any(len(keys) > 1 for keys in by_name.values()):
        local = set(Message.objects.filter(account_id=account_id, scope_id=scope_id)
                    .values_list("peer__key", flat=True).distinct())
    names: dict[str, str] = {}
    for name, keys in by_name.items():
        candidates = keys if len(keys) == 1 else keys & local
        if len(candidates) == 1:
            names[name] = next(iter(candidates))
    return names


def _release_connection() -> None:
    # No connection is held across a model call; the next query reconnects.
    if not connection.in_atomic_block:
        connection.close()


def _extract(extractor: Extractor, observed: ObservedMessage) -> tuple[list[ExtractedClaim], str]:
    try:
        return extractor.extract(observed), f"{extractor.name}/{extractor.version}"
    except ExtractionError:
        # A failing model degrades to the model-free extractor, recorded on each row.
        log.warning("extractor %s failed; using the rule-based extractor", extractor.name)
        fallback = RuleBasedExtractor()
        return fallback.extract(observed), f"{fallback.name}/{fallback.version}"


def conversation_addressee(msg: Message) -> str | None:
    """Whom a message speaks to, when its session leaves no doubt: the session's messages
    up to this one come from exactly two peers, so "you" is the other one. A group
    conversation, a message outside a session, or a session's first speaker before anyone
    answered has no addressee (an unnamed "you" then stays unresolved)."""
    if msg.session_id is None:
        return None
    keys = set(Message.objects.filter(session_id=msg.session_id,
                                      occurred_at__lte=msg.occurred_at)
               .values_list("peer__key", flat=True).distinct()[:3])
    others = keys - {msg.peer.key}
    return others.pop() if len(keys) == 2 and len(others) == 1 else None


CURRENT_SHOWN = 10
CURRENT_POOL = 60


def current_statements(msg: Message, *, names: dict[str, str], addressee_key: str | None
                       ) -> tuple[tuple[str, str | None, str], ...]:
    """The current statements a model is shown so it can say which one a claim updates:
    about the speaker, the listener and peers named in the text, in this scope; the
    newest CURRENT_POOL, then the CURRENT_SHOWN closest to the message by embedding."""
    from governance.intake.supersession import CANDIDATE_STATES, cosines

    lowered = msg.text.lower()
    keys = {msg.peer.key, *([addressee_key] if addressee_key else []),
            *(key for name, key in names.items()
              if re.search(rf"\b{re.escape(name)}\b", lowered))}
    rows = list(Knowledge.objects.filter(
        account_id=msg.account_id, scope_id=msg.scope_id, state__in=CANDIDATE_STATES,
        subject_peer__key__in=sorted(keys)).order_by("-inserted_at")
        .values_list("id", "subject_peer__key", "statement")[:CURRENT_POOL])
    if not rows:
        return ()
    scores = cosines(msg.text, [statement for _, _, statement in rows])
    ranked = sorted(zip(scores, rows, strict=True), key=lambda pair: -pair[0])
    return tuple((str(i), key, statement) for _, (i, key, statement) in ranked[:CURRENT_SHOWN])


@dataclass
class Outcome:
    proposed: int = 0
    kept: list[str] | None = None

    def __post_init__(self) -> None:
        self.kept = self.kept or []


def _propose_and_gate(*, account_id: uuid.UUID, claim: ExtractedClaim, scope: Any,
                      policy: belief_time.Policy,
                      peers: dict[str, Peer], proposer: Peer | None, extractor: str,
                      source: dict[str, Any], message_text: str = "",
                      names: frozenset[str] = frozenset(),
                      said_at: Any = None) -> Knowledge | None:
    """One claim through proposal (belief time stamped by policy), Gate A, Gate B and
    the update rule."""
    subject = peers.get(claim.subject_peer_key) if claim.subject_peer_key else None
    if claim.subject_peer_key and subject is None:
        return None  # the extractor named a peer that does not exist: never guess
    stamps = policy.stamps(kind=claim.kind, sensitivity=claim.sensitivity,
                           inserted_at=timezone.now(), relevant_until=claim.relevant_until,
                           said_at=said_at, statement=claim.statement)
    item = knowledge_propose(
        account_id=account_id, statement=claim.statement, scope=scope, subject_peer=subject,
        actor=PIPELINE, kind=claim.kind,
        level=Knowledge.Level.PEER if subject else Knowledge.Level.SCOPE,
        confidence=claim.confidence, sensitivity=claim.sensitivity,
        relevant_from=claim.relevant_from, relevant_until=claim.relevant_until,
        proposed_by=proposer, extractor=extractor, sources=[source],
        revalidate_after=stamps["revalidate_after"], expires_at=stamps["expires_at"])
    kept = gate_a(item, excerpt=source.get("excerpt", ""), message_text=message_text,
                  names=names)
    if kept is None or kept.pk != item.pk:
        return kept  # rejected as junk, or merged into an existing statement
    item = gate_b(item, self_observation=claim.self_observation)
    settle_update(item, actor=PIPELINE, names=names, replaces=claim.replaces)
    return item


def process_message(account_id: str | uuid.UUID, message_id: str | uuid.UUID, *,
                    embed: bool = True) -> Outcome:
    """Extract, propose and gate one message. Idempotent under redelivery.

    With embed=False the caller enqueues embedding for `Outcome.kept` itself (a batch
    embeds in one call)."""
    account_id = uuid.UUID(str(account_id))
    extractor = get_extractor()
    # 1. read
    with account_context(account_id):
        msg = Message.objects.select_related("peer").filter(pk=message_id).first()
        if msg is None or msg.extracted_at is not None:
            return Outcome()
        names = known_peer_names(account_id, msg.scope_id)
        addressee = conversation_addressee(msg)
        current: tuple[tuple[str, str | None, str], ...] = ()
        if not isinstance(extractor, RuleBasedExtractor):
            current = current_statements(msg, names=names, addressee_key=addressee)
        observed = ObservedMessage(
            message_id=str(msg.id), text=msg.text, speaker_key=msg.peer.key,
            speaker_name=msg.peer.display_name, occurred_at=msg.occurred_at, known_peers=names,
            addressee_key=addressee, current=current)
    # 2. model (no connection held)
    if not isinstance(extractor, RuleBasedExtractor):
        _release_connection()
    from memhouse.usage import metering

    with metering(account_id):  # a direct call (not via a task) is billed too
        claims, extractor_id = _extract(extractor, observed)
    # 3. write
    outcome = Outcome()
    with account_context(account_id):
        locked = Message.objects.select_for_update(no_key=True).filter(pk=message_id,
                                                            extracted_at__isnull=True).first()
        if locked is None:
            return outcome  # another delivery got here first
        peers = {p.key: p for p in Peer.objects.filter(account_id=account_id)}
        policy = belief_time.policy_for(locked.scope)
        name_set = frozenset(names)
        for claim in claims:
            start, end = claim.evidence_span
            item = _propose_and_gate(
                account_id=account_id, claim=claim, scope=locked.scope, peers=peers,
                policy=policy, proposer=locked.peer, extractor=extractor_id,
                source={"message": locked, "excerpt": locked.text[start:end][:500]},
                message_text=locked.text, names=name_set, said_at=locked.occurred_at)
            outcome.proposed += 1
            if item is not None and item.state in lifecycle.EMBEDDABLE:
                outcome.kept.append(str(item.pk))  # type: ignore[union-attr]
        Message.objects.filter(pk=locked.pk).update(extracted_at=timezone.now())
        if embed:
            enqueue_embedding(account_id, outcome.kept or [])
            enqueue_message_embedding(account_id, [str(locked.pk)])
    return outcome




def enqueue_embedding(account_id: uuid.UUID | str, knowledge_ids: list[str]) -> None:
    if not knowledge_ids:
        return
    from retrieval.entity_tasks import index_entities as index_entities_task
    from retrieval.tasks import embed_knowledge as embed_knowledge_task

    ids = list(dict.fromkeys(knowledge_ids))
    transaction.on_commit(lambda: embed_knowledge_task.delay(str(account_id), ids), robust=True)
    # The entity mention index is rebuildable and internal; it follows every new statement.
    transaction.on_commit(lambda: index_entities_task.delay(str(account_id), ids), robust=True)


def enqueue_message_embedding(account_id: uuid.UUID | str, message_ids: list[str]) -> None:
    """The source message's own vector, for ask's source recall lane (rebuildable:
    `manage.py reembed` embeds any message this missed)."""
    if not message_ids:
        return
    from retrieval.tasks import embed_messages as embed_messages_task

    ids = list(dict.fromkeys(message_ids))
    transaction.on_commit(lambda: embed_messages_task.delay(str(account_id), ids), robust=True)


# --- Documents -------------------------------------------------------------------------

_LINE = re.compile(r"[^\n]+")


def prose_of(version_text: str, media_type: str) -> list[str]:
    """The prose of a version: for a JSON document (e.g. a LangGraph store value) its
    string values in document order, so no sentence starts with JSON syntax; any other
    text (and JSON that does not parse) as it is."""
    if media_type != "application/json":
        return [version_text]
    try:
        stack: list[Any] = [json.loads(version_text)]
    except (ValueError, RecursionError):
        return [version_text]
    out: list[str] = []
    while stack:  # iterative: no recursion limit to hit on deep values
        value = stack.pop()
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    return out


def document_claims(version_text: str, *, names: dict[str, str], occurred_at: Any,
                    media_type: str = "text/plain") -> list[tuple[ExtractedClaim, str]]:
    """Declarative sentences of a document as claims about the scope, or about a known
    peer when the sentence starts with that peer's name. Returns (claim, excerpt)."""
    from knowledge.ingest.rule_extractor import (
        classify_sensitivity,
        document_statements,
        sentence_spans,
    )

    out: list[tuple[ExtractedClaim, str]] = []
    for text in prose_of(version_text, media_type):
        for line in _LINE.finditer(text):  # a line break ends a sentence (headings, lists)
            for start, end in sentence_spans(line.group()):
                raw = line.group()[start:end].strip()
                if not raw or raw.endswith("?") or len(raw.split()) < 3 or raw.startswith("#"):
                    continue
                first = raw.split()[0].strip(",:;").lower()
                subject = names.get(first)
                offset = line.start() + start
                for parts in document_statements(raw, occurred_at, [
                        name for name, key in names.items() if subject and key == subject]):
                    claim = ExtractedClaim(
                        statement=parts.statement, subject_peer_key=subject, kind=parts.kind,
                        confidence=0.7, sensitivity=classify_sensitivity(parts.statement),
                        relevant_from=parts.relevant_from, relevant_until=parts.relevant_until,
                        self_observation=False, source_message_id="",
                        evidence_span=(offset, offset + end - start))
                    out.append((claim, raw))
    return out


def process_document_version(account_id: str | uuid.UUID, version_id: str | uuid.UUID
                             ) -> Outcome:
    """Propose statements for a new version; supersede those it no longer supports."""
    account_id = uuid.UUID(str(account_id))
    with account_context(account_id):
        version = DocumentVersion.objects.select_related("document__scope").filter(
            pk=version_id, tombstoned_at__isnull=True).first()
        if version is None:
            return Outcome()
        names = known_peer_names(account_id, version.document.scope_id)
        text, created, media_type = version.text, version.created_at, version.media_type
    claims = document_claims(text, names=names, occurred_at=created, media_type=media_type)
    outcome = Outcome()
    with account_context(account_id):
        version = DocumentVersion.objects.select_for_update(no_key=True).select_related(
            "document__scope").get(pk=version_id)
        if KnowledgeSource.objects.filter(document_version=version).exists():
            return outcome  # already processed (redelivery)
        document = version.document
        previous = (Knowledge.objects.filter(
            account_id=account_id, sources__document_version__document=document,
            state__in=sorted(lifecycle.CURRENT)).exclude(sources__document_version=version)
            .distinct())
        by_text = {normalised(k.statement): k for k in previous}
        peers = {p.key: p for p in Peer.objects.filter(account_id=account_id)}
        policy = belief_time.policy_for(document.scope)
        supported: set[uuid.UUID] = set()
        for claim, excerpt in claims:
            existing = by_text.get(normalised(claim.statement))
            if existing is not None:
                KnowledgeSource.objects.get_or_create(
                    account_id=account_id, knowledge=existing, document_version=version,
                    defaults={"excerpt": excerpt[:500]})
                supported.add(existing.pk)
                continue
            item = _propose_and_gate(
                account_id=account_id, claim=claim, scope=document.scope, peers=peers,
                policy=policy, names=frozenset(names), said_at=version.created_at,
                proposer=document.peer,
                extractor="document/sentences-v1",
                source={"document_version": version, "excerpt": excerpt[:500]})
            outcome.proposed += 1
            if item is not None:
                supported.add(item.pk)
                if item.state in lifecycle.EMBEDDABLE:
                    outcome.kept.append(str(item.pk))  # type: ignore[union-attr]
        for old in previous:
            if old.pk not in supported and lifecycle.SUPERSEDED in lifecycle.EDGES[old.state]:
                transition(old, lifecycle.SUPERSEDED, actor="system:document-sync",
                           reason="f4_document_revision",
                           evidence={"document_version": version.number})
        enqueue_embedding(account_id, outcome.kept or [])
    return outcome
