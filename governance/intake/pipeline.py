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
from django.db.models import Min
from django.utils import timezone

from governance import belief_time
from governance.intake.gates import (
    NORMALISED_SQL,
    PIPELINE,
    agent_claim_about_user,
    normalised,
)
from governance.intake.named import prior_text, settle_subject
from governance.intake.supersession import change_told, may_conflict, settle_update
from governance.intake.update_pairs import find_learned_conflict
from knowledge import audit, lifecycle
from knowledge.ingest.dead_letter import describe
from knowledge.ingest.extraction import ExtractedClaim, ExtractionError, Extractor, ObservedMessage
from knowledge.ingest.rule_extractor import RuleBasedExtractor
from knowledge.lifecycle import transition
from knowledge.models import (
    Document,
    DocumentVersion,
    Knowledge,
    KnowledgeSource,
    Message,
    Peer,
)
from knowledge.selectors import TOO_MANY_STATEMENTS
from knowledge.services import knowledge_merge_sources, knowledge_propose_many
from memhouse.core.tenancy import account_context

log = logging.getLogger(__name__)


def get_extractor() -> Extractor:
    """The configured extractor: the LLM one when a provider is set (MEMHOUSE_EXTRACTOR
    auto|llm), otherwise the model-free rule-based one."""
    choice = getattr(settings, "MEMHOUSE_EXTRACTOR", "auto")
    if choice in {"auto", "llm"}:
        from memhouse.core.llm import get_provider

        provider = get_provider()
        if provider is not None:
            from knowledge.ingest.llm_extractor import LLMExtractor

            return LLMExtractor(provider)
    return RuleBasedExtractor()


def batches_messages() -> bool:
    """Whether a batch of messages is extracted and written together: with the
    model-free extractor. A model's claims about one message may name the statements
    of the messages before it (ObservedMessage.current), so a model goes one message
    at a time."""
    return isinstance(get_extractor(), RuleBasedExtractor)


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
    return conversation_addressees([msg])[msg.pk]


#: Earlier turns of the session the extractor sees, for "she", "there", "that name".
RECENT_TURNS = 2


def recent_turns(msg: Message) -> tuple[tuple[str, str], ...]:
    """The session's RECENT_TURNS messages before this one as (speaker key, text), oldest
    first; none outside a session. Turns of one batch often share occurred_at, so arrival
    (inserted_at) orders them."""
    return recent_turns_many([msg])[msg.pk]


def recent_turns_many(msgs: list[Message]) -> dict[uuid.UUID, tuple[tuple[str, str], ...]]:
    """recent_turns for a batch in one query (a LATERAL look-back per message), so the
    batch path keeps its constant number of queries per message."""
    out: dict[uuid.UUID, tuple[tuple[str, str], ...]] = {m.pk: () for m in msgs}
    ids = [m.pk for m in msgs if m.session_id is not None]
    if not ids:
        return out
    table, peers = Message._meta.db_table, Peer._meta.db_table
    rows: dict[uuid.UUID, list[tuple[str, str]]] = {}
    with connection.cursor() as cur:
        cur.execute(
            f"""SELECT m.id, prev.key, prev.text
                  FROM {table} m
                  CROSS JOIN LATERAL (
                      SELECT p.key, e.text, e.occurred_at, e.inserted_at
                        FROM {table} e JOIN {peers} p ON p.id = e.peer_id
                       WHERE e.session_id = m.session_id
                         AND (e.occurred_at, e.inserted_at) < (m.occurred_at, m.inserted_at)
                       ORDER BY e.occurred_at DESC, e.inserted_at DESC
                       LIMIT %s) prev
                 WHERE m.id = ANY(%s)
                 ORDER BY m.id, prev.occurred_at, prev.inserted_at""",
            [RECENT_TURNS, ids])
        for mid, key, text in cur.fetchall():
            rows.setdefault(mid, []).append((key, text))
    out.update({mid: tuple(turns) for mid, turns in rows.items()})
    return out


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


def process_message(account_id: str | uuid.UUID, message_id: str | uuid.UUID, *,
                    embed: bool = True) -> Outcome:
    """Extract, propose and gate one message (a batch of one). Idempotent under
    redelivery. Raises what its extraction or its write raised.

    With embed=False the caller enqueues embedding for `Outcome.kept` itself."""
    outcome, failed = process_messages_batch(account_id, [message_id], embed=embed)
    for error in failed.values():
        raise error
    return outcome


def conversation_addressees(msgs: list[Message]) -> dict[uuid.UUID, str | None]:
    """conversation_addressee for many messages, with one query for their sessions."""
    sessions = {m.session_id for m in msgs if m.session_id is not None}
    # Who had spoken by a message's time: each speaker's first message of the session,
    # not every message of it (a long session read whole at every batch grew with it).
    said: dict[uuid.UUID, list[tuple[Any, str]]] = {}
    for session_id, key, at in (Message.objects.filter(session_id__in=sessions)
                                .values_list("session_id", "peer__key")
                                .annotate(first=Min("occurred_at")).order_by()):
        said.setdefault(session_id, []).append((at, key))
    out: dict[uuid.UUID, str | None] = {}
    for msg in msgs:
        keys = {key for at, key in said.get(msg.session_id, ()) if at <= msg.occurred_at} \
            if msg.session_id is not None else set()
        others = keys - {msg.peer.key}
        out[msg.pk] = others.pop() if len(keys) == 2 and len(others) == 1 else None
    return out


def process_messages_batch(account_id: str | uuid.UUID, message_ids: list[Any], *,
                           embed: bool = True
                           ) -> tuple[Outcome, dict[str, BaseException]]:
    """Extract, propose, gate and place a batch of messages with set-based writes.

    Read -> model -> write, as for one message: one short transaction reads every
    message and what the extractor needs, the extractor runs per message (no connection
    held for a model), and one transaction writes the whole batch: one insert of the
    statements, one of their sources, one lifecycle record for the proposals, then the
    gates' moves through lifecycle.transition_many (BatchPlacer keeps the decisions the
    same, in the same order, as one message at a time). The messages are locked and
    marked extracted in that transaction, so a redelivered batch changes nothing.

    Returns the outcome and the messages whose extraction raised (message id ->
    error; the caller dead-letters them). An error in the write rolls the batch back
    and propagates: the caller then retries the messages one at a time, so a poison
    message is set aside alone.
    """
    account_id = uuid.UUID(str(account_id))
    order = {uuid.UUID(str(mid)): i for i, mid in enumerate(message_ids)}
    extractor = get_extractor()
    rule_based = isinstance(extractor, RuleBasedExtractor)
    # 1. read
    with account_context(account_id):
        msgs = sorted(Message.objects.select_related("peer", "scope").filter(
            pk__in=list(order), extracted_at__isnull=True), key=lambda m: order[m.pk])
        names = {sid: known_peer_names(account_id, sid) for sid in {m.scope_id for m in msgs}}
        addressees = conversation_addressees(msgs)
        recent = recent_turns_many(msgs)
        observed = [ObservedMessage(
            message_id=str(msg.id), text=msg.text, speaker_key=msg.peer.key,
            speaker_name=msg.peer.display_name, occurred_at=msg.occurred_at,
            known_peers=names[msg.scope_id], addressee_key=addressees[msg.pk],
            recent_turns=recent[msg.pk],
            current=() if rule_based else current_statements(
                msg, names=names[msg.scope_id], addressee_key=addressees[msg.pk]))
            for msg in msgs]
    # 2. model (no connection held)
    if not rule_based:
        _release_connection()
    from django.db import OperationalError

    from memhouse.core.metering import metering

    extracted: dict[uuid.UUID, tuple[list[ExtractedClaim], str]] = {}
    failed: dict[str, BaseException] = {}
    with metering(account_id):  # a direct call (not via a task) is billed too
        for msg, seen in zip(msgs, observed, strict=True):
            try:
                extracted[msg.pk] = _extract(extractor, seen)
            except OperationalError:
                raise
            except Exception as exc:  # this message only: the batch goes on
                failed[str(msg.pk)] = exc
    # 3. write (the audit entries of the whole batch are appended at its end, under one
    # hold of the Account's audit lock)
    outcome = Outcome()
    with account_context(account_id), audit.deferred(account_id):
        locked = set(Message.objects.select_for_update(no_key=True).filter(
            pk__in=list(extracted), extracted_at__isnull=True).values_list("pk", flat=True))
        work = [msg for msg in msgs if msg.pk in locked]  # others: another delivery did it
        if not work:
            return outcome, failed
        peers = {p.key: p for p in Peer.objects.filter(account_id=account_id)}
        policies: dict[uuid.UUID, belief_time.Policy] = {}
        proposals: list[dict[str, Any]] = []
        plans: list[tuple[ExtractedClaim, Message, str]] = []
        for msg in work:
            claims, extractor_id = extracted[msg.pk]
            if msg.scope_id not in policies:
                policies[msg.scope_id] = belief_time.policy_for(msg.scope)
            listener = peers.get(addressees[msg.pk] or "")
            for claim in claims:
                outcome.proposed += 1
                start, end = claim.evidence_span
                excerpt = msg.text[start:end][:500]
                claim = agent_claim_about_user(claim, excerpt=excerpt, speaker=msg.peer,
                                               addressee=listener)
                # A claim about a named person never stays the speaker's (intake.named).
                claim, named = settle_subject(claim, speaker=msg.peer,
                                              names=names[msg.scope_id],
                                              context=prior_text(recent[msg.pk], msg.text[:start]))
                subject = peers.get(claim.subject_peer_key) if claim.subject_peer_key else None
                if claim.subject_peer_key and subject is None:
                    continue  # the extractor named a peer that does not exist: never guess
                stamps = policies[msg.scope_id].stamps(
                    kind=claim.kind, sensitivity=claim.sensitivity, inserted_at=timezone.now(),
                    relevant_until=claim.relevant_until, said_at=msg.occurred_at,
                    statement=claim.statement)
                proposals.append(dict(
                    statement=claim.statement, scope=msg.scope, subject_peer=subject,
                    kind=claim.kind,
                    level=Knowledge.Level.PEER if subject else Knowledge.Level.SCOPE,
                    confidence=claim.confidence, sensitivity=claim.sensitivity,
                    relevant_from=claim.relevant_from, relevant_until=claim.relevant_until,
                    proposed_by=msg.peer, extractor=extractor_id, named_entity=named,
                    sources=[{"message": msg, "excerpt": excerpt}],
                    revalidate_after=stamps["revalidate_after"],
                    expires_at=stamps["expires_at"]))
                plans.append((claim, msg, excerpt))
        items = knowledge_propose_many(account_id=account_id, proposals=proposals,
                                       actor=PIPELINE)
        placer = BatchPlacer(account_id, items)
        for item, (claim, msg, excerpt) in zip(items, plans, strict=True):
            kept = placer.place(item, claim=claim, excerpt=excerpt, message_text=msg.text,
                                names=frozenset(names[msg.scope_id]))
            if kept is not None and kept.state in lifecycle.EMBEDDABLE:
                outcome.kept.append(str(kept.pk))  # type: ignore[union-attr]
        placer.finish()
        Message.objects.filter(pk__in=locked).update(extracted_at=timezone.now())
        if embed:
            enqueue_batch_embedding(account_id, outcome.kept or [], [str(m.pk) for m in work])
    return outcome, failed


class BatchPlacer:
    """Gate A, Gate B and the update rule for a batch of fresh rows, one row after the
    other in the batch's order, with the decisions gate_a, gate_b and settle_update make
    row by row.

    Gate moves are collected and written together by lifecycle.transition_many. They are
    flushed before anything reads state back from the database (the update rule's
    candidate query, which then sees every earlier row placed and every later one still
    proposed, as row by row), and at the end. The duplicate lookup reads an index of the
    current rows with the batch's texts, loaded once and kept in step: a placed row
    joins it; a supersession (rare) reloads it.
    """

    def __init__(self, account_id: uuid.UUID, items: list[Knowledge]) -> None:
        self.account_id = account_id
        self.items = items
        self.pending: list[lifecycle.Change] = []
        self.reviews: dict[str, list[Knowledge]] = {lifecycle.PROVISIONAL: [],
                                                     lifecycle.HELD: []}
        self._norm: dict[uuid.UUID, str] = {}
        self._index: dict[tuple[Any, Any, str], list[Knowledge]] | None = None
        self._now = timezone.now()

    def finish(self) -> None:
        """Write what is pending and open the reviews deferred placements ask for."""
        from governance.intake.gates import open_gate_b_reviews_for_new

        self.flush()
        # Opened for the placement, whatever happened to the row since (as row by row).
        open_gate_b_reviews_for_new(provisional=self.reviews[lifecycle.PROVISIONAL],
                                    held=self.reviews[lifecycle.HELD], now=self._now)
        self.reviews = {lifecycle.PROVISIONAL: [], lifecycle.HELD: []}

    def flush(self) -> None:
        if self.pending:
            lifecycle.transition_many(self.pending, actor=PIPELINE)
            self.pending = []

    def _move(self, move: lifecycle.Change) -> None:
        # Applied to the object now (the next decisions read it), written at the flush.
        move.item.state, move.item.state_reason = move.to, move.reason
        move.item.verification = move.verification or move.item.verification
        for name, value in move.changes.items():
            setattr(move.item, name, value)
        self.pending.append(move)

    def _load_index(self) -> dict[tuple[Any, Any, str], list[Knowledge]]:
        # The key is the database's normalisation (find_duplicate compares with it).
        self.flush()
        texts = sorted({normalised(item.statement) for item in self.items})
        scopes = sorted({item.scope_id for item in self.items})
        index: dict[tuple[Any, Any, str], list[Knowledge]] = {}
        for row in (Knowledge.objects.filter(account_id=self.account_id, scope_id__in=scopes,
                                             state__in=sorted(lifecycle.CURRENT))
                    .extra(select={"norm": NORMALISED_SQL},
                           where=[f"{NORMALISED_SQL} = ANY(%s)"], params=[texts])
                    .order_by("inserted_at")):
            index.setdefault((row.scope_id, row.subject_peer_id, row.norm), []).append(row)
        if not self._norm:
            self._norm = dict(Knowledge.objects.filter(pk__in=[i.pk for i in self.items])
                              .extra(select={"norm": NORMALISED_SQL})
                              .values_list("pk", "norm"))
        return index

    def _duplicate_of(self, item: Knowledge) -> Knowledge | None:
        if self._index is None:
            self._index = self._load_index()
        rows = self._index.get((item.scope_id, item.subject_peer_id, normalised(item.statement)))
        current = [row for row in rows or () if row.state in lifecycle.CURRENT]
        return min(current, key=lambda row: row.inserted_at) if current else None

    def _indexed(self, item: Knowledge) -> None:
        if self._index is not None and item.state in lifecycle.CURRENT:
            key = (item.scope_id, item.subject_peer_id, self._norm[item.pk])
            self._index.setdefault(key, []).append(item)

    def place(self, item: Knowledge, *, claim: ExtractedClaim, excerpt: str,
              message_text: str, names: frozenset[str]) -> Knowledge | None:
        """One fresh row through Gate A, Gate B and the update rule; returns the row that
        carries the claim (the original for a duplicate), or None when rejected."""
        from governance.intake.gates import gate_a_refusal, gate_b_placement, refusal_evidence
        from governance.intake.supersession import is_candidate

        refusal = gate_a_refusal(item, excerpt=excerpt, message_text=message_text, names=names)
        if refusal is not None:
            self._move(lifecycle.Change(
                item, lifecycle.REJECTED, refusal, Knowledge.Verification.GATE_REJECT,
                evidence=refusal_evidence(refusal, item, excerpt=excerpt,
                                          message_text=message_text)))
            return None
        original = self._duplicate_of(item)
        if original is not None:
            knowledge_merge_sources(source=item, into=original)
            self._move(lifecycle.Change(item, lifecycle.REJECTED, "f4_gate_a_duplicate",
                                        Knowledge.Verification.GATE_REJECT,
                                        evidence={"duplicate_of": str(original.pk)}))
            return original
        self._move(gate_b_placement(item, self_observation=claim.self_observation))
        if item.state in self.reviews:
            self.reviews[item.state].append(item)  # opened in finish(), all in one go
        if item.state in (lifecycle.ACTIVE, lifecycle.PROVISIONAL) and (
                claim.replaces is not None or is_candidate(item.statement)
                or may_conflict(item.statement, names) or change_told(message_text)):
            if claim.replaces is not None:
                self.flush()  # a model named the row: read it back as written
            # The rule reads the pending rows in memory; an update found writes them first.
            if settle_update(item, actor=PIPELINE, names=names, replaces=claim.replaces,
                             recent=[move.item for move in self.pending],
                             before_write=self.flush, message_text=message_text,
                             learned=find_learned_conflict) in ("superseded_old",
                                                                "late_arrival"):
                self._index = None  # a current row left: reload before the next lookup
                return item
        self._indexed(item)
        return item


def enqueue_embedding(account_id: uuid.UUID | str, knowledge_ids: list[str]) -> None:
    if not knowledge_ids:
        return
    from retrieval.entity_tasks import index_entities as index_entities_task
    from retrieval.tasks import embed_knowledge as embed_knowledge_task

    ids = list(dict.fromkeys(knowledge_ids))
    transaction.on_commit(lambda: embed_knowledge_task.delay(str(account_id), ids), robust=True)
    # The entity mention index is rebuildable and internal; it follows every new statement.
    transaction.on_commit(lambda: index_entities_task.delay(str(account_id), ids), robust=True)


def enqueue_batch_embedding(account_id: uuid.UUID | str, knowledge_ids: list[str],
                            message_ids: list[str]) -> None:
    """An intake batch's embedding as one job: its statements and its messages (their own
    vectors, for ask's source recall lane; `manage.py reembed` embeds any this missed) go
    through the encoder in one call (retrieval.vectors.embed_batch), then the entity
    mention index follows the new statements."""
    if not knowledge_ids and not message_ids:
        return
    from retrieval.entity_tasks import index_entities as index_entities_task
    from retrieval.tasks import embed_batch as embed_batch_task

    kids, mids = list(dict.fromkeys(knowledge_ids)), list(dict.fromkeys(message_ids))
    transaction.on_commit(lambda: embed_batch_task.delay(str(account_id), kids, mids),
                          robust=True)
    if kids:
        transaction.on_commit(lambda: index_entities_task.delay(str(account_id), kids),
                              robust=True)


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
                    media_type: str = "text/plain", limit: int = 0
                    ) -> list[tuple[ExtractedClaim, str]]:
    """Declarative sentences of a document as claims about the scope, or about a known
    peer when the sentence starts with that peer's name. Returns (claim, excerpt); with
    `limit`, stops once it has more than `limit` (the caller refuses such a version, so
    the rest is not worth extracting)."""
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
                    if limit and len(out) > limit:
                        return out
    return out


class TooManyStatements(Exception):
    """A document version yields more statements than MEMHOUSE_MAX_STATEMENTS_PER_VERSION."""


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
    cap = int(settings.MEMHOUSE_MAX_STATEMENTS_PER_VERSION)
    claims = document_claims(text, names=names, occurred_at=created, media_type=media_type,
                             limit=cap)
    if cap and len(claims) > cap:
        # Refused whole, before anything is written: a partial version would supersede
        # what its unread remainder still says. The task sets it aside with this reason.
        raise TooManyStatements(
            f"{TOO_MANY_STATEMENTS}: the version yields more than {cap} statements "
            "(MEMHOUSE_MAX_STATEMENTS_PER_VERSION); split the document")
    outcome = Outcome()
    # One insert of the new statements and the gates' moves written together, as for a
    # batch of messages (BatchPlacer: the same decisions as row by row); a long document
    # row by row cost some 30 queries per sentence.
    with account_context(account_id), audit.deferred(account_id):
        # The document first (as document_delete), so its versions are written one at a
        # time: each reads what the one before it left current.
        list(Document.objects.select_for_update(no_key=True, of=("self",))
             .filter(versions__pk=version_id).values_list("pk", flat=True))
        version = DocumentVersion.objects.select_for_update(no_key=True).select_related(
            "document__scope").get(pk=version_id)
        if version.processed_at is not None or version.tombstoned_at is not None:
            return outcome  # already processed (redelivery), or deleted meanwhile
        document = version.document
        if DocumentVersion.objects.filter(document=document, number__gt=version.number,
                                          processed_at__isnull=False).exists():
            # A newer version was processed first (this one's task was lost and swept,
            # or retried by an administrator): what it says is the document now, so this
            # one writes nothing, or it would supersede the newer version's statements.
            DocumentVersion.objects.filter(pk=version.pk).update(processed_at=timezone.now())
            return outcome
        previous = (Knowledge.objects.filter(
            account_id=account_id, sources__document_version__document=document,
            state__in=sorted(lifecycle.CURRENT)).exclude(sources__document_version=version)
            .distinct())
        by_text = {normalised(k.statement): k for k in previous}
        peers = {p.key: p for p in Peer.objects.filter(account_id=account_id)}
        policy = belief_time.policy_for(document.scope)
        supported: set[uuid.UUID] = set()
        proposals: list[dict[str, Any]] = []
        plans: list[tuple[ExtractedClaim, str]] = []
        for claim, excerpt in claims:
            existing = by_text.get(normalised(claim.statement))
            if existing is not None:
                KnowledgeSource.objects.get_or_create(
                    account_id=account_id, knowledge=existing, document_version=version,
                    defaults={"excerpt": excerpt[:500]})
                supported.add(existing.pk)
                continue
            # A claim about a named person is held with the name, or theirs (intake.named).
            claim, named = settle_subject(claim, speaker=document.peer, names=names)
            outcome.proposed += 1
            subject = peers.get(claim.subject_peer_key) if claim.subject_peer_key else None
            if claim.subject_peer_key and subject is None:
                continue  # the extractor named a peer that does not exist: never guess
            stamps = policy.stamps(kind=claim.kind, sensitivity=claim.sensitivity,
                                   inserted_at=timezone.now(),
                                   relevant_until=claim.relevant_until,
                                   said_at=version.created_at, statement=claim.statement)
            proposals.append(dict(
                statement=claim.statement, scope=document.scope, subject_peer=subject,
                kind=claim.kind, level=Knowledge.Level.PEER if subject else Knowledge.Level.SCOPE,
                confidence=claim.confidence, sensitivity=claim.sensitivity,
                relevant_from=claim.relevant_from, relevant_until=claim.relevant_until,
                proposed_by=document.peer, extractor="document/sentences-v1",
                named_entity=named,
                sources=[{"document_version": version, "excerpt": excerpt[:500]}],
                revalidate_after=stamps["revalidate_after"], expires_at=stamps["expires_at"]))
            plans.append((claim, excerpt[:500]))
        items = knowledge_propose_many(account_id=account_id, proposals=proposals,
                                       actor=PIPELINE)
        placer = BatchPlacer(account_id, items)
        for item, (claim, excerpt) in zip(items, plans, strict=True):
            kept = placer.place(item, claim=claim, excerpt=excerpt, message_text="",
                                names=frozenset(names))
            if kept is not None:
                supported.add(kept.pk)
                if kept.state in lifecycle.EMBEDDABLE:
                    outcome.kept.append(str(kept.pk))  # type: ignore[union-attr]
        placer.finish()
        for old in previous:
            if old.pk not in supported and lifecycle.SUPERSEDED in lifecycle.EDGES[old.state]:
                transition(old, lifecycle.SUPERSEDED, actor="system:document-sync",
                           reason="f4_document_revision",
                           evidence={"document_version": version.number})
        # Done, in the transaction that wrote its statements: a writer waiting on the
        # version (POST /api/v1/documents with wait) sees both at once.
        DocumentVersion.objects.filter(pk=version.pk).update(processed_at=timezone.now())
        enqueue_embedding(account_id, outcome.kept or [])
    return outcome


def mark_version_failed(account_id: str | uuid.UUID, version_id: str | uuid.UUID,
                        error: BaseException) -> bool:
    """Record that processing a document version raised, in a transaction of its own (the
    failed attempt's is gone): the version is set aside with the error's class and
    message, never a traceback (which could carry its text). False when the version is
    gone or was processed meanwhile."""
    # A refused version keeps its reason as written ("too_many_statements: ..."), which
    # selectors.version_error reports to its writer as a code.
    why = str(error)[:500] if isinstance(error, TooManyStatements) else describe(error)
    with account_context(account_id):
        updated = DocumentVersion.objects.filter(pk=version_id, processed_at__isnull=True
                                                 ).update(processing_failed_at=timezone.now(),
                                                          processing_error=why)
    log.warning("document version processing failed; set aside",
                extra={"account_id": str(account_id), "version_id": str(version_id),
                       "error_type": type(error).__name__})
    return bool(updated)
