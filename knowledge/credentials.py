"""Credentials: how an API key, a short-lived token or a console user becomes a Principal.

Each lookup binds the current transaction to the credential's Account (the only source of
tenancy) through the narrow pre-authentication lookups the row-level security policies
allow. The DRF authentication classes (memhouse.authentication, the wiring) call these;
the token endpoint and the console sign-in call `principal_for_user` directly.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import exceptions

from knowledge.models import Credential, Peer
from memhouse.core.principal import Principal, narrow_scopes
from memhouse.core.tenancy import (
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
