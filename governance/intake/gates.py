"""Gate A (keep or auto-reject) and Gate B (placement) for freshly proposed knowledge.

Both move rows only through lifecycle.transition. Gate B is "unattended": no human is
in the loop, so restricted statements are withheld rather than placed.
"""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone

from governance.intake.junk import junk_reason
from governance.models import Validation
from governance.questions import validation_with_question
from knowledge import lifecycle
from knowledge.lifecycle import transition
from knowledge.models import Knowledge
from knowledge.services import knowledge_merge_sources
from memhouse.principal import Actor

PIPELINE = Actor.system("pipeline")
CONFIRMATION_WINDOW = timedelta(days=14)
REVIEW_WINDOW = timedelta(days=30)
# States whose rows a new proposal would duplicate.
_CURRENT = sorted(lifecycle.CURRENT)
_WORD = re.compile(r"[^\W\d_]{2,}")


def normalised(statement: str) -> str:
    return " ".join(statement.lower().split()).rstrip(".!")


# Must match normalised() and the expression of the knowledge_duplicate_lookup index.
_NORMALISED_SQL = "rtrim(regexp_replace(lower(btrim(statement)), '\\s+', ' ', 'g'), '.!')"


def find_duplicate(item: Knowledge) -> Knowledge | None:
    """A current statement with the same text, subject and anchoring scope."""
    candidates = (Knowledge.objects.filter(account_id=item.account_id, scope_id=item.scope_id,
                                           subject_peer_id=item.subject_peer_id,
                                           state__in=_CURRENT)
                  .exclude(pk=item.pk)
                  .extra(where=[f"{_NORMALISED_SQL} = %s"], params=[normalised(item.statement)]))
    return candidates.order_by("inserted_at").first()


def gate_a(item: Knowledge, *, excerpt: str = "", message_text: str = "",
           names: frozenset[str] = frozenset()) -> Knowledge | None:
    """Keep the proposal, or reject it. Junk (machine output, pings, content-free
    fragments; see governance.intake.junk) is rejected with its reason and keeps its
    provenance as decision evidence. A duplicate's provenance joins the original, so
    repeating a fact raises its independent-source count instead of adding a row.
    Returns the row that now carries the claim, or None when it was rejected."""
    if len(_WORD.findall(item.statement)) < 2:
        transition(item, lifecycle.REJECTED, actor=PIPELINE, reason="f4_gate_a_noise",
                   verification=Knowledge.Verification.GATE_REJECT)
        return None
    junk = junk_reason(statement=item.statement, excerpt=excerpt, message_text=message_text,
                       names=names)
    if junk is not None:
        transition(item, lifecycle.REJECTED, actor=PIPELINE, reason=junk,
                   verification=Knowledge.Verification.GATE_REJECT)
        return None
    if item.source_count == 0:
        transition(item, lifecycle.REJECTED, actor=PIPELINE, reason="f4_gate_a_unsupported",
                   verification=Knowledge.Verification.GATE_REJECT)
        return None
    original = find_duplicate(item)
    if original is not None:
        knowledge_merge_sources(source=item, into=original)
        transition(item, lifecycle.REJECTED, actor=PIPELINE, reason="f4_gate_a_duplicate",
                   verification=Knowledge.Verification.GATE_REJECT,
                   evidence={"duplicate_of": str(original.pk)})
        return original
    return item


def gate_b(item: Knowledge, *, self_observation: bool) -> Knowledge:
    """Place a kept proposal.

    * restricted sensitivity, unattended -> rejected (withheld);
    * peer level, the subject observed it about themself -> active;
    * peer level, someone else's observation -> provisional, with a confirmation
      validation and a question to the subject;
    * scope or account level -> held at its scope for a curator.
    """
    now = timezone.now()
    if item.sensitivity == Knowledge.Sensitivity.RESTRICTED:
        return transition(item, lifecycle.REJECTED, actor=PIPELINE,
                          reason="f4_gate_b_restricted_unattended",
                          verification=Knowledge.Verification.GATE_REJECT)
    if item.level == Knowledge.Level.PEER and item.subject_peer_id is not None:
        if self_observation:
            return transition(item, lifecycle.ACTIVE, actor=PIPELINE,
                              reason="f4_gate_a_b_accepted",
                              verification=Knowledge.Verification.GATE_KEEP)
        item = transition(item, lifecycle.PROVISIONAL, actor=PIPELINE,
                          reason="f4_gate_a_b_deferred",
                          verification=Knowledge.Verification.GATE_DEFER)
        validation_with_question(
            item, kind=Validation.Kind.CONFIRMATION, reason="f4_gate_a_b_deferred",
            window=CONFIRMATION_WINDOW, text="Is this right about you?", now=now)
        return item
    item = transition(item, lifecycle.HELD, actor=PIPELINE, reason="f4_scope_hold",
                      verification=Knowledge.Verification.GATE_DEFER, held_scope=item.scope)
    Validation.objects.get_or_create(
        account_id=item.account_id, knowledge=item, kind=Validation.Kind.REVIEW,
        status=Validation.Status.OPEN,
        defaults={"reason": "f4_scope_hold", "target_scope": item.scope,
                  "target_level": item.level, "due_at": now + REVIEW_WINDOW})
    return item
