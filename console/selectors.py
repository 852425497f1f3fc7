"""Console reads that the governance and knowledge selectors do not already offer.

Every function takes the Principal (and, where it reads knowledge, the Reader built from
it) and filters inside the query. The visibility rule for browsing is the union of the
three audiences of docs/lifecycle.md, each exactly as the API applies it:

* as a subject: every statement about yourself, in any scope and state
  (governance.selectors.knowledge_for_subject);
* as a curator (or administrator, whose column in the contract is the same):
  curator-visible states in the scopes you may access, whatever their sensitivity
  (governance.selectors.knowledge_for_curator) - never provisional;
* as a member: member-visible states that your reader posture may see by sensitivity
  (knowledge.selectors.sensitivity_q), in scopes you may read.

So another subject's provisional row is never listed, not even for a curator.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from django.core.paginator import Page, Paginator
from django.db.models import Case, Count, IntegerField, Q, QuerySet, Value, When
from django.utils import timezone

from governance import selectors as gov
from governance.models import PeerQuestion, Validation
from knowledge import lifecycle
from knowledge.models import (
    AuditEntry,
    AuditVerification,
    Knowledge,
    KnowledgeSource,
    LifecycleEvent,
    Relation,
    Scope,
)
from knowledge.selectors import scope_ancestors, sensitivity_q
from memhouse.core.errors import NotFound
from memhouse.core.principal import Principal, Reader, ancestor_paths

COUNT_CAP = gov.MAX_LIMIT
AUDIT_PAGE_SIZE = 50
BROWSE_PAGE_SIZE = 25


def _within_roots(principal: Principal, prefix: str = "") -> Q:
    """Scopes at or below the principal's grants (what curator selectors use)."""
    if "/" in principal.scope_paths:
        return Q()
    q = Q(pk__in=[])
    for root in principal.scope_paths:
        q |= Q(**{f"{prefix}scope__path": root}) | Q(
            **{f"{prefix}scope__path__startswith": root.rstrip("/") + "/"})
    return q


def _readable_scopes(principal: Principal) -> Q:
    """Scopes a member read may reach: the grants, their descendants and, because context
    flows downward, their ancestors."""
    if "/" in principal.scope_paths:
        return Q()
    ancestors = {p for root in principal.scope_paths for p in ancestor_paths(root)}
    return _within_roots(principal) | Q(scope__path__in=sorted(ancestors))


def viewer_q(*, principal: Principal, reader: Reader) -> Q:
    """Which statements the signed-in human may inspect (see the module docstring)."""
    member = (lifecycle.visible_q("member") & sensitivity_q(reader)
              & _readable_scopes(principal))
    q = member
    if principal.is_curator or principal.is_admin:
        # The contract gives administrators the curators' read visibility; only curators
        # decide (the views and services check that separately). History keeps the
        # visibility the row had while it lived (lifecycle.visible_q).
        role = "curator" if principal.is_curator else "admin"
        q |= lifecycle.visible_q(role) & _within_roots(principal)
    if principal.is_human:
        q |= Q(subject_peer_id=principal.peer.id)
    return q


def _knowledge_qs(principal: Principal) -> QuerySet[Knowledge]:
    return Knowledge.objects.filter(account_id=principal.account_id).select_related(
        "subject_peer", "scope", "held_scope", "proposed_by")


def knowledge_for_viewer(*, principal: Principal, reader: Reader,
                         knowledge_id: uuid.UUID) -> Knowledge:
    item = (_knowledge_qs(principal).filter(pk=knowledge_id)
            .filter(viewer_q(principal=principal, reader=reader)).first())
    if item is None:
        raise NotFound("knowledge")
    return item


def browse_knowledge(*, principal: Principal, reader: Reader, scope: Scope,
                     states: Iterable[str] = (), page: Any = 1) -> Page[Knowledge]:
    """Statements visible at `scope` (the scope and its ancestors, as a read there sees
    them), optionally limited to some lifecycle states, most recently changed first."""
    ids = list(scope_ancestors(scope).values_list("id", flat=True))
    qs = (_knowledge_qs(principal).filter(scope_id__in=ids)
          .filter(viewer_q(principal=principal, reader=reader)))
    wanted = [s for s in states if s in lifecycle.STATES]
    if wanted:
        qs = qs.filter(state__in=wanted)
    return Paginator(qs.order_by("-updated_at", "-id"), BROWSE_PAGE_SIZE).get_page(page)


def statement_counts_by_scope(*, principal: Principal, reader: Reader) -> dict[uuid.UUID, int]:
    """How many statements the viewer may inspect are anchored at each scope (one
    grouped query): the scope tree shows them, and the browser opens where they are."""
    rows = (Knowledge.objects.filter(account_id=principal.account_id)
            .filter(viewer_q(principal=principal, reader=reader))
            .values("scope_id").annotate(n=Count("id")).order_by())
    return {r["scope_id"]: r["n"] for r in rows}


def scopes_for(*, principal: Principal) -> list[Scope]:
    qs = Scope.objects.filter(account_id=principal.account_id).order_by("path")
    return [s for s in qs if principal.may_access_scope(s.path)
            or s.path in {p for r in principal.scope_paths for p in ancestor_paths(r)}]


# --- curator queue ----------------------------------------------------------------------

CONTRADICTION = "contradiction"  # the queue's filter for open contradiction reviews
REVALIDATION = "revalidation"  # ... and for statements nobody else can confirm, now due


@dataclass(frozen=True)
class QueueCounts:
    held: int
    contested: int
    capped: bool  # True when a count reached COUNT_CAP ("200+")
    contradicted: int = 0
    revalidation: int = 0

    @property
    def total(self) -> int:
        return self.held + self.contested + self.contradicted + self.revalidation


def queue_counts(*, principal: Principal) -> QueueCounts:
    """Open curator work, counted through governance.selectors.curator_queue itself so the
    numbers obey exactly the queue's authorisation (capped at COUNT_CAP per state)."""
    counts: dict[str, int] = {}
    capped = False
    for state in (*gov.QUEUE_STATES, CONTRADICTION, REVALIDATION):
        page = gov.curator_queue(principal=principal, state=state, limit=COUNT_CAP)
        counts[state] = len(page.items)
        capped = capped or page.next_cursor is not None
    return QueueCounts(held=counts[lifecycle.HELD], contested=counts[lifecycle.CONTESTED],
                       contradicted=counts[CONTRADICTION],
                       revalidation=counts[REVALIDATION], capped=capped)


@dataclass(frozen=True)
class ContradictionView:
    """A newer claim that contradicts a queued statement. `other` is None when the
    curator may not see it; `awaiting_subject` then says it is a provisional row waiting
    for its subject (the only thing a curator learns about it)."""

    other: Knowledge | None
    awaiting_subject: bool


def contradictions_by_knowledge(*, principal: Principal, reader: Reader,
                                ids: Iterable[uuid.UUID]
                                ) -> dict[uuid.UUID, list[ContradictionView]]:
    """The `contradicts` relations pointing at each statement, their other ends shown only
    when the viewer may see them (viewer_q, as on the item page). Three queries."""
    rels = list(Relation.objects.filter(target_id__in=list(ids),
                                        type=Relation.Type.CONTRADICTS)
                .order_by("created_at"))
    sources = {r.source_id for r in rels}
    visible = {k.pk: k for k in _knowledge_qs(principal).filter(pk__in=sources)
               .filter(viewer_q(principal=principal, reader=reader))}
    hidden_states = dict(Knowledge.objects.filter(pk__in=sources - visible.keys())
                         .values_list("pk", "state"))
    out: dict[uuid.UUID, list[ContradictionView]] = {}
    for r in rels:
        other = visible.get(r.source_id)
        out.setdefault(r.target_id, []).append(ContradictionView(
            other=other, awaiting_subject=other is None and hidden_states.get(
                r.source_id) == lifecycle.PROVISIONAL))
    return out


def curator_may_correct(*, principal: Principal, item: Knowledge) -> bool:
    """Whether the curator correction forms (edit, merge) apply to `item`: the rule of
    governance.selectors.knowledge_for_curator plus a state a correction may retire. The
    service decides the rest (a pending promotion, an unchanged text...)."""
    from governance.services import CORRECTABLE

    return (principal.is_curator and item.state in CORRECTABLE
            and item.state in gov.CURATOR_STATES
            and principal.may_access_scope(item.scope.path))


def sources_by_knowledge(ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, list[KnowledgeSource]]:
    """Provenance rows of statements the caller has already been authorised to see."""
    out: dict[uuid.UUID, list[KnowledgeSource]] = {}
    rows = (KnowledgeSource.objects.filter(knowledge_id__in=list(ids))
            .select_related("message__peer", "document_version__document")
            .order_by("created_at"))
    for src in rows:
        out.setdefault(src.knowledge_id, []).append(src)
    return out


def consent_by_knowledge(ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Validation]:
    """The latest consent validation of each statement (open or closed)."""
    out: dict[uuid.UUID, Validation] = {}
    rows = (Validation.objects.filter(knowledge_id__in=list(ids), kind=Validation.Kind.CONSENT)
            .order_by("created_at"))
    for v in rows:
        out[v.knowledge_id] = v
    return out


@dataclass(frozen=True)
class Activity:
    """The Account's governed knowledge at a glance, within the curator's scopes."""

    held: int
    contested: int
    needs_revalidation: int
    stale: int
    expiring_soon: int  # in use and past expires_at within EXPIRING_WINDOW
    window_days: int


EXPIRING_WINDOW = timedelta(days=7)


def account_activity(*, principal: Principal) -> Activity:
    """One grouped query over the statements a curator may see (the curator-visible
    states in their scopes: never another subject's provisional row)."""
    now = timezone.now()
    qs = Knowledge.objects.filter(account_id=principal.account_id).filter(
        lifecycle.visible_q("curator", gov.CURATOR_STATES), _within_roots(principal))
    soon = Q(state__in=sorted(lifecycle.SEARCHABLE), expires_at__gt=now,
             expires_at__lte=now + EXPIRING_WINDOW)
    counts = qs.aggregate(
        held=Count("id", filter=Q(state=lifecycle.HELD)),
        contested=Count("id", filter=Q(state=lifecycle.CONTESTED)),
        needs_revalidation=Count("id", filter=Q(state=lifecycle.NEEDS_REVALIDATION)),
        stale=Count("id", filter=Q(state=lifecycle.STALE)),
        expiring_soon=Count("id", filter=soon))
    return Activity(window_days=EXPIRING_WINDOW.days, **counts)


# --- subjects ---------------------------------------------------------------------------

ME_PAGE_SIZE = 50
# "About me" lists what asks something of the person first, then what is in use, then
# history: within a state, by scope.
ME_STATE_ORDER = (lifecycle.PROVISIONAL, lifecycle.NEEDS_REVALIDATION, lifecycle.STALE,
                  lifecycle.HELD, lifecycle.CONTESTED, lifecycle.ACTIVE, lifecycle.PROPOSED,
                  lifecycle.SUPERSEDED, lifecycle.EXPIRED, lifecycle.REJECTED,
                  lifecycle.REDACTED, lifecycle.RETRACTED)


def _about_me_qs(principal: Principal) -> QuerySet[Knowledge]:
    return _knowledge_qs(principal).filter(subject_peer_id=principal.peer.id)


def about_me(*, principal: Principal, state: str = "", scope: str = "",
             page: Any = 1, refused: bool = False) -> Page[Knowledge]:
    """Everything about the signed-in human (any scope, any state), optionally one state
    and one scope, grouped by state (ME_STATE_ORDER) then scope path, newest first.
    Gate A's refusals (lifecycle.GATE_REFUSALS: junk kept as evidence) are listed apart:
    without `refused` they are left out, with it they are all there is."""
    qs = _about_me_qs(principal)
    refusals = Q(state=lifecycle.REJECTED, state_reason__in=sorted(lifecycle.GATE_REFUSALS))
    qs = qs.filter(refusals) if refused else qs.exclude(refusals)
    if state:
        qs = qs.filter(state=state)
    if scope:
        qs = qs.filter(scope__path=scope)
    rank = Case(*[When(state=s, then=Value(i)) for i, s in enumerate(ME_STATE_ORDER)],
                default=Value(len(ME_STATE_ORDER)), output_field=IntegerField())
    ordered = qs.annotate(state_rank=rank).order_by("state_rank", "scope__path",
                                                    "-updated_at", "-id")
    # The rank annotation is for ordering only; rows are plain statements.
    return cast("Page[Knowledge]", Paginator(ordered, ME_PAGE_SIZE).get_page(page))


def about_me_facets(*, principal: Principal) -> tuple[list[tuple[str, int]],
                                                      list[tuple[str, int]]]:
    """The states and scopes the person's statements are in, with counts (the filter's
    choices): two grouped queries."""
    qs = _about_me_qs(principal)
    states = dict(qs.values_list("state").annotate(n=Count("id")).order_by())
    scopes = list(qs.values_list("scope__path").annotate(n=Count("id")).order_by("scope__path"))
    ordered = [(s, states[s]) for s in ME_STATE_ORDER if s in states]
    return ordered, [(path, n) for path, n in scopes]


def open_question_count(*, principal: Principal) -> int:
    if not principal.is_human:
        return 0
    return PeerQuestion.objects.filter(account_id=principal.account_id,
                                       peer_id=principal.peer.id,
                                       status=PeerQuestion.Status.OPEN).count()


# --- item page --------------------------------------------------------------------------

CHAIN_HOPS = 20


@dataclass(frozen=True)
class ChainLink:
    """One statement in a supersession chain, `hop` steps from the page's statement.
    `item` is None for a statement the viewer may not see (the walk stops there)."""

    hop: int
    item: Knowledge | None


def _supersession_neighbours(ids: set[uuid.UUID], *, older: bool) -> set[uuid.UUID]:
    """The statements `ids` supersede (older) or are superseded by (newer): both the
    Knowledge.supersedes link and supersedes relations (a merge links every original)."""
    rels = Relation.objects.filter(type=Relation.Type.SUPERSEDES)
    if older:
        found = set(rels.filter(source_id__in=ids).values_list("target_id", flat=True))
        found |= {pk for pk in Knowledge.objects.filter(pk__in=ids)
                  .values_list("supersedes_id", flat=True) if pk is not None}
    else:
        found = set(rels.filter(target_id__in=ids).values_list("source_id", flat=True))
        found |= set(Knowledge.objects.filter(supersedes_id__in=ids)
                     .values_list("id", flat=True))
    return found


def supersession_chain(*, principal: Principal, reader: Reader, item: Knowledge,
                       older: bool, hops: int | None = None) -> tuple[list[ChainLink], bool]:
    """Walk the supersession links from `item`, older or newer, at most `hops` steps.
    Only statements the viewer may see (viewer_q) are shown; a hidden one is a
    placeholder and the walk does not continue through it. Returns the links, nearest
    first, and whether the walk stopped at the bound with more to go."""
    hops = CHAIN_HOPS if hops is None else hops
    seen = {item.pk}
    frontier = {item.pk}
    links: list[ChainLink] = []
    for hop in range(1, hops + 1):
        found = _supersession_neighbours(frontier, older=older) - seen
        if not found:
            return links, False
        seen |= found
        visible = {k.pk: k for k in _knowledge_qs(principal).filter(pk__in=found)
                   .filter(viewer_q(principal=principal, reader=reader))}
        shown = sorted(visible.values(), key=lambda k: (k.inserted_at, str(k.pk)),
                       reverse=older)
        links.extend(ChainLink(hop=hop, item=k) for k in shown)
        links.extend(ChainLink(hop=hop, item=None) for _ in range(len(found) - len(visible)))
        frontier = set(visible)
        if not frontier:
            return links, False
    return links, bool(_supersession_neighbours(frontier, older=older) - seen)


@dataclass(frozen=True)
class RelationView:
    type: str
    direction: str  # "out" (this -> other) | "in" (other -> this)
    confidence: float
    other: Knowledge | None  # None: a statement the viewer may not see


def lineage(*, principal: Principal, reader: Reader, item: Knowledge) -> dict[str, Any]:
    """Sources, typed relations (other ends only when visible), the supersession chain
    both ways and lifecycle history."""
    sources = sources_by_knowledge([item.pk]).get(item.pk, [])
    # Supersession is shown as a chain (supersession_chain), not among the relations.
    rels = list(Relation.objects.filter(Q(source_id=item.pk) | Q(target_id=item.pk))
                .exclude(type=Relation.Type.SUPERSEDES).order_by("created_at"))
    other_ids = {r.target_id if r.source_id == item.pk else r.source_id for r in rels}
    visible = {k.pk: k for k in _knowledge_qs(principal).filter(pk__in=other_ids)
               .filter(viewer_q(principal=principal, reader=reader))}
    relations = [
        RelationView(type=r.type, direction="out" if r.source_id == item.pk else "in",
                     confidence=r.confidence,
                     other=visible.get(r.target_id if r.source_id == item.pk else r.source_id))
        for r in rels
    ]
    supersedes, older_more = supersession_chain(principal=principal, reader=reader,
                                                item=item, older=True)
    superseded_by, newer_more = supersession_chain(principal=principal, reader=reader,
                                                   item=item, older=False)
    events = list(LifecycleEvent.objects.filter(knowledge_id=item.pk)
                  .select_related("actor_peer").order_by("created_at", "id"))
    return {"sources": sources, "relations": relations, "events": events,
            "supersedes": supersedes, "superseded_by": superseded_by,
            "supersedes_more": older_more, "superseded_by_more": newer_more,
            "chain_hops": CHAIN_HOPS}


# --- audit ------------------------------------------------------------------------------

def audit_page(*, principal: Principal, page: Any = 1) -> Page[AuditEntry]:
    """The Account's audit chain, newest first (curators and administrators only; the
    view checks the role)."""
    qs = AuditEntry.objects.filter(account_id=principal.account_id).order_by("-seq")
    return Paginator(qs, AUDIT_PAGE_SIZE).get_page(page)


def audit_verification(*, principal: Principal) -> AuditVerification | None:
    """The newest recorded verification of the Account's audit chain, with `appended`:
    how many entries were added after it (they are not yet covered by it)."""
    last = (AuditVerification.objects.filter(account_id=principal.account_id)
            .order_by("-verified_at").first())
    if last is not None:
        last.appended = AuditEntry.objects.filter(  # type: ignore[attr-defined]
            account_id=principal.account_id, seq__gt=last.head_seq).count()
    return last
