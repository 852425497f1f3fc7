"""Exceptions raised by MemHouseClient, one class per kind of failure.

Every API error has the server's shape `{"error": {"code", "message", "details"}}`; the
exception carries those three values plus the HTTP status. Failures that never reached
the server (refused connection, timeout) are TransportError with `status=None`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AuthenticationError",
    "ConflictError",
    "MemHouseError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitedError",
    "ServerError",
    "TransportError",
    "ValidationError",
    "error_for_status",
]


class MemHouseError(Exception):
    """An error answer from MemHouse (or no answer at all, for TransportError)."""

    def __init__(self, code: str, message: str, status: int | None = None,
                 details: Any = None) -> None:
        super().__init__(f"{code}: {message}" if status is None
                         else f"{status} {code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.details = details

    def as_dict(self) -> dict[str, Any]:
        """The API's error shape, plus the HTTP status (None when nothing answered)."""
        return {"error": {"code": self.code, "message": self.message,
                          "details": self.details, "status": self.status}}


class ValidationError(MemHouseError):
    """400 / 413 / 415 / 422: the request was refused as it stands; `details` names fields."""


class AuthenticationError(MemHouseError):
    """401: the API key is missing, invalid, expired or revoked."""


class PermissionDeniedError(MemHouseError):
    """403: authenticated, but this credential may not do that."""


class NotFoundError(MemHouseError):
    """404: absent, or not yours (MemHouse answers both the same way)."""


class ConflictError(MemHouseError):
    """409: e.g. `client_id_conflict`, or a lifecycle transition that is not allowed."""


class RateLimitedError(MemHouseError):
    """429: slow down; `retry_after` is the server's Retry-After in seconds, if it sent one."""

    def __init__(self, code: str, message: str, status: int | None = 429,
                 details: Any = None, retry_after: float | None = None) -> None:
        super().__init__(code, message, status, details)
        self.retry_after = retry_after


class ServerError(MemHouseError):
    """5xx: the server (or a proxy in front of it) failed."""


class TransportError(MemHouseError):
    """No HTTP answer: connection refused or reset, DNS failure, timeout."""

    def __init__(self, message: str, code: str = "transport_error") -> None:
        super().__init__(code, message, None, None)


_BY_STATUS: dict[int, type[MemHouseError]] = {
    400: ValidationError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: ValidationError,
    415: ValidationError,
    422: ValidationError,
}


def error_for_status(status: int, code: str, message: str, details: Any = None,
                     retry_after: float | None = None) -> MemHouseError:
    """The exception for an HTTP error status."""
    if status == 429:
        return RateLimitedError(code, message, status, details, retry_after=retry_after)
    if status >= 500:
        return ServerError(code, message, status, details)
    return _BY_STATUS.get(status, MemHouseError)(code, message, status, details)
