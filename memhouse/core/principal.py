"""Who is calling (Principal), for whom a read is done (Reader) and who did a write (Actor)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from rest_framework import exceptions

Posture = Literal["peer", "public_only", "internal"]


def path_within(path: str, root: str) -> bool:
    """True when `path` is `root` or a descendant of it."""
    if root == "/":
        return True
    return path == root or path.startswith(root.rstrip("/") + "/")


def ancestor_paths(path: str) -> list[str]:
    """'/a/b' -> ['/a/b', '/a', '/'] (nearest first)."""
    if path == "/":
        return ["/"]
    parts = path.strip("/").split("/")
    out = ["/" + "/".join(parts[:i]) for i in range(len(parts), 0, -1)]
    return [*out, "/"]


def narrow_scopes(granted: tuple[str, ...] | list[str],
                  allowed: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The scopes both lists reach (each list's roots include their descendants): what a
    human's credential may use when the person's own grants are narrower than the
    credential's. Empty when they share nothing."""
    out: list[str] = []
    for g in granted:
        for a in allowed:
            if path_within(g, a):
                out.append(g)
            elif path_within(a, g):
                out.append(a)
    return tuple(sorted(set(out)))


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: its Account, its Peer (if any) and its scope grants."""

    account_id: uuid.UUID
    peer: Any  # knowledge.models.Peer | None
    via: Literal["api_key", "token", "session"]
    scope_paths: tuple[str, ...] = ("/",)
    credential_id: uuid.UUID | None = None
    # The credential's act-for grant (machine credentials only): every peer of the
    # Account, or these peer keys.
    act_for_all: bool = False
    act_for: tuple[str, ...] = ()

    is_authenticated = True
    is_anonymous = False

    @property
    def is_human(self) -> bool:
        return self.peer is not None and self.peer.kind == "human"

    @property
    def is_curator(self) -> bool:
        return self.is_human and bool(self.peer.is_curator)

    @property
    def is_admin(self) -> bool:
        return self.is_human and bool(self.peer.is_admin)

    @property
    def is_machine(self) -> bool:
        """An agent's key or a peerless key: may relay for others within its grant."""
        return self.peer is None or self.peer.kind != "human"

    def may_act_for(self, peer_key: str) -> bool:
        """The one rule of who may read for and speak as whom: oneself always; a machine
        credential also the peers its act-for grant names; a human nobody else."""
        if self.peer is not None and self.peer.key == peer_key:
            return True
        if not self.is_machine:
            return False
        return self.act_for_all or peer_key in self.act_for

    def may_access_scope(self, path: str) -> bool:
        return any(path_within(path, root) for root in self.scope_paths)


@dataclass(frozen=True)
class Reader:
    """Built once per request; every selector and strategy takes it.

    posture "peer": reads for `peer_id` (public + internal, that peer's own rows, rows
    about the scope, promoted rows); "public_only": a peerless credential naming nobody;
    "internal": server-side work (projection rebuild, dream-time, evaluation) - only
    ever constructed by code, never from a request value.
    """

    account_id: uuid.UUID
    posture: Posture
    peer_id: uuid.UUID | None = None
    # Scope roots the caller may read (descendants included); None = every scope.
    scope_roots: tuple[str, ...] | None = ("/",)
    extra: dict[str, Any] = field(default_factory=dict)

    def may_read_scope(self, path: str) -> bool:
        return self.scope_roots is None or any(path_within(path, r) for r in self.scope_roots)


@dataclass(frozen=True)
class Actor:
    """Who did something, as lifecycle events and the audit chain name it: a peer
    (``peer:<key>``, carrying the Peer), a server-side worker (``system:<name>``) or a
    peerless credential (``credential:<id>``, audit entries only: a lifecycle edge needs
    a peer or a worker)."""

    label: str
    peer: Any = None  # knowledge.models.Peer when a peer acted

    def __str__(self) -> str:
        return self.label

    @property
    def is_system(self) -> bool:
        return self.label.startswith("system:")

    @classmethod
    def system(cls, name: str) -> Actor:
        return cls(f"system:{name}")

    @classmethod
    def of_peer(cls, peer: Any) -> Actor:
        return cls(f"peer:{peer.key}", peer)

    @classmethod
    def of_principal(cls, principal: Principal) -> Actor:
        if principal.peer is not None:
            return cls.of_peer(principal.peer)
        return cls(f"credential:{principal.credential_id}")


def internal_reader(account_id: uuid.UUID) -> Reader:
    return Reader(account_id=account_id, posture="internal", scope_roots=None)


def principal_of(request: Any) -> Principal:
    """The request's Principal (views behind IsAccountMember always have one)."""
    user = request.user
    if not isinstance(user, Principal):
        raise exceptions.NotAuthenticated()
    return user
