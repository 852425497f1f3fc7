"""Reads of the memory model. Every selector takes the reader explicitly.

RLS already confines every query to the reader's Account; these filters add scope,
lifecycle, expiry, provisional-subject and sensitivity visibility *inside* the query,
so nothing is post-filtered in Python.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from knowledge import lifecycle
from knowledge.models import Knowledge, Peer, Scope
from memhouse.errors import ApplicationError, NotFound
from memhouse.principal import Principal, Reader, ancestor_paths


def peer_acted_for(*, principal: Principal, peer_key: Any) -> Peer:
    """The peer a request names with `peer_key`, when the credential may act for it: the
    one place that decides who reads for and speaks as whom (reads and ingest both call
    it). A human credential acts only as itself; a machine credential for itself and the
    peers of its act-for grant. Naming anyone else is 403 `act_for_denied`, whether or not
    that peer exists."""
    if not isinstance(peer_key, str) or not peer_key.strip():
        raise ApplicationError("invalid_peer_key", "peer_key must be a non-empty string")
    if not principal.may_act_for(peer_key):
        who = "a human credential acts only as itself" if not principal.is_machine else \
            "this key's act-for grant does not include that peer"
        raise ApplicationError("act_for_denied", f"may not act for {peer_key!r}: {who}",
                               status_code=403)
    peer = Peer.objects.filter(account_id=principal.account_id, key=peer_key).first()
    if peer is None:
        raise ApplicationError("unknown_peer_key", f"no peer with key {peer_key!r}",
                               status_code=400)
    return peer


def reader_for(*, principal: Principal, peer_key: str | None = None) -> Reader:
    """The Reader of a request.

    A named peer_key reads for that peer, within the credential's act-for rule
    (peer_acted_for: an unknown key is an error, never a fallback to the caller);
    otherwise a credential with a peer reads as that peer and a peerless one reads public
    statements only. Scope authorisation stays the credential's.
    """
    if peer_key is not None:
        peer = peer_acted_for(principal=principal, peer_key=peer_key)
        return Reader(account_id=principal.account_id, posture="peer", peer_id=peer.id,
                      scope_roots=principal.scope_paths)
    if principal.peer is not None:
        return Reader(account_id=principal.account_id, posture="peer",
                      peer_id=principal.peer.id, scope_roots=principal.scope_paths)
    return Reader(account_id=principal.account_id, posture="public_only",
                  scope_roots=principal.scope_paths)


def scope_for_read(*, reader: Reader, path: str) -> Scope:
    """The scope a read targets; unauthorised and missing scopes look the same."""
    from knowledge.services import normalise_scope_path

    path = normalise_scope_path(path)
    if not reader.may_read_scope(path):
        raise NotFound("scope")
    scope = Scope.objects.filter(account_id=reader.account_id, path=path).first()
    if scope is None:
        raise NotFound("scope")
    return scope


def scope_ancestors(scope: Scope) -> QuerySet[Scope]:
    """The scope and its ancestors: what a read at `scope` may see."""
    return Scope.objects.filter(account_id=scope.account_id, path__in=ancestor_paths(scope.path))


def sensitivity_q(reader: Reader, prefix: str = "") -> Q:
    """Which statements the reader's posture may see, by sensitivity, subject and level."""
    if reader.posture == "internal":
        return Q()
    if reader.posture == "public_only":
        return Q(**{f"{prefix}sensitivity": Knowledge.Sensitivity.PUBLIC})
    return (
        Q(**{f"{prefix}sensitivity__in": [Knowledge.Sensitivity.PUBLIC,
                                          Knowledge.Sensitivity.INTERNAL]})
        | Q(**{f"{prefix}subject_peer_id": reader.peer_id})
        | Q(**{f"{prefix}subject_peer__isnull": True})
        | Q(**{f"{prefix}level__in": [Knowledge.Level.SCOPE, Knowledge.Level.ACCOUNT]})
    )


def lifecycle_q(reader: Reader, *, at: datetime | None = None, prefix: str = "") -> Q:
    """Searchable states; provisional only for its own subject; expiry hidden at read time
    even before the sweeper has moved the row to `expired`."""
    at = at or timezone.now()
    states = Q(**{f"{prefix}state__in": sorted(lifecycle.SEARCHABLE)})
    if reader.peer_id is not None:
        states |= Q(**{f"{prefix}state__in": sorted(lifecycle.SUBJECT_SEARCHABLE),
                       f"{prefix}subject_peer_id": reader.peer_id})
    not_expired = Q(**{f"{prefix}expires_at__isnull": True}) | Q(**{f"{prefix}expires_at__gt": at})
    return states & not_expired


def visible_knowledge(*, reader: Reader, scope_ids: Iterable[uuid.UUID] | None = None,
                      at: datetime | None = None) -> QuerySet[Knowledge]:
    """Knowledge a reader may retrieve, optionally limited to a set of scopes."""
    qs = Knowledge.objects.filter(account_id=reader.account_id)
    if scope_ids is not None:
        qs = qs.filter(scope_id__in=list(scope_ids))
    return qs.filter(lifecycle_q(reader, at=at) & sensitivity_q(reader))


def knowledge_for_read(*, reader: Reader, scope: Scope,
                       at: datetime | None = None) -> QuerySet[Knowledge]:
    """Retrievable knowledge for a read at `scope` (the scope and its ancestors)."""
    ids = list(scope_ancestors(scope).values_list("id", flat=True))
    return visible_knowledge(reader=reader, scope_ids=ids, at=at)
