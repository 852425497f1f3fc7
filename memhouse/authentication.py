"""DRF authentication (wiring): hashed API keys / short-lived tokens, and console sessions.

Each class finds the credential through knowledge.credentials, which binds the request's
transaction to its Account (the only source of tenancy: legacy `x-memhouse-account-key` /
`account_key` inputs are ignored), and returns a Principal as `request.user`. The
permissions and `principal_of` that views use live in the ground (memhouse.core.permissions,
memhouse.core.principal), so no app imports this module.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from rest_framework import authentication, exceptions

from knowledge.credentials import principal_for_key, principal_for_user
from memhouse.core.principal import Principal


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
