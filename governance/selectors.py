"""Governance reads. Each selector takes the caller's Principal and filters inside the
query; "absent" and "not yours" raise the same NotFound.

Visibility rules applied here (see docs/lifecycle.md):

* curators see held and contested statements in the scopes their credential may access,
  and never a provisional row (another subject's provisional row stays hidden even from
  curators and administrators);
* a human subject sees every statement about themself, in any scope and any state;
* a question is visible only to the peer it was put to.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet
from django.utils import timezone

from governance.models import PeerQuestion, Validation
from knowledge import lifecycle
from knowledge.models import Knowledge, Peer, Scope
from knowledge.presenters import decode_cursor, encode_cursor
from memhouse.core.errors import ApplicationError, NotFound
from memhouse.core.principal import Principal, path_within

QUEUE_STATES = (lifecycle.HELD, lifecycle.CONTESTED)
# What a curator may decide on or promote: curator-visible states (provisional is not).
CURATOR_STATES = tuple(sorted(lifecycle.CURATOR_VISIBLE))
DEFAULT_LIMIT = 50
MAX_LIMIT = 200


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_cursor: str | None


def parse_limit(raw: Any) -> int:
    if raw in (None, ""):
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except (TypeError, ValueError) as exc:
        raise ApplicationError("invalid_limit", f"limit is an integer from 1 to {MAX_LIMIT}"
                               ) from exc
    if not 1 <= limit <= MAX_LIMIT:
        raise ApplicationError("invalid_limit", f"limit is an integer from 1 to {MAX_LIMIT}")
    return limit


def paginate(qs: QuerySet[Any], *, time_field: str, cursor: str | None, limit: int) -> Page:
    """Keyset pagination, newest first, on (time_field, id)."""
    if cursor:
        at, pk = decode_cursor(cursor)
        qs = qs.filter(Q(**{f"{time_field}__lt": at}) | Q(**{time_field: at, "id__lt": pk}))
    rows = list(qs.order_by(f"-{time_field}", "-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = encode_cursor(getattr(rows[-1], time_field), rows[-1].pk) if more else None
    return Page(rows, nxt)


def _knowledge_qs() -> QuerySet[Knowledge]:
    return Knowledge.objects.select_related("subject_peer", "scope", "held_scope")


def _scope_filter(principal: Principal) -> Q:
    """Statements anchored in scopes the credential may access (descendants included)."""
    if any(root == "/" for root in principal.scope_paths):
        return Q()
    q = Q(pk__in=[])
    for root in principal.scope_paths:
        q |= Q(scope__path=root) | Q(scope__path__startswith=root.rstrip("/") + "/")
    return q


def _require_human(principal: Principal) -> None:
    if not principal.is_human:
        raise NotFound("resource")


# --- curators ---------------------------------------------------------------------------

def curator_queue(*, principal: Principal, state: str | None = None, cursor: str | None = None,
                  limit: int = DEFAULT_LIMIT) -> Page:
    """Held and contested statements awaiting a curator, current statements with an
    open contradiction review ("contradiction"), and statements past their revalidation
    date that nobody else can confirm ("revalidation": no human subject), newest first,
    with their open validations. Never provisional rows."""
    # A contradiction about someone's own facts is theirs to settle while their question
    # is open and not yet due; past its deadline it comes to the curator.
    asked = PeerQuestion.objects.filter(validation_id=OuterRef("pk"),
                                        status=PeerQuestion.Status.OPEN,
                                        deadline__gt=timezone.now())
    reviews = (Validation.objects.filter(knowledge_id=OuterRef("pk"),
                                         kind=Validation.Kind.CONTRADICTION,
                                         status=Validation.Status.OPEN)
               .exclude(Exists(asked)))
    contradicted = Q(Exists(reviews),
                     state__in=sorted(lifecycle.CURATOR_VISIBLE & lifecycle.CURRENT))
    due = Validation.objects.filter(knowledge_id=OuterRef("pk"),
                                    kind=Validation.Kind.REVALIDATION,
                                    status=Validation.Status.OPEN)
    revalidation = (Q(Exists(due), state=lifecycle.NEEDS_REVALIDATION)
                    & (Q(subject_peer__isnull=True) | ~Q(subject_peer__kind=Peer.Kind.HUMAN)))
    if state and state not in (*QUEUE_STATES, "contradiction", "revalidation"):
        raise ApplicationError("invalid_state", "the queue holds 'held', 'contested', "
                                                "'contradiction' or 'revalidation'")
    if state == "contradiction":
        which = contradicted
    elif state == "revalidation":
        which = revalidation
    elif state:
        which = Q(state=state)
    else:
        which = Q(state__in=QUEUE_STATES) | contradicted | revalidation
    open_validations = Prefetch(
        "validations", queryset=Validation.objects.filter(status=Validation.Status.OPEN)
        .select_related("target_scope").order_by("created_at"), to_attr="open_validations")
    ids = _knowledge_qs().filter(account_id=principal.account_id).filter(which).values("id")
    qs = (_knowledge_qs().filter(pk__in=ids).filter(_scope_filter(principal))
          .prefetch_related(open_validations))
    return paginate(qs, time_field="updated_at", cursor=cursor, limit=limit)


def knowledge_for_curator(*, principal: Principal, knowledge_id: uuid.UUID) -> Knowledge:
    item = (_knowledge_qs().filter(account_id=principal.account_id, pk=knowledge_id)
            .filter(lifecycle.visible_q("curator", CURATOR_STATES))
            .filter(_scope_filter(principal)).first())
    if item is None:
        raise NotFound("knowledge")
    return item


def scope_for_curator(*, principal: Principal, path: str) -> Scope:
    from knowledge.services import normalise_scope_path

    path = normalise_scope_path(path)
    scope = Scope.objects.filter(account_id=principal.account_id, path=path).first()
    if scope is None or not any(path_within(path, r) for r in principal.scope_paths):
        raise NotFound("scope")
    return scope


# --- subjects ---------------------------------------------------------------------------

def knowledge_about_me(*, principal: Principal, cursor: str | None = None,
                       limit: int = DEFAULT_LIMIT) -> Page:
    """Everything about the signed-in human, in any scope and any state."""
    _require_human(principal)
    qs = _knowledge_qs().filter(account_id=principal.account_id,
                                subject_peer_id=principal.peer.id)
    return paginate(qs, time_field="inserted_at", cursor=cursor, limit=limit)


def knowledge_for_subject(*, principal: Principal, knowledge_id: uuid.UUID) -> Knowledge:
    _require_human(principal)
    item = _knowledge_qs().filter(account_id=principal.account_id, pk=knowledge_id,
                                  subject_peer_id=principal.peer.id).first()
    if item is None:
        raise NotFound("knowledge")
    return item


# --- questions --------------------------------------------------------------------------

def questions_for_me(*, principal: Principal, status: str = PeerQuestion.Status.OPEN,
                     cursor: str | None = None, limit: int = DEFAULT_LIMIT) -> Page:
    _require_human(principal)
    if status not in PeerQuestion.Status.values:
        raise ApplicationError("invalid_status",
                               f"status is one of {', '.join(PeerQuestion.Status.values)}")
    qs = (PeerQuestion.objects.select_related("knowledge", "knowledge__scope")
          .filter(account_id=principal.account_id, peer_id=principal.peer.id, status=status))
    return paginate(qs, time_field="created_at", cursor=cursor, limit=limit)


def question_for_me(*, principal: Principal, question_id: uuid.UUID) -> PeerQuestion:
    _require_human(principal)
    q = PeerQuestion.objects.filter(account_id=principal.account_id, pk=question_id,
                                    peer_id=principal.peer.id).first()
    if q is None:
        raise NotFound("question")
    return q


# --- operators: dead letters -------------------------------------------------------------

DEAD_LETTER_KINDS = ("message", "document_version")


def dead_letters(*, principal: Principal, kind: str | None = None, cursor: str | None = None,
                 limit: int = DEFAULT_LIMIT) -> Page:
    """Messages and document versions set aside in the administrator's Account (and
    scopes), newest failure first: one keyset over both tables on (failed at, id), so a
    cursor pages through them as through one list."""
    from knowledge.ingest import dead_letter

    if kind and kind not in DEAD_LETTER_KINDS:
        raise ApplicationError("invalid_kind", "kind is 'message' or 'document_version'")
    parts: list[tuple[QuerySet[Any], str]] = []
    if kind in (None, "", "message"):
        parts.append((dead_letter.dead_letters_for(principal).select_related("peer", "scope"),
                      "extraction_failed_at"))
    if kind in (None, "", "document_version"):
        parts.append((dead_letter.dead_versions_for(principal)
                      .select_related("document__scope", "document__peer")
                      .defer("blob", "text"), "processing_failed_at"))
    at, pk = decode_cursor(cursor) if cursor else (None, None)
    rows: list[tuple[Any, uuid.UUID, Any]] = []
    for qs, time_field in parts:
        if at is not None:
            qs = qs.filter(Q(**{f"{time_field}__lt": at}) | Q(**{time_field: at, "id__lt": pk}))
        rows += [(getattr(row, time_field), row.pk, row)
                 for row in qs.order_by(f"-{time_field}", "-id")[: limit + 1]]
    rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
    more = len(rows) > limit
    rows = rows[:limit]
    return Page([row for _, _, row in rows],
                encode_cursor(rows[-1][0], rows[-1][1]) if more else None)
