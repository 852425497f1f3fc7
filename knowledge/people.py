"""People: the humans of an Account, their roles, scope grants, passwords and invitations.

Services (one durable transaction each) and selectors (they take the reader's
Principal). A role is the pair (is_curator, is_admin) on the Peer: member (neither),
curator, admin (both). A person's `scope_paths` bound every credential they hold
(knowledge.credentials), so a grant revoked here takes effect on live tokens at once.

An invitation is a Credential of kind "invitation": one-time, expiring, stored as a
digest like any key and never accepted as an API credential. The invitee opens its link
in the console and sets their own password; using it revokes it, with the person's login
tokens and console sessions. It is for someone without a password (issue #34): whoever
holds the link can become the person, so re-inviting someone who has one is refused
unless the administrator resets them, which revokes everything they hold and is audited
as the administrator.

Administrators with narrower grants than '/' (`granter_scopes`) may grant only scopes
inside their own and change only people whose grants lie inside them; the command line
passes None (the operator).

Every change appends an audit entry; passwords and tokens never appear in one.
"""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from knowledge import audit, services
from knowledge.credentials import hash_secret, split_key
from knowledge.models import AuditEntry, Credential, Peer, Scope
from memhouse.core.errors import ApplicationError, NotFound
from memhouse.core.principal import Principal, path_within
from memhouse.core.tenancy import CREDENTIAL_PREFIX_SETTING, narrow_lookup, set_account

ROLES: dict[str, tuple[bool, bool]] = {
    "member": (False, False), "curator": (True, False), "admin": (True, True)}
MAX_SCOPES = 50


def invitation_ttl() -> timedelta:
    return timedelta(hours=settings.MEMHOUSE_INVITATION_TTL_HOURS)


def _role_of(peer: Peer) -> str:
    if peer.is_admin:
        return "admin"
    return "curator" if peer.is_curator else "member"


def _role_flags(role: str) -> tuple[bool, bool]:
    if role not in ROLES:
        raise ApplicationError("invalid_role", "role is 'member', 'curator' or 'admin'",
                               details={"field": "role"})
    return ROLES[role]


def _clean_scopes(account_id: uuid.UUID, paths: list[str]) -> list[str]:
    """Normalised, existing, sorted, each once. A grant covered by another one is kept:
    revoking the wider one later leaves the narrower one in place."""
    if not paths:
        raise ApplicationError("scopes_required", "a person needs at least one scope "
                               "(use '/' for the whole Account)", details={"field": "scopes"})
    if len(paths) > MAX_SCOPES:
        raise ApplicationError("too_many_scopes", f"at most {MAX_SCOPES} scopes per person",
                               details={"field": "scopes"})
    norm = sorted({services.normalise_scope_path(p) for p in paths})
    known = set(Scope.objects.filter(account_id=account_id, path__in=norm)
                .values_list("path", flat=True))
    missing = [p for p in norm if p not in known]
    if missing:
        raise ApplicationError("unknown_scope", f"no scopes {missing} in this Account; "
                               "create them first (POST /api/v1/scopes)",
                               details={"field": "scopes", "paths": missing})
    return norm


def _check_password(password: str, user: Any = None) -> None:
    try:
        validate_password(password, user=user)
    except ValidationError as exc:
        raise ApplicationError("weak_password", " ".join(exc.messages),
                               details={"field": "password"}) from exc


def _audit(peer: Peer, event: str, actor: str, **payload: Any) -> None:
    audit.append(account_id=peer.account_id, event_type=event, actor=actor,
                 target_type="peer", target_id=str(peer.pk), payload={"key": peer.key,
                                                                      **payload})


def _active_admins(account_id: uuid.UUID) -> int:
    return Peer.objects.filter(account_id=account_id, kind=Peer.Kind.HUMAN, is_admin=True,
                               deactivated_at__isnull=True).count()


def _outside(paths: Sequence[str], grants: Sequence[str]) -> list[str]:
    return [p for p in paths if not any(path_within(p, g) for g in grants)]


def _check_grant(granter_scopes: Sequence[str] | None, added: Sequence[str]) -> None:
    """An administrator grants only what they hold (issue #34)."""
    if granter_scopes is None:
        return
    outside = _outside(added, granter_scopes)
    if outside:
        raise ApplicationError(
            "scope_not_granted", f"you may grant only scopes inside your own grants "
            f"({', '.join(granter_scopes)}); {', '.join(outside)} lie outside them",
            status_code=403, details={"field": "scopes", "paths": outside})


def _check_reach(granter_scopes: Sequence[str] | None, peer: Peer) -> None:
    """A scope-limited administrator changes only people whose grants lie inside theirs:
    a reset or a promotion of someone wider would hand them the wider reach."""
    if granter_scopes is None:
        return
    outside = _outside(list(peer.scope_paths or []), granter_scopes)
    if outside:
        raise ApplicationError(
            "person_out_of_reach", f"{peer.key} holds scopes outside your grants "
            f"({', '.join(outside)}); only an administrator whose grants cover theirs may "
            "change them", status_code=403, details={"paths": outside})


def end_console_sessions(user_id: Any) -> int:
    """Delete the console sessions signed in as this user (database sessions, the only
    engine configured). A deactivated user's sessions must not come back with a
    reactivation, nor survive a reset or an invitation's acceptance."""
    from django.contrib.auth import SESSION_KEY
    from django.contrib.sessions.models import Session as ConsoleSession

    ended = [s.pk for s in ConsoleSession.objects.filter(expire_date__gt=timezone.now())
             .iterator(chunk_size=500) if s.get_decoded().get(SESSION_KEY) == str(user_id)]
    ConsoleSession.objects.filter(pk__in=ended).delete()
    return len(ended)


def _revoke_credentials(peer: Peer, actor: str, kinds: Sequence[str] | None = None) -> int:
    revoked = 0
    creds = Credential.objects.filter(account_id=peer.account_id, peer=peer,
                                      revoked_at__isnull=True)
    if kinds is not None:
        creds = creds.filter(kind__in=list(kinds))
    for cred in creds:
        services.credential_revoke(credential=cred, actor=actor)
        revoked += 1
    return revoked


# --- services --------------------------------------------------------------------------

@transaction.atomic
def person_create(*, account_id: uuid.UUID, key: str, actor: str, display_name: str = "",
                  role: str = "member", scope_paths: list[str] | None = None,
                  username: str | None = None, password: str | None = None,
                  granter_scopes: Sequence[str] | None = None) -> Peer:
    """A human with a role and scope grants (by default the granter's own, '/' from the
    command line). With a password they can sign in at once; without one their sign-in
    waits for an invitation (`invitation_create`).

    Agents usually register the people they talk about first (POST /api/v1/peers), so a
    human peer that exists without a login is given one here rather than refused; any
    other existing peer is `peer_exists` with what to do instead."""
    is_curator, is_admin = _role_flags(role)
    if scope_paths is None:
        scope_paths = list(granter_scopes) if granter_scopes is not None else ["/"]
    scopes = _clean_scopes(account_id, scope_paths)
    _check_grant(granter_scopes, scopes)
    existing = _loginless_human(account_id, key)
    username = (username or key).strip()
    if not username or len(username) > 150:
        raise ApplicationError("invalid_username", "username must be 1-150 characters",
                               details={"field": "username"})
    User = get_user_model()
    if User.objects.filter(username=username).exists():
        raise ApplicationError("username_taken", f"the username {username!r} is taken; "
                               "choose another with `username`", status_code=409)
    if password is not None:
        _check_password(password, User(username=username))
    if existing is not None:
        peer = existing
        peer.is_curator, peer.is_admin = is_curator, is_admin
        renamed = bool(display_name) and display_name != peer.display_name
        peer.display_name = display_name or peer.display_name
        peer.save(update_fields=["is_curator", "is_admin", "display_name"])
        if renamed:
            services.peer_registered(peer)  # held claims naming them by this name link now
    else:
        peer = services.peer_create(account_id=account_id, key=key, kind=Peer.Kind.HUMAN,
                                    display_name=display_name, is_curator=is_curator,
                                    is_admin=is_admin)
    user = User.objects.create_user(username=username, password=password)
    if password is None:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    peer.user = user
    peer.scope_paths = scopes
    peer.save(update_fields=["user", "scope_paths"])
    _audit(peer, "person.created", actor, role=role, scopes=scopes, username=username,
           password_set=password is not None,
           **({"existing_peer": True} if existing is not None else {}))
    return peer


def _loginless_human(account_id: uuid.UUID, key: str) -> Peer | None:
    """The existing peer `key` when it is an active human without a login (a person may
    be created on it), None when there is no such peer; otherwise `peer_exists` saying
    what to do instead."""
    peer = Peer.objects.select_for_update().filter(account_id=account_id, key=key).first()
    if peer is None:
        return None
    if peer.kind != Peer.Kind.HUMAN:
        raise ApplicationError("peer_exists", f"{key!r} is an agent peer, and agents cannot "
                               "sign in; choose another key for the person", status_code=409)
    if peer.deactivated_at is not None:
        raise ApplicationError("peer_exists", f"{key!r} is a deactivated person; reactivate "
                               f"them first (`manage.py people reactivate {key}`)",
                               status_code=409)
    if peer.user_id is not None:
        raise ApplicationError(
            "peer_exists", f"{key!r} is already a person with a login; send them a new "
            f"invitation link instead (`manage.py people invite {key}`, POST "
            f"/api/v1/people/{{id}}/invitation, or New invitation link on the People page)",
            status_code=409)
    return peer


@transaction.atomic
def person_update(*, peer: Peer, actor: str, role: str | None = None,
                  scope_paths: list[str] | None = None, active: bool | None = None,
                  display_name: str | None = None,
                  granter_scopes: Sequence[str] | None = None) -> Peer:
    """Change a person's role, scope grants, name or active state; one audit entry per
    kind of change. Deactivating revokes every credential they hold and ends their
    console sessions."""
    peer = Peer.objects.select_for_update().get(pk=peer.pk)
    if peer.kind != Peer.Kind.HUMAN:
        raise NotFound("person")
    _check_reach(granter_scopes, peer)
    was_admin = peer.is_admin and peer.deactivated_at is None
    if display_name is not None and display_name.strip() != peer.display_name:
        peer.display_name = display_name.strip() or peer.key
        peer.save(update_fields=["display_name"])
        _audit(peer, "person.renamed", actor, display_name=peer.display_name)
        services.peer_registered(peer)  # held claims naming them by the new name link now
    if role is not None and role != _role_of(peer):
        before = _role_of(peer)
        peer.is_curator, peer.is_admin = _role_flags(role)
        peer.save(update_fields=["is_curator", "is_admin"])
        _audit(peer, "person.role_changed", actor, before=before, after=role)
    if scope_paths is not None:
        scopes = _clean_scopes(peer.account_id, scope_paths)
        _check_grant(granter_scopes, [p for p in scopes if p not in (peer.scope_paths or [])])
        if scopes != list(peer.scope_paths or []):
            before_scopes = list(peer.scope_paths or [])
            peer.scope_paths = scopes
            peer.save(update_fields=["scope_paths"])
            _audit(peer, "person.scopes_changed", actor, before=before_scopes, after=scopes)
    if active is False and peer.deactivated_at is None:
        _deactivate(peer, actor)
    elif active is True and peer.deactivated_at is not None:
        peer.deactivated_at = None
        peer.save(update_fields=["deactivated_at"])
        if peer.user_id:
            get_user_model().objects.filter(pk=peer.user_id).update(is_active=True)
        _audit(peer, "person.reactivated", actor)
    if was_admin and not (peer.is_admin and peer.deactivated_at is None) \
            and _active_admins(peer.account_id) == 0:
        # Checked after the change, inside the row lock: an Account keeps an administrator.
        raise ApplicationError("last_admin", "this is the Account's last active "
                               "administrator; make someone else an administrator first",
                               status_code=409)
    return peer


def _deactivate(peer: Peer, actor: str) -> None:
    now = timezone.now()
    peer.deactivated_at = now
    peer.save(update_fields=["deactivated_at"])
    sessions = 0
    if peer.user_id:
        # An inactive user's console session no longer authenticates (Django's
        # ModelBackend refuses it on the next request); principal_for_user checks
        # deactivated_at as well. The sessions are deleted too: being inactive only
        # suspends them, and a reactivation would bring an old cookie back.
        get_user_model().objects.filter(pk=peer.user_id).update(is_active=False)
        sessions = end_console_sessions(peer.user_id)
    revoked = _revoke_credentials(peer, actor)
    _audit(peer, "person.deactivated", actor, credentials_revoked=revoked,
           sessions_ended=sessions)


@transaction.atomic
def person_deactivate(*, peer: Peer, actor: str) -> Peer:
    return person_update(peer=peer, actor=actor, active=False)


@transaction.atomic
def scopes_grant(*, peer: Peer, actor: str, paths: list[str],
                 granter_scopes: Sequence[str] | None = None) -> Peer:
    return person_update(peer=peer, actor=actor, granter_scopes=granter_scopes,
                         scope_paths=[*(peer.scope_paths or []), *paths])


@transaction.atomic
def scopes_revoke(*, peer: Peer, actor: str, paths: list[str]) -> Peer:
    """Remove these grants (exactly as granted; revoking a child of a granted root is
    refused, since the root still reaches it)."""
    drop = {services.normalise_scope_path(p) for p in paths}
    current = list(peer.scope_paths or [])
    not_granted = sorted(drop - set(current))
    if not_granted:
        raise ApplicationError("not_granted", f"{not_granted} are not granted to "
                               f"{peer.key}; granted: {current}", details={"field": "scopes"})
    return person_update(peer=peer, actor=actor,
                         scope_paths=[p for p in current if p not in drop])


@transaction.atomic
def password_set(*, peer: Peer, password: str, actor: str, via: str = "admin") -> Peer:
    """Set or reset a person's password (the command line, the person themself, or an
    invitation). Their console sessions end (Django ties them to the password hash); set
    by anyone but themself, their login tokens are revoked too."""
    if peer.kind != Peer.Kind.HUMAN:
        raise ApplicationError("agents_cannot_sign_in", "only humans have passwords")
    if peer.deactivated_at is not None:
        raise ApplicationError("person_deactivated", f"{peer.key} is deactivated; "
                               "reactivate them first", status_code=409)
    User = get_user_model()
    user = User.objects.filter(pk=peer.user_id).first() if peer.user_id else None
    if user is None:
        user = User(username=peer.key)
        if User.objects.filter(username=peer.key).exists():
            raise ApplicationError("username_taken", f"the username {peer.key!r} is taken",
                                   status_code=409)
    _check_password(password, user)
    user.set_password(password)
    user.is_active = True
    user.save()
    if peer.user_id != user.pk:
        peer.user = user
        peer.save(update_fields=["user"])
    revoked = 0
    if via != "self":
        # A password set by someone else (a reset, an invitation's holder) is what follows
        # a leaked one or a takeover: the login tokens and console sessions of the old
        # one die with it (the person's own change keeps them).
        revoked = _revoke_credentials(peer, actor, [Credential.Kind.TOKEN])
        end_console_sessions(user.pk)
    _audit(peer, "person.password_set", actor, via=via,
           **({"tokens_revoked": revoked} if via != "self" else {}))
    return peer


def username_of(peer: Peer) -> str | None:
    """The sign-in name of this person, if they have one."""
    if not peer.user_id:
        return None
    return get_user_model().objects.filter(pk=peer.user_id).values_list(
        "username", flat=True).first()


@transaction.atomic
def password_change(*, peer: Peer, current: str, new: str) -> Peer:
    """A person changes their own password, proving they know the current one."""
    user = get_user_model().objects.filter(pk=peer.user_id).first() if peer.user_id else None
    if user is None or not user.check_password(current):
        raise ApplicationError("wrong_password", "the current password is not right",
                               status_code=403, details={"field": "current_password"})
    if current == new:
        raise ApplicationError("same_password", "the new password is the current one",
                               details={"field": "new_password"})
    return password_set(peer=peer, password=new, actor=f"peer:{peer.key}", via="self")


@transaction.atomic
def invitation_create(*, peer: Peer, actor: str, reset: bool = False,
                      granter_scopes: Sequence[str] | None = None) -> tuple[Credential, str]:
    """A one-time invitation for `peer` to set their password; earlier open invitations
    of theirs are revoked. The token is returned once and stored as a digest.

    Someone who has a password is not invited (the link's holder would set it and
    become them) unless `reset`: their password is made unusable, every credential they
    hold revoked and their console sessions ended, audited as `actor`."""
    if peer.kind != Peer.Kind.HUMAN:
        raise ApplicationError("agents_cannot_sign_in", "only humans are invited")
    if peer.deactivated_at is not None:
        raise ApplicationError("person_deactivated", f"{peer.key} is deactivated; "
                               "reactivate them first", status_code=409)
    _check_reach(granter_scopes, peer)
    User = get_user_model()
    user = User.objects.select_for_update().filter(pk=peer.user_id).first() \
        if peer.user_id else None
    if user is not None and user.has_usable_password():
        if not reset:
            raise ApplicationError(
                "has_password", f"{peer.key} already has a password, and an invitation is "
                "for someone without one. They change it themselves; if it is lost, reset "
                "it (reset: true), which signs them out everywhere and revokes their "
                "tokens and keys", status_code=409)
        user.set_unusable_password()
        user.save(update_fields=["password"])
        sessions = end_console_sessions(user.pk)
        revoked = _revoke_credentials(peer, actor)
        _audit(peer, "person.password_reset", actor, credentials_revoked=revoked,
               sessions_ended=sessions)
    for old in Credential.objects.filter(account_id=peer.account_id, peer=peer,
                                         kind=Credential.Kind.INVITATION,
                                         revoked_at__isnull=True):
        services.credential_revoke(credential=old, actor=actor)
    expires = timezone.now() + invitation_ttl()
    cred, token = services.credential_create(
        account_id=peer.account_id, peer=peer, name="invitation", scope_paths=[],
        kind=Credential.Kind.INVITATION, expires_at=expires, actor=actor)
    _audit(peer, "person.invited", actor, prefix=cred.prefix, expires_at=expires.isoformat())
    return cred, token


def invitation_url(base_url: str, token: str) -> str:
    """The console link for an invitation. The token follows '#': browsers never send a
    fragment, so it is in no request line and no access log (the page posts it)."""
    return f"{base_url.rstrip('/')}/console/invitation/#{token}"


def _open_invitation(token: str) -> Credential:
    """The live invitation this token names, binding the transaction to its Account."""
    parsed = split_key(token)
    gone = ApplicationError("invalid_invitation", "this invitation link is not valid: it "
                            "was already used, has expired or was replaced. Ask an "
                            "administrator for a new one", status_code=404)
    if parsed is None:
        raise gone
    prefix, full = parsed
    with narrow_lookup(CREDENTIAL_PREFIX_SETTING, prefix):
        cred = Credential.objects.filter(prefix=prefix,
                                         kind=Credential.Kind.INVITATION).first()

    matches = hmac.compare_digest(cred.secret_hash if cred else hash_secret(""),
                                  hash_secret(full))
    if (cred is None or not matches or cred.revoked_at is not None
            or cred.expires_at is None or cred.expires_at <= timezone.now()):
        raise gone
    set_account(cred.account_id)
    return cred


@transaction.atomic
def invitation_peek(*, token: str) -> Peer:
    """Whom a live invitation is for (to greet them); it stays usable."""
    cred = _open_invitation(token)
    peer = Peer.objects.get(credentials=cred)
    if peer.deactivated_at is not None:
        raise ApplicationError("invalid_invitation", "this invitation is no longer valid",
                               status_code=404)
    return peer


@transaction.atomic
def invitation_accept(*, token: str, password: str) -> Peer:
    """Set the invitee's password and use the invitation up (single use)."""
    cred = _open_invitation(token)
    cred = Credential.objects.select_for_update().get(pk=cred.pk)
    if cred.revoked_at is not None:  # a concurrent acceptance won
        raise ApplicationError("invalid_invitation", "this invitation was already used",
                               status_code=404)
    peer = Peer.objects.get(credentials=cred)
    # Whoever holds the link acts here, and that is whom the administrator who made it
    # gave it to: the entries name the invitation and its maker, never the person alone.
    actor = f"invitation:{cred.prefix}"
    invited_by = (AuditEntry.objects.filter(
        account_id=peer.account_id, event_type="person.invited", target_id=str(peer.pk),
        payload__prefix=cred.prefix).values_list("actor", flat=True).first() or "unknown")
    password_set(peer=peer, password=password, actor=actor, via="invitation")
    cred.revoked_at = timezone.now()
    cred.save(update_fields=["revoked_at"])
    _audit(peer, "person.invitation_accepted", actor, prefix=cred.prefix,
           invited_by=invited_by)
    return peer


# --- selectors -------------------------------------------------------------------------

@dataclass(frozen=True)
class PersonRow:
    id: uuid.UUID
    key: str
    display_name: str
    username: str | None
    role: str
    scopes: list[str]
    active: bool
    has_password: bool
    invitation_expires_at: datetime | None
    created_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "key": self.key, "display_name": self.display_name,
                "username": self.username, "role": self.role, "scopes": self.scopes,
                "active": self.active, "has_password": self.has_password,
                "invitation_expires_at": self.invitation_expires_at,
                "created_at": self.created_at}


def _require_admin(principal: Principal) -> None:
    if not principal.is_admin:
        raise ApplicationError("admin_only", "only account administrators may manage "
                               "people", status_code=403)


def person_rows(peers: list[Peer]) -> list[PersonRow]:
    now = timezone.now()
    invites: dict[Any, datetime] = {}
    for peer_id, expires in (Credential.objects
                             .filter(peer__in=peers, kind=Credential.Kind.INVITATION,
                                     revoked_at__isnull=True, expires_at__gt=now)
                             .values_list("peer_id", "expires_at")):
        if expires is not None:
            invites[peer_id] = max(expires, invites.get(peer_id, expires))
    users = {u.pk: u for u in get_user_model().objects.filter(
        pk__in=[p.user_id for p in peers if p.user_id])}
    out = []
    for p in peers:
        user = users.get(p.user_id) if p.user_id else None
        out.append(PersonRow(
            id=p.pk, key=p.key, display_name=p.display_name,
            username=user.username if user else None, role=_role_of(p),
            scopes=list(p.scope_paths or []), active=p.deactivated_at is None,
            has_password=bool(user and user.has_usable_password()),
            invitation_expires_at=invites.get(p.pk), created_at=p.created_at))
    return out


def people_list(*, principal: Principal) -> list[PersonRow]:
    """Every human of the administrator's Account, active first, then by key."""
    _require_admin(principal)
    peers = list(Peer.objects.filter(account_id=principal.account_id, kind=Peer.Kind.HUMAN)
                 .order_by(F("deactivated_at").asc(nulls_first=True), "key"))
    return person_rows(peers)


def person_get(*, principal: Principal, person_id: uuid.UUID) -> Peer:
    _require_admin(principal)
    peer = Peer.objects.filter(account_id=principal.account_id, kind=Peer.Kind.HUMAN,
                               pk=person_id).first()
    if peer is None:
        raise NotFound("person")
    return peer


def person_row(*, principal: Principal, person_id: uuid.UUID) -> PersonRow:
    return person_rows([person_get(principal=principal, person_id=person_id)])[0]
