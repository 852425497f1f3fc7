"""Projection and skill readiness: the lifecycle contract's readiness column as a report.

For a read at a scope (the scope and its ancestors, like every read), about the scope or
about one subject peer:

* **projections**: the scope cards of the chain in the reader's audience and, for a
  subject, that subject's peer profiles, each ``fresh`` (built, clean, every source still
  live), ``dirty`` (a change waits for its rebuild), ``stale`` (a source is no longer
  live; the next read rebuilds it) or ``missing`` (never built). Read-only: nothing is
  created or enqueued, so asking never changes what it reports.
* **readiness per kind**: the statements a projection would be built from (the subject's
  own rows, or the scope's shareable rows) counted by their state's readiness class
  (knowledge.lifecycle READY / SUBJECT_READY / READINESS_GAPS). An ``active`` row whose
  expiry or revalidation date has passed before the worker moved it counts as the gap it
  already is, as reads already hide it. A kind is ``ready`` with a fresh statement,
  ``gap`` with gaps only, ``missing`` with neither.
* **content**: only a subject reading their own report gets the gap statements (id,
  text, state, due date). Every other reader gets statuses and counts of rows its posture
  may see (sensitivity filter in the query), never an id or a word of text.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db.models import Case, CharField, Count, F, Q, QuerySet, Value, When
from django.utils import timezone

from knowledge import lifecycle
from knowledge.models import Knowledge, Peer, Scope
from knowledge.presenters import iso
from knowledge.selectors import scope_ancestors, sensitivity_q
from memhouse.core.principal import Reader
from retrieval.models import Projection, ProjectionSource
from retrieval.projections import SHARED_STATES, SUBJECT_STATES, shareable_q

Kind = Projection.Kind
Audience = Projection.Audience
GAP_LIMIT = 50  # gap statements listed in a subject's own report (counts are complete)


def _effective_state(now: datetime) -> Case:
    """The state a read treats the row as: expiry and revalidation dates bite at read
    time, before the workers move the row."""
    return Case(
        When(state__in=sorted(lifecycle.READY | lifecycle.SUBJECT_READY),
             expires_at__lte=now, then=Value(lifecycle.EXPIRED)),
        When(state__in=sorted(lifecycle.READY), revalidate_after__lte=now,
             then=Value(lifecycle.NEEDS_REVALIDATION)),
        default=F("state"), output_field=CharField())


def _statements(reader: Reader, scope_ids: list[uuid.UUID], subject: Peer | None,
                own: bool) -> QuerySet[Knowledge]:
    qs = Knowledge.objects.filter(account_id=reader.account_id, scope_id__in=scope_ids)
    # What the projections are built from: the subject's own rows, or shareable ones.
    qs = qs.filter(subject_peer_id=subject.pk) if subject is not None else qs.filter(
        shareable_q())
    return qs if own else qs.filter(sensitivity_q(reader))


def _projection_status(account_id: uuid.UUID, keys: list[tuple[str, str, uuid.UUID,
                                                                   uuid.UUID | None]],
                       now: datetime) -> dict[tuple[Any, ...], dict[str, Any]]:
    if not keys:
        return {}
    wanted = Q()
    for kind, audience, scope_id, peer_id in keys:
        wanted |= Q(kind=kind, audience=audience, scope_id=scope_id, peer_id=peer_id,
                    session_id=None)
    rows = list(Projection.objects.filter(account_id=account_id).filter(wanted)
                .values("id", "kind", "audience", "scope_id", "peer_id", "dirty", "built_at"))
    # A served payload must hold only rows still live for its class (as projections.load
    # checks before serving one).
    not_live = (Q(knowledge__expires_at__isnull=False, knowledge__expires_at__lte=now)
                | (Q(projection__kind=Kind.PEER_PROFILE)
                   & ~Q(knowledge__state__in=sorted(SUBJECT_STATES)))
                | (~Q(projection__kind=Kind.PEER_PROFILE)
                   & ~Q(knowledge__state__in=sorted(SHARED_STATES))))
    stale = set(ProjectionSource.objects.filter(projection_id__in=[r["id"] for r in rows])
                .filter(not_live).values_list("projection_id", flat=True))
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in rows:
        if r["dirty"] or r["built_at"] is None:
            status = "dirty" if r["built_at"] is not None else "missing"
        else:
            status = "stale" if r["id"] in stale else "fresh"
        out[(r["kind"], r["audience"], r["scope_id"], r["peer_id"])] = {
            "status": status, "built_at": iso(r["built_at"])}
    return out


def readiness(*, reader: Reader, scope: Scope, subject: Peer | None = None,
              at: datetime | None = None) -> dict[str, Any]:
    """The readiness report of a read at `scope` for `reader`, about `subject` or (None)
    about the scope itself. The caller has authorised `scope` for the reader."""
    now = at or timezone.now()
    chain = sorted(scope_ancestors(scope).values_list("id", "path"),
                   key=lambda row: len(row[1]), reverse=True)  # nearest first
    scope_ids = [sid for sid, _ in chain]
    own = subject is not None and reader.peer_id == subject.pk
    ready_states = lifecycle.READY | (lifecycle.SUBJECT_READY if own else frozenset())

    audience = Audience.PUBLIC if reader.posture == "public_only" else Audience.SHARED
    keys: list[tuple[str, str, uuid.UUID, uuid.UUID | None]] = [
        (Kind.SCOPE_CARD, audience, sid, None) for sid, _ in chain]
    if subject is not None:
        keys += [(Kind.PEER_PROFILE, Audience.SUBJECT, sid, subject.pk) for sid, _ in chain]
    built = _projection_status(reader.account_id, keys, now)
    path_of = dict(chain)
    projections = [{"kind": kind, "audience": aud, "scope": path_of[sid],
                    **built.get((kind, aud, sid, pid), {"status": "missing",
                                                        "built_at": None})}
                   for kind, aud, sid, pid in keys]

    qs = _statements(reader, scope_ids, subject, own).annotate(
        effective=_effective_state(now))
    counted = (qs.filter(effective__in=sorted(ready_states | lifecycle.READINESS_GAPS))
               .values("kind", "effective").annotate(n=Count("id")).order_by())
    kinds: dict[str, dict[str, Any]] = {
        k: {"fresh": 0, "gaps": {g: 0 for g in sorted(lifecycle.READINESS_GAPS)}}
        for k in Knowledge.Kind.values}
    for row in counted:
        entry = kinds[row["kind"]]
        if row["effective"] in lifecycle.READINESS_GAPS:
            entry["gaps"][row["effective"]] += row["n"]
        else:
            entry["fresh"] += row["n"]
    gaps = {g: sum(k["gaps"][g] for k in kinds.values())
            for g in sorted(lifecycle.READINESS_GAPS)}
    for entry in kinds.values():
        entry["status"] = ("ready" if entry["fresh"] else
                           "gap" if any(entry["gaps"].values()) else "missing")
    fresh = sum(k["fresh"] for k in kinds.values())
    report: dict[str, Any] = {
        "scope": scope.path,
        "subject": subject.key if subject is not None else None,
        "reader_posture": reader.posture,
        "status": "gap" if any(gaps.values()) else "ready" if fresh else "missing",
        "projections": projections,
        "kinds": kinds,
        "gaps": gaps,
        "gap_statements": None,
    }
    if own:
        rows = (qs.filter(effective__in=sorted(lifecycle.READINESS_GAPS))
                .select_related("scope").order_by("inserted_at", "id")[:GAP_LIMIT])
        report["gap_statements"] = [
            {"id": str(k.id), "statement": k.statement, "kind": k.kind,
             "state": k.effective, "scope": k.scope.path,  # type: ignore[attr-defined]
             "due_at": iso(k.expires_at if k.effective == lifecycle.EXPIRED  # type: ignore[attr-defined]
                           else k.revalidate_after)}
            for k in rows]
    return report
