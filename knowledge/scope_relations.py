"""Scope relations: administrators link two scopes so relation expansion may cross them.

A link is undirected and names exactly two scopes (not their descendants). It never grants
access: retrieval follows it only when the reader is authorised for both endpoints
(:func:`linked_scopes`), so a reader confined to one side gains nothing from it.

Writes (create, delete) are one transaction each and append to the audit chain; reads take
the principal or reader explicitly. An administrator whose grants do not reach a scope is
answered exactly as if the scope did not exist.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Q

from knowledge import audit
from knowledge.models import Scope, ScopeRelation
from memhouse.core.errors import ApplicationError, NotFound
from memhouse.core.principal import Principal, Reader

# Links a read may follow out of its scopes, oldest first: bounds the work relation
# expansion does however many links an administrator draws.
MAX_LINKS_PER_READ = 16


def _scope_for_admin(*, principal: Principal, path: str) -> Scope:
    from knowledge.services import normalise_scope_path

    path = normalise_scope_path(path)
    scope = Scope.objects.filter(account_id=principal.account_id, path=path).first()
    if scope is None or not principal.may_access_scope(path):
        raise NotFound("scope")
    return scope


def relation_out(rel: ScopeRelation) -> dict[str, object]:
    return {"id": str(rel.id), "source": rel.source.path, "target": rel.target.path,
            "created_by": rel.created_by.key if rel.created_by else None,
            "created_at": rel.created_at.isoformat()}


def relations_list(*, principal: Principal) -> list[ScopeRelation]:
    """The Account's links whose both endpoints the administrator's grants reach."""
    rows = (ScopeRelation.objects.filter(account_id=principal.account_id)
            .select_related("source", "target", "created_by").order_by("created_at", "id"))
    return [r for r in rows if principal.may_access_scope(r.source.path)
            and principal.may_access_scope(r.target.path)]


@transaction.atomic
def relation_create(*, principal: Principal, source: str, target: str) -> ScopeRelation:
    """Link two existing scopes. 404 `not_found` for a scope that is missing or outside the
    administrator's grants, 400 `scope_relation_self` for a scope linked to itself, 409
    `scope_relation_exists` when the pair is already linked (in either direction)."""
    a = _scope_for_admin(principal=principal, path=source)
    b = _scope_for_admin(principal=principal, path=target)
    if a.pk == b.pk:
        raise ApplicationError("scope_relation_self", "a scope cannot be linked to itself")
    pair = Q(source=a, target=b) | Q(source=b, target=a)
    if ScopeRelation.objects.filter(account_id=principal.account_id).filter(pair).exists():
        raise ApplicationError("scope_relation_exists",
                               f"{a.path} and {b.path} are already linked", status_code=409)
    try:
        with transaction.atomic():
            rel = ScopeRelation.objects.create(account_id=principal.account_id, source=a,
                                               target=b, created_by=principal.peer)
    except IntegrityError as exc:  # a concurrent create of the same pair
        raise ApplicationError("scope_relation_exists",
                               f"{a.path} and {b.path} are already linked",
                               status_code=409) from exc
    audit.append(account_id=principal.account_id, event_type="scope_relation.created",
                 actor=_actor(principal), target_type="scope_relation", target_id=str(rel.pk),
                 payload={"source": a.path, "target": b.path})
    return rel


@transaction.atomic
def relation_delete(*, principal: Principal, relation_id: uuid.UUID) -> None:
    rel = (ScopeRelation.objects.select_for_update().select_related("source", "target")
           .filter(account_id=principal.account_id, pk=relation_id).first())
    if rel is None or not (principal.may_access_scope(rel.source.path)
                           and principal.may_access_scope(rel.target.path)):
        raise NotFound("scope relation")
    payload = {"source": rel.source.path, "target": rel.target.path}
    rel.delete()
    audit.append(account_id=principal.account_id, event_type="scope_relation.deleted",
                 actor=_actor(principal), target_type="scope_relation",
                 target_id=str(relation_id), payload=payload)


def _actor(principal: Principal) -> str:
    return f"peer:{principal.peer.key}" if principal.peer is not None else "api"


# --- reading: the links a read may follow ----------------------------------------------


@dataclass(frozen=True)
class Link:
    """A followable link, oriented from a scope of the read (`origin`) to another one."""

    origin: uuid.UUID
    linked: uuid.UUID
    linked_path: str


def linked_scopes(*, reader: Reader, scope_ids: Iterable[uuid.UUID]) -> list[Link]:
    """Links from one of `scope_ids` (the read's own scopes) to a scope outside them,
    authorised twice: the reader's grants must reach the origin scope itself (an ancestor
    a read merely inherits is not enough) and the linked scope. Oldest first, at most
    MAX_LINKS_PER_READ."""
    ids = list(dict.fromkeys(scope_ids))
    if not ids:
        return []
    rows = (ScopeRelation.objects.filter(account_id=reader.account_id)
            .filter(Q(source_id__in=ids) | Q(target_id__in=ids))
            .select_related("source", "target").order_by("created_at", "id")
            [:MAX_LINKS_PER_READ * 8])
    own = set(ids)
    out: list[Link] = []
    for rel in rows:
        for origin, linked in ((rel.source, rel.target), (rel.target, rel.source)):
            if origin.pk not in own or linked.pk in own:
                continue
            if reader.may_read_scope(origin.path) and reader.may_read_scope(linked.path):
                out.append(Link(origin.pk, linked.pk, linked.path))
        if len(out) >= MAX_LINKS_PER_READ:
            break
    return out[:MAX_LINKS_PER_READ]
