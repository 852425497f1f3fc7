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

from memhouse.principal import Principal
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
            or (cred.expires_at is not None and cred.expires_at <= now)):
        raise exceptions.AuthenticationFailed(_INVALID)
    set_account(cred.account_id)
    peer = Peer.objects.filter(pk=cred.peer_id).first() if cred.peer_id else None
    if cred.last_used_at is None or now - cred.last_used_at > timedelta(minutes=1):
        Credential.objects.filter(pk=cred.pk).update(last_used_at=now)
    return Principal(account_id=cred.account_id, peer=peer,
                     via="token" if cred.kind == Credential.Kind.TOKEN else "api_key",
                     scope_paths=tuple(cred.scope_paths or ["/"]), credential_id=cred.pk,
                     act_for_all=cred.act_for_all, act_for=tuple(cred.act_for or ()))


def principal_for_user(user: Any) -> Principal | None:
    """The Principal of a signed-in human, or None when the user has no Peer."""
    from knowledge.models import Peer

    with narrow_lookup(AUTH_USER_SETTING, str(user.pk)):
        peer = Peer.objects.filter(user_id=user.pk).first()
    if peer is None:
        return None
    set_account(peer.account_id)
    return Principal(account_id=peer.account_id, peer=peer, via="session")


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
