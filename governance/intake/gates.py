"""Gate A (keep or auto-reject) and Gate B (placement) for freshly proposed knowledge.

Both move rows only through lifecycle.transition. Gate B is "unattended": no human is
in the loop, so restricted statements are withheld rather than placed.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timedelta

from django.utils import timezone

from governance.intake.junk import (
    CLASSIFIER,
    claim_body,
    junk_reason,
    learned_evidence,
    learned_reason,
)
from governance.models import Validation
from governance.questions import validation_with_question
from knowledge import lifecycle
from knowledge.ingest.extraction import ExtractedClaim
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Peer
from knowledge.services import knowledge_merge_sources
from memhouse.core.principal import Actor

PIPELINE = Actor.system("pipeline")
CONFIRMATION_WINDOW = timedelta(days=14)
REVIEW_WINDOW = timedelta(days=30)
# States whose rows a new proposal would duplicate.
_CURRENT = sorted(lifecycle.CURRENT)
_WORD = re.compile(r"[^\W\d_]{2,}")


def normalised(statement: str) -> str:
    return " ".join(statement.lower().split()).rstrip(".!")


# normalised() in SQL: must match it and the expression of the knowledge_duplicate_lookup
# index (public: the batch placer reads its duplicate index with it).
NORMALISED_SQL = "rtrim(regexp_replace(lower(btrim(statement)), '\\s+', ' ', 'g'), '.!')"


def find_duplicate(item: Knowledge) -> Knowledge | None:
    """A current statement with the same text, subject and anchoring scope."""
    candidates = (Knowledge.objects.filter(account_id=item.account_id, scope_id=item.scope_id,
                                           subject_peer_id=item.subject_peer_id,
                                           state__in=_CURRENT)
                  .exclude(pk=item.pk)
                  .extra(where=[f"{NORMALISED_SQL} = %s"], params=[normalised(item.statement)]))
    return candidates.order_by("inserted_at").first()


def gate_a_refusal(item: Knowledge, *, excerpt: str = "", message_text: str = "",
                   names: frozenset[str] = frozenset()) -> str | None:
    """Gate A's pure part: the reason a proposal is refused before any duplicate lookup
    (noise, junk, no source), or None."""
    if len(_WORD.findall(item.statement)) < 2:
        return "f4_gate_a_noise"
    junk = junk_reason(statement=item.statement, excerpt=excerpt, message_text=message_text,
                       names=names) or learned_reason(statement=item.statement,
                                                      excerpt=excerpt, message_text=message_text)
    if junk is not None:
        return junk
    if item.source_count == 0:
        return "f4_gate_a_unsupported"
    return None


def refusal_evidence(refusal: str, item: Knowledge, *, excerpt: str = "",
                     message_text: str = "") -> dict | None:
    """The evidence a refusal records: the learned model's scores for its refusals (the
    rules' reason code says why on its own)."""
    if refusal != CLASSIFIER:
        return None
    return learned_evidence(statement=item.statement, excerpt=excerpt,
                            message_text=message_text)


def gate_a(item: Knowledge, *, excerpt: str = "", message_text: str = "",
           names: frozenset[str] = frozenset()) -> Knowledge | None:
    """Keep the proposal, or reject it. Junk (machine output, pings, content-free
    fragments by rule, then machine output by the learned model; see
    governance.intake.junk) is rejected with its reason and keeps its
    provenance as decision evidence. A duplicate's provenance joins the original, so
    repeating a fact raises its independent-source count instead of adding a row.
    Returns the row that now carries the claim, or None when it was rejected."""
    refusal = gate_a_refusal(item, excerpt=excerpt, message_text=message_text, names=names)
    if refusal is not None:
        transition(item, lifecycle.REJECTED, actor=PIPELINE, reason=refusal,
                   verification=Knowledge.Verification.GATE_REJECT,
                   evidence=refusal_evidence(refusal, item, excerpt=excerpt,
                                             message_text=message_text))
        return None
    original = find_duplicate(item)
    if original is not None:
        knowledge_merge_sources(source=item, into=original)
        transition(item, lifecycle.REJECTED, actor=PIPELINE, reason="f4_gate_a_duplicate",
                   verification=Knowledge.Verification.GATE_REJECT,
                   evidence={"duplicate_of": str(original.pk)})
        return original
    return item


# How an agent speaks of the person it serves: "the user is ...", "User prefers ..." (a
# clause that opens with it), "user's daughter"; not "a new user", "the user table".
_THE_USER = re.compile(
    r"(?:\bthe\s+user\b|^\W*user\b|\buser(?=['\u2019]s\b))"
    r"(?!['\u2019]?s?\s*(?:id|name|agent|interface|account|table|data|base|group|list)s?\b)",
    re.I)


def agent_claim_about_user(claim: ExtractedClaim, *, excerpt: str, speaker: Peer,
                           addressee: Peer | None) -> ExtractedClaim:
    """An agent's claim about "the user" is the user's to confirm, never a fact.

    The extractor reads "The user is a vegetarian" from an agent as the agent speaking of
    itself (a self-observation, so Gate B would make it active). It is a claim about the
    person the agent serves, with nothing that person said behind it: about the
    conversation's human listener (provisional for them, with a confirmation question;
    "the user" becomes their name), or, when there is no such listener, about nobody
    known (held for a curator)."""
    if (speaker.kind != Peer.Kind.AGENT or not claim.self_observation
            or not _THE_USER.search(excerpt)):
        return claim
    if addressee is None or addressee.kind != Peer.Kind.HUMAN:
        return dataclasses.replace(claim, subject_peer_key=None, self_observation=False)
    name = addressee.display_name or addressee.key
    body = _THE_USER.sub(name, claim_body(claim.statement))
    body = body[:1].upper() + body[1:]
    return dataclasses.replace(claim, statement=body, subject_peer_key=addressee.key,
                               self_observation=False)


def gate_b_placement(item: Knowledge, *, self_observation: bool) -> lifecycle.Change:
    """Gate B's pure part: where a kept proposal goes (see gate_b)."""
    if item.sensitivity == Knowledge.Sensitivity.RESTRICTED:
        return lifecycle.Change(item, lifecycle.REJECTED, "f4_gate_b_restricted_unattended",
                                Knowledge.Verification.GATE_REJECT)
    if item.level == Knowledge.Level.PEER and item.subject_peer_id is not None:
        if self_observation:
            return lifecycle.Change(item, lifecycle.ACTIVE, "f4_gate_a_b_accepted",
                                    Knowledge.Verification.GATE_KEEP)
        return lifecycle.Change(item, lifecycle.PROVISIONAL, "f4_gate_a_b_deferred",
                                Knowledge.Verification.GATE_DEFER)
    # A claim about a person nobody registered (named_entity set, no subject) waits for a
    # curator like a scope claim, with its own reason so registering them can link it.
    return lifecycle.Change(item, lifecycle.HELD,
                            "f4_named_person_hold" if item.named_entity else "f4_scope_hold",
                            Knowledge.Verification.GATE_DEFER,
                            changes={"held_scope": item.scope})


def review_due(item: Knowledge, now: datetime) -> datetime | None:
    """When a held row's review is overdue (then rejected, f4_review_overdue). A claim
    held for naming an unregistered person waits for them to be registered, so it is
    never aged out: a curator rejects it, or registering them links it."""
    return None if item.named_entity else now + REVIEW_WINDOW


def open_gate_b_review(item: Knowledge, *, now: datetime) -> None:
    """The review a deferred placement opens: the subject's confirmation question for a
    provisional row, a curator review for a held one. Call in the placing transaction."""
    if item.state == lifecycle.PROVISIONAL:
        validation_with_question(
            item, kind=Validation.Kind.CONFIRMATION, reason="f4_gate_a_b_deferred",
            window=CONFIRMATION_WINDOW, text="Is this right about you?", now=now)
    elif item.state == lifecycle.HELD:
        Validation.objects.get_or_create(
            account_id=item.account_id, knowledge=item, kind=Validation.Kind.REVIEW,
            status=Validation.Status.OPEN,
            defaults={"reason": item.state_reason, "target_scope": item.scope,
                      "target_level": item.level, "due_at": review_due(item, now)})


def open_gate_b_reviews_for_new(*, provisional: list[Knowledge], held: list[Knowledge],
                                now: datetime) -> None:
    """open_gate_b_review for rows created in this transaction and placed provisional or
    held (whatever happened to them since), with set-based inserts."""
    from governance.questions import validations_with_questions_for_new

    validations_with_questions_for_new(
        provisional, kind=Validation.Kind.CONFIRMATION, reason="f4_gate_a_b_deferred",
        window=CONFIRMATION_WINDOW, text="Is this right about you?", now=now)
    Validation.objects.bulk_create([
        Validation(account_id=item.account_id, knowledge=item, kind=Validation.Kind.REVIEW,
                   status=Validation.Status.OPEN,
                   reason=("f4_named_person_hold" if item.named_entity else "f4_scope_hold"),
                   target_scope=item.scope, target_level=item.level,
                   due_at=review_due(item, now))
        for item in held])


def gate_b(item: Knowledge, *, self_observation: bool) -> Knowledge:
    """Place a kept proposal.

    * restricted sensitivity, unattended -> rejected (withheld);
    * peer level, the subject observed it about themself -> active;
    * peer level, someone else's observation -> provisional, with a confirmation
      validation and a question to the subject;
    * scope or account level -> held at its scope for a curator; so is a claim about a
      person who is not registered (no subject, `named_entity` set; governance.intake.named).
    """
    now = timezone.now()
    move = gate_b_placement(item, self_observation=self_observation)
    item = transition(item, move.to, actor=PIPELINE, reason=move.reason,
                      verification=move.verification, **move.changes)
    open_gate_b_review(item, now=now)
    return item
