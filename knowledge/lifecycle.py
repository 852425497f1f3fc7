"""The executable lifecycle contract: every state, every allowed edge, and the only
function that changes `Knowledge.state`.

The operator table in docs/lifecycle.md is generated from this module
(`manage.py lifecycle_doc`), and the tests enumerate STATES x STATES against EDGES.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from django.db import connection, transaction
from django.utils import timezone

from memhouse.core.principal import Actor

if TYPE_CHECKING:
    from knowledge.models import Peer

PROPOSED = "proposed"
ACTIVE = "active"
PROVISIONAL = "provisional"
HELD = "held"
NEEDS_REVALIDATION = "needs_revalidation"
SUPERSEDED = "superseded"
EXPIRED = "expired"
REJECTED = "rejected"
CONTESTED = "contested"
REDACTED = "redacted"
STALE = "stale"
RETRACTED = "retracted"

INITIAL_STATE = PROPOSED
# Set by transition() for the duration of its UPDATE; the database trigger refuses any
# other change of `state`.
TRANSITION_SETTING = "memhouse.lifecycle_transition"


@dataclass(frozen=True)
class Visibility:
    """Who may inspect a row in this state (before scope authorisation)."""

    subject: bool
    member: bool
    curator: bool
    admin: bool


@dataclass(frozen=True)
class State:
    name: str
    meaning: str
    entry: str
    actor: str
    stability: str  # "transient" | "stable" | "terminal"
    visibility: Visibility
    search: str  # "yes" | "subject_only" | "no"
    projection: str  # "shared_and_peer" | "subject_peer_only" | "none"
    readiness: str  # "satisfies" | "subject_only" | "gap" | "missing"
    evidence: str
    reasons: tuple[str, ...]


def _v(subject: bool, member: bool, curator: bool, admin: bool) -> Visibility:
    return Visibility(subject, member, curator, admin)


STATES: dict[str, State] = {
    s.name: s
    for s in (
        State(PROPOSED, "Extracted and waiting for its first gate decision.",
              "Created by the extraction pipeline (the only starting state).",
              "Pipeline; extraction queue.", "transient", _v(True, False, True, True),
              "no", "none", "missing", "verification=pending",
              ("f4_pipeline_proposed",)),
        State(ACTIVE, "Accepted; the system currently believes it.",
              "Gate acceptance, curator approval, subject confirmation or a resolved contest.",
              "Pipeline, human governance or a verified peer answer; "
              "extraction or validation queue.",
              "stable", _v(True, True, True, True), "yes", "shared_and_peer", "satisfies",
              "verification names the accepting decision",
              ("f4_gate_a_b_accepted", "f4_curator_approved", "f4_subject_confirmed",
               "f4_contest_resolved_for", "f4_revalidation_confirmed", "f4_timer_evidence",
               "f4_promotion_declined", "f4_curator_edited", "f4_subject_corrected",
               "f4_revalidation_source_live")),
        State(PROVISIONAL, "Visible only to its subject while it waits for review.",
              "A peer-level gate defers its decision, or the person a held claim names "
              "is registered.",
              "Pipeline; creates a validation row and a peer question.", "stable",
              _v(True, False, False, False), "subject_only", "subject_peer_only",
              "subject_only", "subject_peer_id and a pending validation",
              ("f4_gate_a_b_deferred", "f4_named_person_linked")),
        State(HELD, "Parked at its source scope while wider placement waits for review or consent.",
              "A wider gate deferral, a claim about a person who is not registered, or a "
              "promotion request on an active row.",
              "Pipeline or human promotion; validation / consent workflow.", "stable",
              _v(True, False, True, True), "no", "none", "missing",
              "held_scope_id and a validation target",
              ("f4_scope_hold", "f4_promotion_requested", "f4_gate_unattended_hold",
               "f4_named_person_hold")),
        State(NEEDS_REVALIDATION, "Past its revalidation date; unusable until confirmed again.",
              "revalidate_after passes, or a deduction contributor changes.",
              "Lifecycle worker or dependency invalidation; lifecycle or reasoning queue.",
              "stable", _v(True, True, True, True), "no", "none", "gap",
              "due timestamp plus a validation row",
              ("f4_revalidation_due", "f4_contributor_changed")),
        State(SUPERSEDED, "Replaced by a later statement and kept as history.",
              "A curator edit or merge, a subject's correction, a newer claim on the same "
              "attribute from the same source or the subject (an older claim arriving late "
              "is retired at once), a contradiction settled for the newer claim (see "
              "Possibly outdated), document revision, consolidation or deduction "
              "replacement.",
              "Human governance, document sync or dream-time worker.", "terminal",
              _v(True, True, True, True), "no", "none", "missing",
              "supersedes_id where applicable",
              ("f4_curator_edit", "f4_curator_merge", "f4_subject_correction",
               "f4_document_revision", "f4_consolidated", "f4_deduction_replaced",
               "f4_updated_by_source", "f4_late_arrival", "f4_contradiction_resolved",
               "f4_subject_confirmed_update")),
        State(EXPIRED, "Past its declared expiry and no longer usable.",
              "A lifecycle worker reaches expires_at on a current row.",
              "Lifecycle worker; lifecycle queue started by the hourly scheduler.", "terminal",
              _v(True, True, True, True), "no", "none", "gap", "expires_at",
              ("f4_expiry_due",)),
        State(REJECTED, "Refused by a gate or reviewer; kept as decision evidence.",
              "Gate auto-rejection, unattended restricted withholding, curator rejection "
              "or overdue-review rejection.",
              "Pipeline, human governance or dream-time aging.", "terminal",
              _v(True, False, True, True), "no", "none", "missing",
              "verification and the gate / validation decision",
              ("f4_gate_a_noise", "f4_gate_a_duplicate", "f4_gate_a_unsupported",
               "f4_gate_a_machine_output", "f4_gate_a_classifier", "f4_gate_a_phatic",
               "f4_gate_a_fragment", "f4_gate_b_restricted_unattended", "f4_curator_rejected",
               "f4_contest_resolved_against", "f4_review_overdue", "f4_subject_denied_pending",
               "f4_curator_retired")),
        State(CONTESTED, "Disputed by its subject; waiting for a curator decision.",
              "The subject disputes a current statement.",
              "Authenticated human subject; creates a curator validation row.", "stable",
              _v(True, False, True, True), "no", "none", "missing",
              "subject identity and a dispute validation", ("f4_subject_contested",)),
        State(REDACTED, "Withdrawn from use by its subject.",
              "The subject withdraws a retained statement.",
              "Authenticated human subject; synchronous self-governance action.", "terminal",
              _v(True, False, True, True), "no", "none", "missing", "subject identity",
              ("f4_subject_redacted",)),
        State(STALE, "Repeatedly unconfirmed and no longer relied on.",
              "An unanswered confirmation or revalidation question passes its deadline "
              "(consent questions excluded).",
              "Dream-time worker; dream-time queue.", "stable", _v(True, False, True, True),
              "no", "none", "missing", "an expired peer question and lower confidence",
              ("f4_revalidation_confidence_decay",)),
        State(RETRACTED, "Lost its supporting source or was denied by its subject.",
              "A verified subject denies the claim, or its last source is tombstoned or erased.",
              "Verified peer answer, document sync or erasure worker.", "terminal",
              _v(True, False, True, True), "no", "none", "missing",
              "source or peer decision evidence",
              ("f4_source_tombstoned", "f4_source_erased", "f4_subject_denied",
               "f4_document_source_removed")),
    )
}

# Every reason code in words, for people: the console shows these sentences (never the
# bare code), and docs/lifecycle.md lists them. Codes that only label a curator review
# (a Validation's reason) are here too. A test checks every state's codes have one.
REASON_SENTENCES: dict[str, str] = {
    "f4_pipeline_proposed": "Extracted from a source and waiting for its first gate decision.",
    "f4_gate_a_b_accepted": "Accepted by the gates: a direct statement from a source that "
                            "may say it.",
    "f4_curator_approved": "Approved by a curator.",
    "f4_subject_confirmed": "Confirmed by the person it is about.",
    "f4_contest_resolved_for": "A curator upheld the statement after its subject disputed it.",
    "f4_revalidation_confirmed": "Confirmed again after its revalidation date.",
    "f4_timer_evidence": "Kept in use: a timer recorded evidence without changing it.",
    "f4_promotion_declined": "Stays at its current level: the wider placement was declined.",
    "f4_curator_edited": "Written by a curator to correct or merge earlier statements.",
    "f4_subject_corrected": "Written by the person it is about, to replace an outdated "
                            "statement.",
    "f4_gate_a_b_deferred": "Someone else said it about this person: only they see it "
                            "until they confirm it.",
    "f4_scope_hold": "Held for a curator: it would be shared with everyone in the scope.",
    "f4_named_person_hold": "Held for a curator: it is about a person who is not registered "
                            "(their name is recorded; registering them links it to them).",
    "f4_named_person_linked": "The person it names was registered: only they see it until "
                              "they confirm it.",
    "f4_revalidation_source_live": "Confirmed again after its revalidation date: a source "
                                   "that still stands supports it.",
    "f4_curator_retired": "Retired by a curator at its revalidation: no longer relied on.",
    "f4_promotion_requested": "Held while a wider placement waits for consent and a curator.",
    "f4_gate_unattended_hold": "Held because nobody was there to confirm it.",
    "f4_revalidation_due": "Past its revalidation date: unused until it is confirmed again.",
    "f4_contributor_changed": "A statement it was deduced from changed: unused until it is "
                              "confirmed again.",
    "f4_curator_edit": "Replaced by a curator's corrected version.",
    "f4_curator_merge": "Merged by a curator into one statement.",
    "f4_subject_correction": "Replaced by its subject's correction.",
    "f4_document_revision": "A newer version of its document no longer says it.",
    "f4_consolidated": "Folded into an equivalent statement.",
    "f4_deduction_replaced": "Replaced by a newer deduction.",
    "f4_updated_by_source": "Replaced by a newer statement from the same source or its "
                            "subject.",
    "f4_late_arrival": "Arrived after a newer statement about the same thing, so it was "
                       "retired at once.",
    "f4_contradiction_resolved": "A curator retired it in favour of a newer, contradicting "
                                 "claim.",
    "f4_subject_confirmed_update": "Its subject confirmed a newer claim that replaces it.",
    "f4_expiry_due": "Past its expiry date.",
    "f4_gate_a_noise": "Refused as noise: nothing worth remembering.",
    "f4_gate_a_duplicate": "Refused as a duplicate of a statement already held.",
    "f4_gate_a_unsupported": "Refused: its source does not support it.",
    "f4_gate_a_machine_output": "Refused as machine output (logs, metrics, payloads, "
                                "stack traces).",
    "f4_gate_a_classifier": "Refused as machine output by the learned junk model (output "
                            "of a shape the rules do not describe).",
    "f4_gate_a_phatic": "Refused as an acknowledgement or a ping.",
    "f4_gate_a_fragment": "Refused as a fragment with no content of its own.",
    "f4_gate_b_restricted_unattended": "Withheld: restricted content, and nobody was there "
                                       "to review it.",
    "f4_curator_rejected": "Rejected by a curator.",
    "f4_contest_resolved_against": "A curator agreed with its subject's dispute and "
                                   "rejected it.",
    "f4_review_overdue": "Rejected because its review was not decided in time.",
    "f4_subject_denied_pending": "Its subject said it is wrong before it was placed.",
    "f4_subject_contested": "Disputed by the person it is about; a curator decides.",
    "f4_subject_redacted": "Withdrawn from use by the person it is about.",
    "f4_revalidation_confidence_decay": "Not confirmed in time, so no longer relied on.",
    "f4_source_tombstoned": "Its last source document was deleted.",
    "f4_source_erased": "Its last source was erased.",
    "f4_subject_denied": "Its subject said it is wrong.",
    "f4_document_source_removed": "Its document stopped supporting it.",
    # Curator review reasons (Validation.reason) that are not state reasons.
    "f4_update_contradicted": "A newer claim from someone else contradicts it.",
    "f4_update_uncertain": "A newer claim may replace it; its subject (or, for shared "
                           "facts, a curator) decides.",
    "f4_update_learned": "A newer claim may replace it (a learned reading, not a rule); its "
                         "subject (or, for shared facts, a curator) decides.",
}


# The same reasons said to the person a statement is about ("About me" speaks to its
# reader): only the codes whose sentence names that person differ.
REASON_SENTENCES_TO_SUBJECT: dict[str, str] = {
    "f4_gate_a_b_deferred": "Someone else said it about you: only you see it until you "
                            "confirm it.",
    "f4_subject_confirmed": "Confirmed by you.",
    "f4_subject_corrected": "Written by you, to replace an outdated statement.",
    "f4_contest_resolved_for": "A curator upheld the statement after you disputed it.",
    "f4_subject_correction": "Replaced by your correction.",
    "f4_subject_confirmed_update": "You confirmed a newer claim that replaces it.",
    "f4_contest_resolved_against": "A curator agreed with your dispute and rejected it.",
    "f4_subject_denied_pending": "You said it is wrong before it was placed.",
    "f4_subject_contested": "You disputed it; a curator decides.",
    "f4_subject_redacted": "You withdrew it from use.",
    "f4_subject_denied": "You said it is wrong.",
}

# Gate A's refusals: junk that was never a claim worth holding (log lines, "ok", fragments).
# A rejected row with one of these stays as decision evidence; "About me" folds them away
# from the statements that were really said about the person.
GATE_REFUSALS = frozenset(code for code in STATES[REJECTED].reasons
                          if code.startswith("f4_gate_a_"))


def reason_sentence(code: str | None, *, to_subject: bool = False) -> str:
    """The sentence for a reason code; an unknown code reads as words, not as a code.
    `to_subject` speaks to the person the statement is about ("you")."""
    if not code:
        return ""
    known = (REASON_SENTENCES_TO_SUBJECT.get(code) if to_subject else None) or (
        REASON_SENTENCES.get(code))
    if known is not None:
        return known
    words = code.removeprefix("f4_").replace("_", " ").strip()
    return (words[:1].upper() + words[1:] + ".") if words else ""


# Allowed exits per state. A state listed in its own set has a governed self-edge: the
# transition records evidence (timer evidence, an unverified deferral, repeated erasure)
# without changing the state.
EDGES: dict[str | None, frozenset[str]] = {
    None: frozenset({PROPOSED}),
    PROPOSED: frozenset({ACTIVE, PROVISIONAL, HELD, REJECTED, CONTESTED, REDACTED, RETRACTED}),
    ACTIVE: frozenset({ACTIVE, HELD, NEEDS_REVALIDATION, CONTESTED, SUPERSEDED, EXPIRED,
                       REDACTED, RETRACTED}),
    PROVISIONAL: frozenset({PROVISIONAL, ACTIVE, HELD, REJECTED, CONTESTED, SUPERSEDED, EXPIRED,
                            REDACTED, STALE, RETRACTED}),
    # held -> provisional: the unregistered person a held claim names was registered.
    HELD: frozenset({HELD, ACTIVE, PROVISIONAL, REJECTED, CONTESTED, SUPERSEDED, EXPIRED,
                     REDACTED, RETRACTED}),
    NEEDS_REVALIDATION: frozenset({NEEDS_REVALIDATION, ACTIVE, REJECTED, CONTESTED, SUPERSEDED,
                                   EXPIRED, REDACTED, STALE, RETRACTED}),
    # Terminal for ordinary work; privacy redaction or last-source retraction still apply.
    SUPERSEDED: frozenset({REDACTED, RETRACTED}),
    EXPIRED: frozenset({REDACTED, RETRACTED}),
    REJECTED: frozenset({REDACTED, RETRACTED}),
    CONTESTED: frozenset({ACTIVE, REJECTED, SUPERSEDED, EXPIRED, REDACTED, RETRACTED}),
    # Only last-source retraction overrides a redaction.
    REDACTED: frozenset({RETRACTED}),
    STALE: frozenset({ACTIVE, REJECTED, CONTESTED, SUPERSEDED, EXPIRED, REDACTED, RETRACTED}),
    RETRACTED: frozenset({RETRACTED}),
}

SEARCHABLE = frozenset(n for n, s in STATES.items() if s.search == "yes")
SUBJECT_SEARCHABLE = frozenset(n for n, s in STATES.items() if s.search == "subject_only")
TERMINAL = frozenset(n for n, s in STATES.items() if s.stability == "terminal")
MEMBER_VISIBLE = frozenset(n for n, s in STATES.items() if s.visibility.member)
CURATOR_VISIBLE = frozenset(n for n, s in STATES.items() if s.visibility.curator)
# States a subject may still dispute or withdraw ("nonterminal" in the contract).
# The readiness column as sets (retrieval.readiness reports them): a statement in a
# READY state satisfies readiness, in SUBJECT_READY only its own subject's, in a GAP state
# it is a reported gap; every other state counts as missing.
READY = frozenset(n for n, s in STATES.items() if s.readiness == "satisfies")
SUBJECT_READY = frozenset(n for n, s in STATES.items() if s.readiness == "subject_only")
READINESS_GAPS = frozenset(n for n, s in STATES.items() if s.readiness == "gap")
CURRENT = frozenset({ACTIVE, PROVISIONAL, HELD, NEEDS_REVALIDATION, STALE})
# Who sees a row is decided where it is placed: the gate's or a person's decision puts it
# in one of the DECIDED states, whose visibility is its own. Every other state (history,
# and the worker-made stale / needs_revalidation) shows a row to no one who could not see
# it while it lived: a role in that state's visibility column sees the row only when some
# DECIDED state it held after `proposed` was visible to that role (a row that never left
# `proposed` for one, e.g. a gate rejection, keeps `proposed`'s visibility). So a
# provisional claim about someone stays theirs alone once superseded, expired or stale.
DECIDED = frozenset({ACTIVE, PROVISIONAL, HELD, CONTESTED})
INHERITED = frozenset(STATES) - DECIDED - {PROPOSED}
# States whose rows keep a vector: a search may return them now (for some reader) or once
# they are active again. Past the gate only, so a proposed row is never embedded.
EMBEDDABLE = frozenset(n for n in STATES if n != PROPOSED and (
    n in SEARCHABLE or n in SUBJECT_SEARCHABLE or ACTIVE in EDGES[n]))


class TransitionError(Exception):
    """An edge the contract does not allow, or a reason that does not belong to it."""

    code = "invalid_transition"


ROLES = ("member", "curator", "admin")


def visible_q(role: str, states: Iterable[str] | None = None, *, prefix: str = "") -> Any:
    """A Q for the rows in `states` (default: every state) that `role` (member, curator or
    admin) may inspect under the visibility column and the DECIDED / INHERITED rule above,
    before scope, sensitivity and the subject's own access. Reads LifecycleEvent, the
    record of every state a row held, so rows stored before the rule need no backfill."""
    from django.db.models import Exists, OuterRef, Q

    from knowledge.models import LifecycleEvent

    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")
    wanted = set(STATES) if states is None else set(states)
    seen = {n for n in wanted if getattr(STATES[n].visibility, role)}
    own = sorted(seen - INHERITED)
    inherited = sorted(seen & INHERITED)
    q = Q(**{f"{prefix}state__in": own})
    if not inherited:
        return q
    key = OuterRef(f"{prefix}pk" if prefix else "pk")
    lived = LifecycleEvent.objects.filter(knowledge_id=key)
    shown: Any = Exists(lived.filter(to_state__in=sorted(
        n for n in DECIDED if getattr(STATES[n].visibility, role))))
    if getattr(STATES[PROPOSED].visibility, role):
        shown = shown | ~Exists(lived.filter(to_state__in=sorted(DECIDED)))
    return q | (Q(**{f"{prefix}state__in": inherited}) & shown)


def is_allowed(from_state: str | None, to_state: str) -> bool:
    return to_state in EDGES.get(from_state, frozenset())


# What a lifecycle edge accepts as its actor: an Actor, a Peer, or a "system:<name>" label.
ActorLike = Union[Actor, "Peer", str]


def as_actor(actor: ActorLike) -> Actor:
    """The one reading of an actor argument; an edge is taken by a peer or a worker."""
    from knowledge.models import Peer

    if isinstance(actor, Actor):
        value = actor
    elif isinstance(actor, Peer):
        value = Actor.of_peer(actor)
    elif isinstance(actor, str):
        value = Actor(actor)
    else:
        value = Actor("")
    if value.peer is None and not value.is_system:
        raise TransitionError("actor must be a Peer or a 'system:<worker>' label")
    return value


def transition(
    item: Any,
    to: str,
    *,
    actor: ActorLike,
    reason: str,
    verification: str | None = None,
    evidence: dict[str, Any] | None = None,
    **changes: Any,
) -> Any:
    """Move one Knowledge row along an allowed edge.

    1. Lock the row (SELECT ... FOR NO KEY UPDATE) and re-read its state, so concurrent
       transitions on one row serialise and each sees the other's result. NO KEY: a
       transition never changes the key, and FOR UPDATE would also wait for the deferred
       foreign-key checks (FOR KEY SHARE) of a transaction that holds the audit lock
       this one needs next: a deadlock.
    2. Check the edge against EDGES and the reason against the target state's codes.
    3. Update state, verification, reason, the projection watermark and any extra fields
       the edge carries (held_scope, confidence, ...), with the trigger's guard setting on.
    4. Write a LifecycleEvent and an AuditEntry in the same transaction.
    5. After commit, mark projections dirty and enqueue their refresh.
    """
    from knowledge import audit
    from knowledge.models import Knowledge, LifecycleEvent

    _check(to, reason, changes)
    who = as_actor(actor)
    peer, label = who.peer, who.label
    with transaction.atomic():
        locked = Knowledge.objects.select_for_update(no_key=True).get(pk=item.pk)
        from_state = locked.state
        if not is_allowed(from_state, to):
            raise TransitionError(f"{from_state} -> {to} is not an allowed edge")
        now = timezone.now()
        locked.state = to
        locked.state_reason = reason
        if verification is not None:
            locked.verification = verification
        locked.updated_at = now
        for field, value in changes.items():
            setattr(locked, field, value)
        fields = ["state", "state_reason", "verification", "updated_at", *changes]
        with connection.cursor() as cur:
            cur.execute("SELECT set_config(%s, 'on', true)", [TRANSITION_SETTING])
        try:
            locked.save(update_fields=fields)
        finally:
            with connection.cursor() as cur:
                cur.execute("SELECT set_config(%s, '', true)", [TRANSITION_SETTING])
        LifecycleEvent.objects.create(
            account_id=locked.account_id, knowledge=locked, from_state=from_state, to_state=to,
            reason=reason, verification=locked.verification, actor_peer=peer, actor=label,
            evidence=evidence or {}, created_at=now,
        )
        audit.append(
            account_id=locked.account_id, event_type="knowledge.transition", actor=label,
            target_type="knowledge", target_id=str(locked.pk),
            payload={"from": from_state, "to": to, "reason": reason,
                     "verification": locked.verification},
        )
        _after_commit_refresh(locked)
    for field in fields:
        setattr(item, field, getattr(locked, field))
    return locked


_ALLOWED_CHANGES = frozenset({"held_scope", "held_scope_id", "confidence", "revalidate_after",
                              "expires_at", "level", "scope", "scope_id", "subject_peer",
                              "subject_peer_id"})


def _check(to: str, reason: str, changes: dict[str, Any]) -> None:
    if to not in STATES:
        raise TransitionError(f"unknown state {to!r}")
    if reason not in STATES[to].reasons:
        raise TransitionError(f"reason {reason!r} does not lead to {to!r}")
    unexpected = set(changes) - _ALLOWED_CHANGES
    if unexpected:
        raise TransitionError(f"transition cannot change {sorted(unexpected)}")


@dataclass
class Change:
    """One row's move for transition_many: transition()'s arguments but the actor."""

    item: Any
    to: str
    reason: str
    verification: str | None = None
    evidence: dict[str, Any] | None = None
    changes: dict[str, Any] = field(default_factory=dict)


def transition_many(moves: Sequence[Change], *, actor: ActorLike) -> list[Any]:
    """Move many rows of one Account, each along an allowed edge, with set-based writes.

    The same contract as transition(), row for row: every row is locked (in id order, so
    two batches never deadlock) and its edge checked against its state as locked; one
    LifecycleEvent and one AuditEntry per row; the trigger's guard is on only around the
    UPDATE. The writes are one UPDATE per set of changed fields, one event insert and one
    audit append (one advisory-lock hold), instead of about twelve queries per row. Any
    refused edge refuses the whole call. The items passed in are updated in place.
    """
    from knowledge import audit
    from knowledge.models import Knowledge, LifecycleEvent

    if not moves:
        return []
    for move in moves:
        _check(move.to, move.reason, move.changes)
    pks = [move.item.pk for move in moves]
    if len(set(pks)) != len(pks):
        raise TransitionError("transition_many moves each row once per call")
    accounts = {move.item.account_id for move in moves}
    if len(accounts) != 1:
        raise TransitionError("transition_many moves rows of one Account")
    who = as_actor(actor)
    peer, label = who.peer, who.label
    with transaction.atomic():
        locked = {pk: (state, verification) for pk, state, verification in
                  Knowledge.objects.select_for_update(no_key=True).filter(pk__in=pks)
                  .order_by("pk").values_list("pk", "state", "verification")}
        now = timezone.now()
        events, entries = [], []
        groups: dict[tuple[str, ...], list[Any]] = {}
        for move in moves:
            item = move.item
            if item.pk not in locked:
                raise Knowledge.DoesNotExist(f"knowledge {item.pk} does not exist")
            from_state, verification = locked[item.pk]
            if not is_allowed(from_state, move.to):
                raise TransitionError(f"{from_state} -> {move.to} is not an allowed edge")
            item.state, item.state_reason, item.updated_at = move.to, move.reason, now
            item.verification = move.verification or verification
            for name, value in move.changes.items():
                setattr(item, name, value)
            names = tuple(Knowledge._meta.get_field(name).name for name in sorted(move.changes))
            groups.setdefault(names, []).append(item)
            events.append(LifecycleEvent(
                account_id=item.account_id, knowledge_id=item.pk, from_state=from_state,
                to_state=move.to, reason=move.reason, verification=item.verification,
                actor_peer=peer, actor=label, evidence=move.evidence or {}, created_at=now))
            entries.append({"event_type": "knowledge.transition", "actor": label,
                            "target_type": "knowledge", "target_id": str(item.pk),
                            "payload": {"from": from_state, "to": move.to,
                                        "reason": move.reason,
                                        "verification": item.verification}})
        with connection.cursor() as cur:
            cur.execute("SELECT set_config(%s, 'on', true)", [TRANSITION_SETTING])
            try:
                for names, items in groups.items():
                    _update_rows(cur, items, ["state", "state_reason", "verification",
                                              "updated_at", *names])
            finally:
                cur.execute("SELECT set_config(%s, '', true)", [TRANSITION_SETTING])
        LifecycleEvent.objects.bulk_create(events)
        audit.append_many(account_id=accounts.pop(), entries=entries)
        _after_commit_refresh_many([move.item for move in moves])
    return [move.item for move in moves]


def _update_rows(cur: Any, items: list[Any], names: list[str]) -> None:
    """One UPDATE ... FROM (VALUES ...) writing `names` of each row from its object
    (Django's bulk_update builds a CASE per field and row: slow to compile and run)."""
    from django.db.models import Field

    from knowledge.models import Knowledge

    meta = Knowledge._meta
    fields = [field for name in names if isinstance(field := meta.get_field(name), Field)]
    pk = meta.pk
    if len(fields) != len(names) or pk is None:
        raise TransitionError(f"cannot write {names}")
    casts = [pk.cast_db_type(connection), *(f.cast_db_type(connection) for f in fields)]
    row = "(" + ", ".join(f"%s::{cast}" for cast in casts) + ")"
    params: list[Any] = []
    for item in items:
        params.append(pk.get_db_prep_value(item.pk, connection))
        params.extend(f.get_db_prep_save(getattr(item, f.attname), connection) for f in fields)
    q = connection.ops.quote_name
    columns = [q(str(f.column)) for f in fields]
    key = q(str(pk.column))
    cur.execute(
        f"UPDATE {q(str(meta.db_table))} AS k SET "
        + ", ".join(f"{c} = v.{c}" for c in columns)
        + f" FROM (VALUES {', '.join([row] * len(items))}) AS v({key}, "
        + ", ".join(columns) + f") WHERE k.{key} = v.{key}", params)


def record_creation(item: Any, *, actor: ActorLike) -> None:
    """The nil -> proposed edge: event + audit for a freshly created row."""
    from knowledge import audit
    from knowledge.models import LifecycleEvent

    if item.state != INITIAL_STATE:
        raise TransitionError(f"knowledge starts as {INITIAL_STATE}, not {item.state}")
    who = as_actor(actor)
    peer, label = who.peer, who.label
    LifecycleEvent.objects.create(
        account_id=item.account_id, knowledge=item, from_state=None, to_state=INITIAL_STATE,
        reason="f4_pipeline_proposed", verification=item.verification, actor_peer=peer,
        actor=label, created_at=item.inserted_at,
    )
    audit.append(
        account_id=item.account_id, event_type="knowledge.proposed", actor=label,
        target_type="knowledge", target_id=str(item.pk),
        payload={"to": INITIAL_STATE, "reason": "f4_pipeline_proposed"},
    )
    _after_commit_refresh(item)


def record_creation_many(items: Sequence[Any], *, actor: ActorLike) -> None:
    """record_creation for many fresh rows of one Account: one event insert, one audit
    append, entries in the order of `items`."""
    from knowledge import audit
    from knowledge.models import LifecycleEvent

    if not items:
        return
    for item in items:
        if item.state != INITIAL_STATE:
            raise TransitionError(f"knowledge starts as {INITIAL_STATE}, not {item.state}")
    accounts = {item.account_id for item in items}
    if len(accounts) != 1:
        raise TransitionError("record_creation_many records rows of one Account")
    who = as_actor(actor)
    peer, label = who.peer, who.label
    LifecycleEvent.objects.bulk_create([LifecycleEvent(
        account_id=item.account_id, knowledge_id=item.pk, from_state=None,
        to_state=INITIAL_STATE, reason="f4_pipeline_proposed",
        verification=item.verification, actor_peer=peer, actor=label,
        created_at=item.inserted_at) for item in items])
    audit.append_many(account_id=accounts.pop(), entries=[
        {"event_type": "knowledge.proposed", "actor": label, "target_type": "knowledge",
         "target_id": str(item.pk),
         "payload": {"to": INITIAL_STATE, "reason": "f4_pipeline_proposed"}}
        for item in items])
    _after_commit_refresh_many(list(items))


# Hooks for derived projections; the projection module registers itself here so this
# module does not import retrieval (which imports us). A hook may come with a form that
# takes many rows at once (transition_many calls that one, with one query instead of
# one per row).
_refresh_hooks: list[tuple[Any, Any]] = []


def register_refresh_hook(hook: Any, *, many: Any = None) -> None:
    if all(hook is not one for one, _ in _refresh_hooks):
        _refresh_hooks.append((hook, many))


def _after_commit_refresh(item: Any) -> None:
    for hook, _ in _refresh_hooks:
        hook(item)


# Rows other apps derive from statements (retrieval's vectors and entity mentions): the
# owning app registers how to drop them, so governance never writes another app's tables.
_derived_row_droppers: list[Callable[[list[Any]], None]] = []


def register_derived_rows(drop: Callable[[list[Any]], None]) -> None:
    if drop not in _derived_row_droppers:
        _derived_row_droppers.append(drop)


def drop_derived_rows(knowledge_ids: Iterable[Any]) -> None:
    """Delete the rebuildable rows derived from statements withdrawn from use (inside the
    withdrawing transaction)."""
    ids = list(knowledge_ids)
    if not ids:
        return
    for drop in _derived_row_droppers:
        drop(ids)


def _after_commit_refresh_many(items: list[Any]) -> None:
    for hook, many in _refresh_hooks:
        if many is not None:
            many(items)
        else:
            for item in items:
                hook(item)


def operator_table_markdown() -> str:
    """The published operator contract, generated from STATES and EDGES."""
    lines = [
        "# Knowledge lifecycle contract",
        "",
        "Generated by `python manage.py lifecycle_doc` from `knowledge/lifecycle.py`; "
        "do not edit by hand (a test fails when this file is stale).",
        "",
        "Every extracted statement starts as `proposed`. Only `lifecycle.transition()` "
        "changes state; it writes a lifecycle event and an audit entry in the same "
        "transaction, and a database trigger refuses any other update of `state`.",
        "",
        "| State | Meaning | Entry and trigger | Actor; queue | Stability | Allowed exits "
        "| Visible to subject / member / curator / admin | Search and ask | Projection "
        "| Readiness | Evidence | Reason codes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    yn = {True: "yes", False: "no"}
    for name, s in STATES.items():
        exits = sorted(EDGES[name])
        exit_text = ", ".join(f"{e} (self-edge)" if e == name else e for e in exits)
        vis = " / ".join(yn[v] for v in (s.visibility.subject, s.visibility.member,
                                         s.visibility.curator, s.visibility.admin))
        lines.append(
            f"| <a id=\"{name}\"></a>`{name}` | {s.meaning} | {s.entry} | {s.actor} "
            f"| {s.stability} | {exit_text} | {vis} | {s.search} | {s.projection} "
            f"| {s.readiness} | {s.evidence} | {', '.join(f'`{r}`' for r in s.reasons)} |"
        )
    lines += [
        "",
        "The member column assumes ordinary scope authorisation. A subject can inspect "
        "their own rows in any scope; another subject's `provisional` row stays hidden "
        "even from curators and administrators.",
        "",
        "A row keeps, in history, the visibility it had while it lived. The states a "
        f"decision places a row in ({', '.join(f'`{n}`' for n in sorted(DECIDED))}) "
        "show it as the table says; in every other state "
        f"({', '.join(f'`{n}`' for n in sorted(INHERITED))}) a member, curator or "
        "administrator sees the row only when the table says so *and* some decided state "
        "the row held was visible to them (a row that never left `proposed` keeps "
        "`proposed`'s visibility). So a `provisional` claim about someone that is "
        "superseded, expires or goes stale stays visible to its subject alone.",
        "",
        "## Possibly outdated",
        "",
        "A newer claim that says otherwise about the same attribute of the same subject "
        "supersedes the current one at intake only when the update rule is sure (the same "
        "source or the subject, a known frame or change wording; see `superseded`). When "
        "it is not sure (a new value named in words no frame knows, \u201cPicked up a Mazda "
        "3\u201d after \u201cI drive a Honda Civic\u201d, or a message that tells a "
        "change, \u201cAte my first steak in years. The veggie phase is over.\u201d after "
        "\u201cI'm a vegetarian\u201d, with a claim that names no value of a one-value "
        "attribute the older claim states; giving up what the older claim names, "
        "\u201ctraded the Civic in\u201d, \u201cleft nursing\u201d, is sure), or when "
        "someone other than the "
        "source says otherwise, both stay current and a `contradicts` relation links the "
        "newer claim (by when it was said) to the older one. Until the pair is settled, "
        "every read the reader may see both in (search, context, ask, the stable profile, "
        "the knowledge listing and detail, and the MCP tools over them) puts the newer "
        "claim first and gives the older one `possibly_outdated`: the newer claim's id "
        "(`null` otherwise). Rendered text says it too: a context line, or a line of a "
        "model-free answer, ends in `(possibly outdated: see ID)` with the newer claim's "
        "id. A reader who may not see the newer "
        "claim (someone else's provisional claim about you) sees no mark.",
        "",
        "Settling: about a person, the subject gets a `contradiction` question on the older "
        "claim (\u201cIs this still true?\u201d); `no` supersedes it by the newer "
        "(`f4_subject_confirmed_update`), `yes` keeps both. Confirming someone else's "
        "newer claim about you retires the older one the same way. Shared facts, and a "
        "subject's question left unanswered past its deadline, go to the curator queue "
        "(`state=contradiction`): `retire` supersedes the older claim by the newer "
        "(`f4_contradiction_resolved`), `keep` keeps both. Once kept, the relation stays "
        "as settled history and reads stop marking it.",
        "",
        "## Readiness",
        "",
        "`GET /api/v1/readiness` (and the readiness panel of the console's scope page) "
        "applies the Readiness column to a read at a scope, for the scope or for one "
        "subject peer. It reports each projection the read would use (scope cards, and the "
        "subject's peer profiles) as `fresh`, `dirty`, `stale` or `missing`, and counts the "
        "statements a projection would be built from by their state's readiness class: "
        "`satisfies` (and `subject_only` in a subject's own report) makes a kind `ready`; "
        "`gap` states (`needs_revalidation`, `expired`, and an `active` row whose "
        "revalidation or expiry date has passed before the worker moved it) are reported "
        "as gaps; a kind with neither is `missing`. Only the subject reading their own "
        "report sees the gap statements themselves; every other reader gets statuses and "
        "counts of rows its posture may see, never ids or text.",
        "",
        "## Placements for claims about people and statements nobody can confirm",
        "",
        "- A claim about a named person other than the speaker is never an active fact "
        "about the speaker (`governance/intake/named.py`): the person is the subject of "
        "the sentence, of a clause the speaker reports or learned (\u201cI found out "
        "Dmitri is colorblind\u201d), also before a contracted \u2019s (\u201cDmitri's "
        "moving\u201d) or in apposition; a name on no list of given names counts when "
        "what follows is something only a person does or is (\u201cJun is studying "
        "law\u201d, \u201cTheo can't swim\u201d). A registered person's claim is "
        "`provisional` for them with a confirmation question (`f4_gate_a_b_deferred`). For "
        "a person nobody registered the claim is `held` with no subject and the name in "
        "`named_entity` (`f4_named_person_hold`, a curator review that review aging never "
        "rejects: it waits for the person); registering that "
        "person later (a peer created or renamed to that name) moves it `held` -> "
        "`provisional` for them (`f4_named_person_linked`), closing the review and asking "
        "them.",
        "- A statement with no human subject (a scope or document claim, a "
        "curator-approved fact, a statement about an agent) that passes "
        "`revalidate_after` becomes `needs_revalidation` with a revalidation review for "
        "curators instead of a question: the curator queue's `revalidation` list reconfirms "
        "it (`active`, `f4_revalidation_confirmed`) or retires it (`rejected`, "
        "`f4_curator_retired`). An hourly worker reconfirms the ones a live source still "
        "supports (a stored message, or a version not tombstoned of a document not "
        "deleted: `active`, `f4_revalidation_source_live`).",
        "- A deduction run over a subject's statements in a scope that places a new "
        "conclusion supersedes (`f4_deduction_replaced`) the conclusions earlier runs drew "
        "there from statements the new run also saw or that are no longer active; a "
        "conclusion drawn again stays.",
        "",
        "## Reason codes",
        "",
        "Every transition records a reason code; the console shows its sentence.",
        "",
        "| Code | Meaning | Leads to |",
        "|---|---|---|",
    ]
    leads_to: dict[str, list[str]] = {}
    for name, s in STATES.items():
        for r in s.reasons:
            leads_to.setdefault(r, []).append(name)
    for code, sentence in REASON_SENTENCES.items():
        states = ", ".join(f"`{n}`" for n in leads_to.get(code, []))
        lines.append(f"| <a id=\"{code}\"></a>`{code}` | {sentence} "
                     f"| {states or 'a review'} |")
    lines.append("")
    return "\n".join(lines)
