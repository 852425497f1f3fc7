"""DRF authentication: hashed API keys / short-lived tokens, and console sessions.

Each class finds the credential, binds the request's transaction to its Account (the
only source of tenancy: legacy `x-memhouse-account-key` / `account_key` inputs are
ignored) and returns a Principal as `request.user`.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from memhouse.principal import Principal, narrow_scopes
from memhouse.tenancy import (
    AUTH_USER_SETTING,
    CREDENTIAL_PREFIX_SETTING,
    narrow_lookup,
    set_account,
)

KEY_MARK = "mh"
_INVALID = "invalid, expired or revoked credential"


def hash_secret(secret: str) -> str:
    # Keys carry 256 bits of randomness, so a fast digest is enough (no password KDF).
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def split_key(raw: str) -> tuple[str, str] | None:
    """'mh_<prefix>_<secret>' -> (prefix, full key)."""
    parts = raw.strip().split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_MARK or not parts[1] or not parts[2]:
        return None
    return parts[1], raw.strip()


def principal_for_key(raw: str) -> Principal:
    """Authenticate an API key or token inside the current transaction."""
    from knowledge.models import Credential, Peer

    parsed = split_key(raw)
    if parsed is None:
        raise exceptions.AuthenticationFailed(_INVALID)
    prefix, full = parsed
    with narrow_lookup(CREDENTIAL_PREFIX_SETTING, prefix):
        cred = Credential.objects.filter(prefix=prefix).first()
    # Compare even when nothing matched, so timing does not tell a prefix exists.
    expected = cred.secret_hash if cred else hash_secret("")
    matches = hmac.compare_digest(expected, hash_secret(full))
    now = timezone.now()
    if (cred is None or not matches or cred.revoked_at is not None
            or (cred.expires_at is not None and cred.expires_at <= now)
            # An invitation only sets a password (console), never authenticates a call.
            or cred.kind not in (Credential.Kind.API_KEY, Credential.Kind.TOKEN)):
        raise exceptions.AuthenticationFailed(_INVALID)
    set_account(cred.account_id)
    peer = Peer.objects.filter(pk=cred.peer_id).first() if cred.peer_id else None
    if peer is not None and peer.deactivated_at is not None:
        # Deactivation revokes the peer's credentials too; this holds even if one was
        # minted afterwards.
        raise exceptions.AuthenticationFailed(_INVALID)
    scopes = tuple(cred.scope_paths or ["/"])
    if peer is not None and peer.kind == Peer.Kind.HUMAN:
        # A person's own grants bound every credential they hold, so revoking a grant
        # takes effect on live tokens and keys at once.
        scopes = narrow_scopes(scopes, tuple(peer.scope_paths or ()))
    if cred.last_used_at is None or now - cred.last_used_at > timedelta(minutes=1):
        Credential.objects.filter(pk=cred.pk).update(last_used_at=now)
    return Principal(account_id=cred.account_id, peer=peer,
                     via="token" if cred.kind == Credential.Kind.TOKEN else "api_key",
                     scope_paths=scopes, credential_id=cred.pk,
                     act_for_all=cred.act_for_all, act_for=tuple(cred.act_for or ()))


def principal_for_user(user: Any) -> Principal | None:
    """The Principal of a signed-in human, or None when the user has no Peer."""
    from knowledge.models import Peer

    with narrow_lookup(AUTH_USER_SETTING, str(user.pk)):
        peer = Peer.objects.filter(user_id=user.pk).first()
    if peer is None or peer.deactivated_at is not None or not user.is_active:
        return None
    set_account(peer.account_id)
    return Principal(account_id=peer.account_id, peer=peer, via="session",
                     scope_paths=tuple(peer.scope_paths or ()))


class _NeedsTransaction:
    @staticmethod
    def _check_atomic() -> None:
        if not transaction.get_connection().in_atomic_block:
            # ATOMIC_REQUESTS guarantees this for real requests.
            raise exceptions.AuthenticationFailed("request is not running in a transaction")


class ApiKeyAuthentication(_NeedsTransaction, authentication.BaseAuthentication):
    """`Authorization: Bearer mh_...` or `X-API-Key: mh_...`."""

    def authenticate(self, request: Any) -> tuple[Principal, None] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        raw = ""
        if header.lower().startswith("bearer "):
            raw = header[7:]
        elif request.META.get("HTTP_X_API_KEY"):
            raw = request.META["HTTP_X_API_KEY"]
        if not raw:
            return None
        self._check_atomic()
        return principal_for_key(raw), None

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="memhouse"'


class ConsoleSessionAuthentication(_NeedsTransaction, authentication.SessionAuthentication):
    """A human signed in to the console; CSRF enforced as for any session."""

    def authenticate(self, request: Any) -> tuple[Principal, None] | None:
        user = getattr(request._request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        self._check_atomic()
        principal = principal_for_user(user)
        if principal is None:
            return None
        self.enforce_csrf(request)
        return principal, None


class IsAccountMember(permissions.BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.user, Principal)


class IsHuman(permissions.BasePermission):
    """Routes about the signed-in person (their knowledge, questions, tokens, password):
    an agent's or a peerless key gets 403 `human_only`, not a 404 that hides the route."""

    def has_permission(self, request: Any, view: Any) -> bool:
        if not isinstance(request.user, Principal):
            return False  # 401 from DRF
        from memhouse.errors import ApplicationError  # errors imports DRF settings: lazily

        if not request.user.is_human:
            raise ApplicationError("human_only", "this route is for people signed in with a "
                                   "password or their login token; agent and machine keys "
                                   "cannot use it", status_code=403)
        return True


class IsHumanAdmin(IsHuman):
    """Account administration (people, roles, grants): 403 `human_only` for keys without a
    person, 403 `admin_only` for people who are not administrators."""

    def has_permission(self, request: Any, view: Any) -> bool:
        if not super().has_permission(request, view):
            return False
        from memhouse.errors import ApplicationError

        if not request.user.is_admin:
            raise ApplicationError("admin_only", "only account administrators may manage "
                                   "people, roles and scope grants", status_code=403)
        return True


class IsHumanCurator(permissions.BasePermission):
    message = "only human curators may make curator decisions"

    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.user, Principal) and request.user.is_curator


def principal_of(request: Any) -> Principal:
    """The request's Principal (views behind IsAccountMember always have one)."""
    user = request.user
    if not isinstance(user, Principal):
        raise exceptions.NotAuthenticated()
    return user


def lockout_response(request: Any, original_response: Any = None,
                     credentials: Any = None) -> Any:
    """django-axes' answer to a locked-out sign-in: the API's own 429 (its view already
    built it) or, in the console, the lockout page with Retry-After."""
    from django.conf import settings
    from django.shortcuts import render

    wait = str(settings.AXES_COOLOFF_MINUTES * 60)
    if request.path.startswith("/api/") and original_response is not None:
        return original_response
    response = render(request, settings.AXES_LOCKOUT_TEMPLATE,
                      {"cooloff_time": f"{settings.AXES_COOLOFF_MINUTES} minutes"}, status=429)
    response["Retry-After"] = wait
    return response
