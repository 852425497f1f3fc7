"""Background governance work, one Account at a time.

Every worker enters the Account explicitly (`account_context`), claims its rows with
`SELECT ... FOR UPDATE SKIP LOCKED` plus a state filter, and changes state only through
`lifecycle.transition`. A claimed row leaves the filter in the same transaction, so a
redelivered or concurrent run finds nothing left to do: running a worker twice changes
nothing the second time.

Cadences (memhouse/core/celery_schedule.py): expiry hourly, revalidation hourly, dream-time
(overdue reviews, unanswered questions, entities, consolidation, deduction) nightly.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from governance.models import DeductionRun, PeerQuestion, Validation
from governance.questions import close_questions, close_validations
from governance.services import close_open_work, request_revalidation
from knowledge import lifecycle
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, KnowledgeSource, Peer, Relation
from knowledge.prompts import prompt_identity
from memhouse.core.principal import Actor
from memhouse.core.tenancy import account_context

log = logging.getLogger(__name__)

EXPIRY = Actor.system("expiry")
REVALIDATION = Actor.system("revalidation")
DREAM = Actor.system("dream-time")
DEDUCTION = Actor.system("deduction")
BATCH = 200
DECAY_FACTOR = 0.7
SIMILARITY_THRESHOLD = 0.95
# Rows the expiry sweeper moves: every nonterminal current state with an exit to expired.
EXPIRABLE = tuple(sorted(s for s in lifecycle.STATES
                         if s != lifecycle.PROPOSED and lifecycle.is_allowed(s, lifecycle.EXPIRED)))
WORKER = Knowledge.Verification.WORKER


def _now(now: datetime | None) -> datetime:
    return now or timezone.now()


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _batched(work: Any) -> int:
    """Run `work()` (one transaction, returns rows handled) until a short batch."""
    total = 0
    while True:
        done = work()
        total += done
        if done < BATCH:
            return total


# --- lifecycle timers -------------------------------------------------------------------

def expire_due(account_id: uuid.UUID | str, *, now: datetime | None = None) -> int:
    """Current rows past expires_at -> expired (f4_expiry_due); their open validation
    work expires with them."""
    at = _now(now)

    def batch() -> int:
        with account_context(account_id, durable=True):
            rows = list(Knowledge.objects.select_for_update(skip_locked=True, no_key=True)
                        .filter(state__in=EXPIRABLE, expires_at__lte=at)
                        .order_by("expires_at", "id")[:BATCH])
            for item in rows:
                transition(item, lifecycle.EXPIRED, actor=EXPIRY, reason="f4_expiry_due",
                           verification=WORKER,
                           evidence={"expires_at": _iso(item.expires_at)})
                close_open_work(item, status=Validation.Status.EXPIRED, resolution="expired")
            return len(rows)

    return _batched(batch)


def revalidate_due(account_id: uuid.UUID | str, *, now: datetime | None = None) -> int:
    """Active rows whose revalidate_after passed -> needs_revalidation
    (f4_revalidation_due), with a REVALIDATION validation and a question to the subject.
    Rows that are also past expiry are left to the expiry sweeper."""
    at = _now(now)

    def batch() -> int:
        with account_context(account_id, durable=True):
            rows = list(Knowledge.objects.select_for_update(skip_locked=True, no_key=True)
                        .filter(state=lifecycle.ACTIVE, revalidate_after__lte=at)
                        .exclude(expires_at__lte=at).order_by("revalidate_after", "id")[:BATCH])
            for item in rows:
                request_revalidation(item, actor=REVALIDATION, reason="f4_revalidation_due",
                                     evidence={"revalidate_after":
                                               _iso(item.revalidate_after)}, now=at)
            return len(rows)

    return _batched(batch)


def live_source_q(prefix: str = "") -> Q:
    """A source that still stands: a stored message (erasure deletes its source rows), or
    a document version that is not tombstoned, of a document not deleted. A document
    revision that stopped saying a statement has already superseded it."""
    return (Q(**{f"{prefix}message__isnull": False})
            | Q(**{f"{prefix}document_version__isnull": False,
                   f"{prefix}document_version__tombstoned_at__isnull": True,
                   f"{prefix}document_version__document__deleted_at__isnull": True}))


def reconfirm_supported(account_id: uuid.UUID | str, *, now: datetime | None = None) -> int:
    """needs_revalidation rows with no human subject (nobody to ask: scope claims,
    document claims, curator-approved facts) that a live source still supports -> active
    (f4_revalidation_source_live), the next revalidation moved forward and the curator's
    revalidation review closed. The rest stay in the curator queue to reconfirm or
    retire."""
    from governance.services import _next_revalidation

    at = _now(now)
    human = Peer.objects.filter(pk=OuterRef("subject_peer_id"), kind=Peer.Kind.HUMAN)
    supported = KnowledgeSource.objects.filter(knowledge_id=OuterRef("pk")).filter(
        live_source_q())

    def batch() -> int:
        with account_context(account_id, durable=True):
            rows = list(Knowledge.objects.select_for_update(skip_locked=True, no_key=True)
                        .filter(state=lifecycle.NEEDS_REVALIDATION,
                                state_reason="f4_revalidation_due")
                        .filter(~Exists(human), Exists(supported))
                        .order_by("updated_at", "id")[:BATCH])
            for item in rows:
                transition(item, lifecycle.ACTIVE, actor=REVALIDATION,
                           reason="f4_revalidation_source_live", verification=WORKER,
                           evidence={"revalidate_after": _iso(item.revalidate_after)},
                           **_next_revalidation(item, at))
                close_open_work(item, status=Validation.Status.RESOLVED,
                                resolution="source_live", kinds=[Validation.Kind.REVALIDATION])
            return len(rows)

    return _batched(batch)


# --- dream-time aging -------------------------------------------------------------------

def age_overdue_reviews(account_id: uuid.UUID | str, *, now: datetime | None = None) -> int:
    """Held rows whose REVIEW validation is past due_at -> rejected (f4_review_overdue);
    the validation expires. Promotion reviews carry no due date and are never aged."""
    at = _now(now)
    rejected = 0

    def batch() -> int:
        nonlocal rejected
        with account_context(account_id, durable=True):
            due = list(Validation.objects.select_for_update(skip_locked=True, no_key=True)
                       .filter(kind=Validation.Kind.REVIEW, status=Validation.Status.OPEN,
                               due_at__lte=at).order_by("due_at", "id")[:BATCH])
            for validation in due:
                item = Knowledge.objects.select_for_update(no_key=True).get(
                    pk=validation.knowledge_id)
                resolution = "moot"  # the row left `held` some other way
                if item.state == lifecycle.HELD:
                    transition(item, lifecycle.REJECTED, actor=DREAM, reason="f4_review_overdue",
                               verification=WORKER,
                               evidence={"validation": str(validation.pk),
                                         "due_at": _iso(validation.due_at)})
                    resolution = "overdue"
                    rejected += 1
                close_open_work(item, status=Validation.Status.EXPIRED, resolution=resolution,
                                kinds=[Validation.Kind.REVIEW])
            return len(due)

    _batched(batch)
    return rejected


def decay_unanswered_questions(account_id: uuid.UUID | str, *,
                               now: datetime | None = None) -> int:
    """Confirmation and revalidation questions past their deadline expire; a provisional
    or needs_revalidation statement they asked about goes stale
    (f4_revalidation_confidence_decay) with its confidence lowered. Consent questions are
    excluded: an unanswered consent just leaves the row held."""
    at = _now(now)
    staled = 0

    def batch() -> int:
        nonlocal staled
        with account_context(account_id, durable=True):
            due = list(PeerQuestion.objects.select_for_update(skip_locked=True, no_key=True)
                       .filter(status=PeerQuestion.Status.OPEN, deadline__lte=at,
                               kind__in=[PeerQuestion.Kind.CONFIRMATION,
                                         PeerQuestion.Kind.REVALIDATION])
                       .order_by("deadline", "id")[:BATCH])
            for q in due:
                close_questions(PeerQuestion.objects.filter(pk=q.pk),
                                to=PeerQuestion.Status.EXPIRED)
                close_validations(Validation.objects.filter(pk=q.validation_id),
                                  to=Validation.Status.EXPIRED, resolution="unanswered", at=at)
                item = Knowledge.objects.select_for_update(no_key=True).get(pk=q.knowledge_id)
                if item.state in (lifecycle.PROVISIONAL, lifecycle.NEEDS_REVALIDATION):
                    lowered = round(item.confidence * DECAY_FACTOR, 4)
                    transition(item, lifecycle.STALE, actor=DREAM,
                               reason="f4_revalidation_confidence_decay", verification=WORKER,
                               evidence={"question": str(q.pk), "deadline": q.deadline.isoformat(),
                                         "confidence_before": item.confidence},
                               confidence=lowered)
                    staled += 1
            return len(due)

    _batched(batch)
    return staled


# --- dream-time: entities, consolidation, deduction --------------------------------------

def verify_audit_chain(account_id: uuid.UUID | str) -> dict[str, Any]:
    """Recompute the Account's audit chain on the schedule and record the outcome (the
    audit page shows the newest record)."""
    from knowledge.services import audit_chain_verify

    with account_context(account_id, durable=True):
        record = audit_chain_verify(account_id=account_id, trigger="schedule")
    if not record.ok:
        log.error("audit chain of account %s broken at seq %s: %s", account_id,
                  record.broken_seq, record.problem)
    return {"ok": record.ok, "entries": record.entries, "broken_seq": record.broken_seq}


def resolve_entities(account_id: uuid.UUID | str) -> dict[str, Any]:
    """Dream-time: rebuild the entity mention index, then link the other names of one
    thing in each scope (a model confirms every non-exact merge; see
    retrieval.entity_resolution). The rebuild drops the old links with the old rows; the
    resolution writes them again, from cached verdicts where the model already judged."""
    try:
        from retrieval.entities import rebuild_entities  # type: ignore[attr-defined]
    except ImportError:
        log.info("entity resolution skipped: retrieval.entities.rebuild_entities is not "
                 "available")
        return {"status": "skipped", "reason": "retrieval.entities is not available"}
    result = rebuild_entities(account_id)
    return {"status": "ok", "result": result,
            "resolution": resolve_entity_scopes(account_id, None)}


def resolve_entity_scopes(account_id: uuid.UUID | str,
                          scope_ids: list[str] | None) -> dict[str, Any]:
    """Entity resolution of some scopes (all when None), billed to the Account."""
    from retrieval.entity_resolution import resolve_entities as resolve

    return resolve(account_id, scope_ids)


_PAIRS_SQL = """
SELECT a.knowledge_id, b.knowledge_id, 1 - (a.embedding <=> b.embedding) AS similarity
  FROM memhouse_knowledge_vector a
  JOIN memhouse_knowledge_vector b
    ON b.space_id = a.space_id AND b.knowledge_id > a.knowledge_id
  JOIN memhouse_knowledge ka ON ka.id = a.knowledge_id
  JOIN memhouse_knowledge kb ON kb.id = b.knowledge_id
 WHERE ka.state = 'active' AND kb.state = 'active'
   AND ka.scope_id = kb.scope_id
   AND ka.subject_peer_id IS NOT DISTINCT FROM kb.subject_peer_id
   AND ka.level = kb.level AND ka.sensitivity = kb.sensitivity
   AND 1 - (a.embedding <=> b.embedding) >= %s
 ORDER BY similarity DESC, a.knowledge_id, b.knowledge_id
"""


def _keeper_first(a: Knowledge, b: Knowledge) -> tuple[Knowledge, Knowledge]:
    """More independent sources wins; ties go to the older statement."""
    from knowledge.services import independent_source_count

    def rank(k: Knowledge) -> tuple[int, float, str]:
        return (-independent_source_count(k), k.inserted_at.timestamp(), str(k.pk))

    return (a, b) if rank(a) <= rank(b) else (b, a)


def consolidate_duplicates(account_id: uuid.UUID | str, *,
                           threshold: float = SIMILARITY_THRESHOLD) -> int:
    """Merge near-duplicate active statements (same subject, scope, level and sensitivity;
    cosine similarity >= threshold between their vectors in one embedding space).

    The keeper takes the other's provenance, the other is superseded (f4_consolidated)
    and a `consolidates` relation links keeper -> superseded. Level and sensitivity must
    match too, so a merge never widens who may read a claim."""
    from knowledge.services import knowledge_merge_sources

    merged = 0
    with account_context(account_id, durable=True):
        with connection.cursor() as cur:
            cur.execute(_PAIRS_SQL, [threshold])
            pairs = cur.fetchall()
        gone: set[uuid.UUID] = set()
        for a_id, b_id, similarity in pairs:
            if a_id in gone or b_id in gone:
                continue
            rows = {k.pk: k for k in Knowledge.objects
                    .select_for_update(skip_locked=True, no_key=True)
                    .filter(pk__in=[a_id, b_id], state=lifecycle.ACTIVE)}
            if len(rows) != 2:
                continue  # claimed by someone else, or no longer active
            keeper, other = _keeper_first(rows[a_id], rows[b_id])
            knowledge_merge_sources(source=other, into=keeper)
            transition(other, lifecycle.SUPERSEDED, actor=DREAM, reason="f4_consolidated",
                       verification=WORKER,
                       evidence={"consolidated_into": str(keeper.pk),
                                 "similarity": round(float(similarity), 6)})
            Relation.objects.get_or_create(
                account_id=keeper.account_id, source=keeper, target=other,
                type=Relation.Type.CONSOLIDATES,
                defaults={"confidence": round(float(similarity), 6)})
            close_open_work(other, status=Validation.Status.RESOLVED, resolution="consolidated")
            gone.add(other.pk)
            merged += 1
    return merged


DEDUCTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["deductions"],
    "properties": {
        "deductions": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["statement", "kind", "confidence", "contributors"],
                "properties": {
                    "statement": {"type": "string", "minLength": 1, "maxLength": 500},
                    "kind": {"type": "string", "enum": list(Knowledge.Kind.values)},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "contributors": {"type": "array", "minItems": 2,
                                     "items": {"type": "string"}},
                },
            },
        },
    },
}

DEDUCTION_SYSTEM = (
    "You derive new statements about one person from several statements a memory system "
    "already holds about them. Only state what at least two of the given statements "
    "jointly imply; never restate a single statement, never add outside knowledge, and "
    "return an empty list when nothing follows. Name the statements you used by their "
    "refs (S1, S2, ...) in `contributors`. Write each statement in the third person, "
    "using the person's name."
)
# The prompt's version: bump it with any change to the system text or the schema. Only
# its digest is stored on deductions (knowledge.prompts), so it stays private.
DEDUCTION_PROMPT_VERSION = "deduction_v1"
DEDUCTION_PROMPT_IDENTITY = prompt_identity(
    "reasoning_synthesis", version=DEDUCTION_PROMPT_VERSION, system=DEDUCTION_SYSTEM,
    schema=DEDUCTION_SCHEMA)
MAX_CONTRIBUTORS = 20
_SENSITIVITY_ORDER = ["public", "internal", "personal", "restricted"]


@dataclass
class _Group:
    subject_id: uuid.UUID
    subject_name: str
    scope_id: uuid.UUID
    items: list[tuple[uuid.UUID, str]] = field(default_factory=list)

    @property
    def signature(self) -> str:
        ids = ",".join(sorted(str(i) for i, _ in self.items))
        return hashlib.sha256(f"{self.scope_id}|{ids}".encode()).hexdigest()


@dataclass
class DeductionResult:
    status: str  # "skipped" | "ok"
    reason: str = ""
    provider: str = ""
    groups: int = 0
    created: int = 0
    failed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "provider": self.provider,
                "groups": self.groups, "created": self.created, "failed": self.failed}


def _deduction_groups(account_id: uuid.UUID | str) -> list[_Group]:
    """(subject, scope) groups of >= 2 active, non-deduced statements not yet deduced over.

    Deduction stays inside one scope: a conclusion anchored at a wider scope could show
    readers there what only a narrower scope's members may see."""
    with account_context(account_id, durable=True):
        rows = (Knowledge.objects.filter(state=lifecycle.ACTIVE, subject_peer__isnull=False)
                .exclude(extractor="deduction").order_by("-inserted_at")
                .values_list("id", "statement", "subject_peer_id", "scope_id",
                             "subject_peer__display_name"))
        groups: dict[tuple[uuid.UUID, uuid.UUID], _Group] = {}
        for kid, statement, subject_id, scope_id, name in rows:
            g = groups.setdefault((subject_id, scope_id), _Group(subject_id, name, scope_id))
            if len(g.items) < MAX_CONTRIBUTORS:
                g.items.append((kid, statement))
        candidates = [g for g in groups.values() if len(g.items) >= 2]
        done = set(DeductionRun.objects.filter(signature__in=[g.signature for g in candidates])
                   .values_list("signature", flat=True))
    return [g for g in candidates if g.signature not in done]


def _prompt(group: _Group) -> str:
    lines = [{"ref": f"S{i + 1}", "statement": text} for i, (_, text) in enumerate(group.items)]
    return json.dumps({"person": group.subject_name, "statements": lines}, ensure_ascii=False)


def _write_deductions(account_id: uuid.UUID | str, group: _Group, answer: dict[str, Any],
                      provider_name: str) -> int:
    """Create the deduced statements, link them and run the gates. Idempotent: the run's
    signature is unique, and contributors must still be active."""
    from governance.intake.gates import gate_a, gate_b
    from knowledge.services import knowledge_propose

    refs = {f"S{i + 1}": kid for i, (kid, _) in enumerate(group.items)}
    created = 0
    replacements: list[Knowledge] = []
    rederived: set[uuid.UUID] = set()
    with account_context(account_id, durable=True):
        run, fresh = DeductionRun.objects.get_or_create(
            account_id=account_id, signature=group.signature,
            defaults={"subject_peer_id": group.subject_id, "scope_id": group.scope_id,
                      "provider": provider_name})
        if not fresh:
            return 0  # another delivery wrote this run
        for proposal in answer.get("deductions", []):
            ids = list(dict.fromkeys(refs[r] for r in proposal["contributors"] if r in refs))
            if len(ids) < 2:
                continue  # the model named fewer than two real contributors
            contributors = list(Knowledge.objects.select_for_update(of=("self",), no_key=True)
                                .filter(pk__in=ids, state=lifecycle.ACTIVE)
                                .select_related("scope"))
            if len(contributors) != len(ids):
                continue
            sources = {}
            for src in KnowledgeSource.objects.filter(knowledge_id__in=ids):
                key = ("m", src.message_id) if src.message_id else ("d", src.document_version_id)
                sources[key] = ({"message_id": src.message_id} if src.message_id
                                else {"document_version_id": src.document_version_id})
            sensitivity = max((c.sensitivity for c in contributors),
                              key=_SENSITIVITY_ORDER.index)
            confidence = min(float(proposal["confidence"]),
                             min(c.confidence for c in contributors))
            subject = Peer.objects.get(pk=group.subject_id)
            item = knowledge_propose(
                account_id=uuid.UUID(str(account_id)), statement=proposal["statement"],
                scope=contributors[0].scope, subject_peer=subject, actor=DEDUCTION,
                kind=proposal["kind"], level=Knowledge.Level.PEER, confidence=confidence,
                sensitivity=sensitivity, extractor="deduction",
                prompt_identity=DEDUCTION_PROMPT_IDENTITY,
                sources=[{**origin, "excerpt": ""} for origin in sources.values()])
            for c in contributors:
                Relation.objects.get_or_create(account_id=item.account_id, source=item,
                                               target=c, type=Relation.Type.DERIVED_FROM)
            kept = gate_a(item)
            if kept is not None and kept.pk == item.pk:
                placed = gate_b(item, self_observation=False)
                if placed.state != lifecycle.REJECTED:
                    replacements.append(placed)
            elif kept is not None:
                rederived.add(kept.pk)  # the same conclusion again: it stays
            created += 1
        replace_earlier_deductions(group, run, replacements, keep=rederived)
        DeductionRun.objects.filter(pk=run.pk).update(created=created)
    return created


def replace_earlier_deductions(group: _Group, run: DeductionRun, replacements: list[Knowledge],
                               *, keep: set[uuid.UUID]) -> int:
    """Accepted deduction replacement: once a new run over a subject's statements in a
    scope placed a conclusion (past the gates), the conclusions earlier runs drew there
    from statements this run also saw, or that are no longer active, are superseded
    (f4_deduction_replaced, a `supersedes` relation from each replacement). A conclusion
    the new run drew again (a duplicate merged into it) and one resting on an active
    statement this run did not see stay. Call inside the run's transaction."""
    if not replacements:
        return 0
    shown = {kid for kid, _ in group.items}
    retirable = [s for s in lifecycle.CURRENT if lifecycle.SUPERSEDED in lifecycle.EDGES[s]]
    earlier = list(Knowledge.objects.select_for_update(no_key=True)
                   .filter(extractor="deduction", subject_peer_id=group.subject_id,
                           scope_id=group.scope_id, state__in=retirable)
                   .exclude(pk__in=[*keep, *(r.pk for r in replacements)]).order_by("pk"))
    basis: dict[uuid.UUID, set[uuid.UUID]] = defaultdict(set)
    for source_id, target_id in Relation.objects.filter(
            source_id__in=[k.pk for k in earlier],
            type=Relation.Type.DERIVED_FROM).values_list("source_id", "target_id"):
        basis[source_id].add(target_id)
    active = set(Knowledge.objects.filter(
        pk__in={t for targets in basis.values() for t in targets},
        state=lifecycle.ACTIVE).values_list("pk", flat=True))
    replaced = 0
    for old in earlier:
        if not basis[old.pk] or not all(t in shown or t not in active for t in basis[old.pk]):
            continue
        transition(old, lifecycle.SUPERSEDED, actor=DEDUCTION, reason="f4_deduction_replaced",
                   verification=WORKER,
                   evidence={"deduction_run": str(run.pk),
                             "replaced_by": [str(r.pk) for r in replacements]})
        for new in replacements:
            Relation.objects.get_or_create(account_id=old.account_id, source=new, target=old,
                                           type=Relation.Type.SUPERSEDES)
        close_open_work(old, status=Validation.Status.RESOLVED, resolution="replaced")
        replaced += 1
    return replaced


def deduce(account_id: uuid.UUID | str, *, provider: Any = None) -> dict[str, Any]:
    """Derive statements over several active statements about one subject.

    Only with a configured generation provider: with none it does nothing and says so.
    A failing provider leaves the group for the next run and invents nothing. The model
    call holds no database connection; each group is written in its own transaction."""
    from memhouse.core.llm import get_provider

    provider = provider if provider is not None else get_provider()
    if provider is None:
        return DeductionResult("skipped", reason="no generation provider is configured; "
                                                 "deduction needs one").as_dict()
    result = DeductionResult("ok", provider=getattr(provider, "name", "provider"))
    from memhouse.core.metering import metering

    with metering(account_id):  # the provider bills each call to this Account
        _deduce_groups(account_id, provider, result)
    return result.as_dict()


def _deduce_groups(account_id: uuid.UUID | str, provider: Any, result: DeductionResult
                   ) -> None:
    from memhouse.core.llm import ProviderError

    for group in _deduction_groups(account_id):
        result.groups += 1
        if not connection.in_atomic_block:
            connection.close()  # no connection is held across a model call
        try:
            answer = provider.complete_json(system=DEDUCTION_SYSTEM, user=_prompt(group),
                                            schema=DEDUCTION_SCHEMA,
                                            schema_name=DEDUCTION_PROMPT_VERSION)
        except ProviderError as exc:
            log.warning("deduction for one group failed (%s); it will be retried", exc.kind)
            result.failed += 1
            continue
        result.created += _write_deductions(account_id, group, answer, result.provider)


# --- contributor changes ----------------------------------------------------------------

def contributor_changed(account_id: uuid.UUID | str, knowledge_id: uuid.UUID | str) -> int:
    """Active deductions derived from a statement that is no longer active ->
    needs_revalidation (f4_contributor_changed), with a validation row and a question."""
    with account_context(account_id, durable=True):
        contributor = Knowledge.objects.filter(pk=knowledge_id).values("state").first()
        if contributor is None or contributor["state"] == lifecycle.ACTIVE:
            return 0
        derived = Relation.objects.filter(target_id=uuid.UUID(str(knowledge_id)),
                                          type=Relation.Type.DERIVED_FROM).values("source_id")
        moved = 0
        for item in (Knowledge.objects.select_for_update(skip_locked=True, no_key=True)
                     .filter(pk__in=derived, state=lifecycle.ACTIVE).order_by("pk")):
            request_revalidation(item, actor=DEDUCTION, reason="f4_contributor_changed",
                                 evidence={"contributor": str(knowledge_id),
                                           "contributor_state": contributor["state"]})
            moved += 1
        return moved


def per_account(work: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Run `work(account_id, ...)` in every Account; one failing Account does not stop the
    others (it is logged and retried on the next beat)."""
    from knowledge.accounts import list_account_ids

    out: dict[str, Any] = {}
    totals: dict[str, int] = defaultdict(int)
    for account_id in list_account_ids():
        try:
            out[str(account_id)] = value = work(account_id, *args, **kwargs)
        except Exception:
            log.exception("%s failed for account %s", getattr(work, "__name__", work),
                          account_id)
            totals["failed_accounts"] += 1
            continue
        if isinstance(value, int):
            totals["total"] += value
    return {"accounts": out, **totals}
