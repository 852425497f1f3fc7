"""One error shape for the whole API: {"error": {"code", "message", "details"}}.

Domain code raises ApplicationError, or an error type an app registers with
:func:`register_error` (knowledge registers the lifecycle's TransitionError as 409: the
ground never imports the floors above it); the DRF exception handler below turns every
failure into a 4xx with a machine-readable code.
Infrastructure failures get the same shape: a database that is unreachable or drops
the connection mid-request is 503 `database_unavailable` with Retry-After (the request's
transaction is rolled back, so a retry is safe); a transaction PostgreSQL aborted to break
a deadlock is run again by ConflictRetryMiddleware and, if it keeps conflicting, is 409
`write_conflict`; a body above DATA_UPLOAD_MAX_MEMORY_SIZE
is 413 `request_too_large`. `ApiErrorMiddleware` and the `handler*` views below give
requests that never reach a DRF view (the request transaction failing to start or to
commit, unknown /api/ paths) that shape as well.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db import DataError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response

log = logging.getLogger(__name__)

# Seconds a client should wait before retrying after a database failure.
DATABASE_RETRY_AFTER_SECONDS = 5


class ApplicationError(Exception):
    def __init__(self, code: str, message: str, *, status_code: int = 400,
                 details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status_code = status_code
        self.details = details


class NotFound(ApplicationError):
    """The same answer for "absent" and "not yours", so ids leak nothing."""

    def __init__(self, what: str = "resource") -> None:
        super().__init__("not_found", f"{what} not found", status_code=404)


# Error types of the floors above: type -> (code, message, status) of an instance.
_REGISTERED: dict[type[Exception], Callable[[Any], tuple[str, str, int]]] = {}


def register_error(exc_type: type[Exception],
                   describe: Callable[[Any], tuple[str, str, int]]) -> None:
    """Answer `exc_type` (and its subclasses) in the one error shape (apps' ready())."""
    _REGISTERED[exc_type] = describe


_DRF_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "rate_limited",
    exceptions.ParseError: "malformed_request",
    exceptions.ValidationError: "invalid_input",
}


def error_response(code: str, message: str, status_code: int, details: Any = None,
                   headers: dict[str, str] | None = None) -> Response:
    body: dict[str, Any] = {"error": {"code": code, "message": message}}
    if details is not None:
        body["error"]["details"] = details
    return Response(body, status=status_code, headers=headers)


# PostgreSQL aborts one transaction to break a deadlock (40P01) or a serialization
# conflict (40001): the database is fine and the request, rolled back whole, may run again.
RETRYABLE_SQLSTATES = frozenset({"40P01", "40001"})
_CONFLICT_FLAG = "_memhouse_write_conflict"


def is_write_conflict(exc: BaseException) -> bool:
    return isinstance(exc, OperationalError) and getattr(
        exc.__cause__, "sqlstate", None) in RETRYABLE_SQLSTATES


def _flag_conflict(request: Any, exc: BaseException) -> None:
    """Tell ConflictRetryMiddleware that this request's transaction was aborted."""
    if request is not None and is_write_conflict(exc):
        setattr(request, _CONFLICT_FLAG, True)


def infrastructure_error(exc: BaseException) -> tuple[str, str, int, dict[str, str]] | None:
    """(code, message, status, headers) for failures that are not the caller's fault in
    the request's content, or None. Shared by the DRF handler and the middleware."""
    if is_write_conflict(exc):
        # Reached only when ConflictRetryMiddleware's retries are spent (or off).
        log.warning("write conflict: %s", getattr(exc.__cause__, "sqlstate", ""))
        return ("write_conflict", "A concurrent write conflicted with this request (the "
                "database broke a deadlock); nothing was written. Retry the request.",
                status.HTTP_409_CONFLICT, {"Retry-After": "1"})
    if isinstance(exc, (OperationalError, InterfaceError)):
        log.warning("database unavailable: %s", type(exc.__cause__ or exc).__name__)
        return ("database_unavailable",
                "The database is unavailable or dropped the connection; nothing was "
                "written. Retry the request shortly.",
                status.HTTP_503_SERVICE_UNAVAILABLE,
                {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)})
    if isinstance(exc, DataError):
        # Validation normally refuses such values first; this is the safety net.
        log.warning("database refused a value: %s", type(exc.__cause__ or exc).__name__)
        return ("unstorable_value", "A value in the request cannot be stored (out of range "
                "or not valid text).", status.HTTP_400_BAD_REQUEST, {})
    if isinstance(exc, RequestDataTooBig):
        from django.conf import settings

        return ("request_too_large", "The request body is larger than "
                f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
                status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, {})
    if isinstance(exc, SuspiciousOperation):
        return ("bad_request", "The request was refused as malformed.",
                status.HTTP_400_BAD_REQUEST, {})
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    # rest_framework.views, imported here rather than above: it loads the default
    # permission and throttle classes, which import this module.
    from rest_framework.views import set_rollback

    _flag_conflict(getattr(context.get("request"), "_request", None), exc)
    response = _handle(exc, context)
    if response is not None:
        # ATOMIC_REQUESTS: an error answer never commits what the view wrote before it.
        set_rollback()
    return response


def _handle(exc: Exception, context: dict[str, Any]) -> Response | None:
    from rest_framework.views import exception_handler as drf_exception_handler

    if isinstance(exc, ApplicationError):
        return error_response(exc.code, exc.message, exc.status_code, exc.details)
    for exc_type, describe in _REGISTERED.items():
        if isinstance(exc, exc_type):
            return error_response(*describe(exc))
    infra = infrastructure_error(exc)
    if infra is not None:
        code, message, status_code, headers = infra
        return error_response(code, message, status_code, headers=headers)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), "error")
    if isinstance(exc, exceptions.ValidationError):
        message = "The request is invalid; see details for each field."
        details: Any = exc.detail
    else:
        message = str(exc.detail)
        details = None
    headers = {k: v for k, v in response.items() if k in ("Retry-After", "WWW-Authenticate")}
    return error_response(code, message, response.status_code, details, headers)


# --- outside DRF views --------------------------------------------------------------------

def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def json_error(code: str, message: str, status_code: int,
               headers: dict[str, str] | None = None) -> JsonResponse:
    response = JsonResponse({"error": {"code": code, "message": message}}, status=status_code)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


class ApiErrorMiddleware:
    """Infrastructure failures outside a DRF view's own handling (the ATOMIC_REQUESTS
    transaction failing to begin or commit, plain Django views) in the one error shape:
    JSON under /api/, plain text elsewhere. Never a 500 for an unreachable database."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        _flag_conflict(request, exc)  # e.g. a deferred foreign-key check at commit
        infra = infrastructure_error(exc)
        if infra is None:
            return None
        code, message, status_code, headers = infra
        if isinstance(exc, (OperationalError, InterfaceError)):
            from django.db import connections

            for conn in connections.all(initialized_only=True):
                conn.close_if_unusable_or_obsolete()
        if _is_api(request):
            return json_error(code, message, status_code, headers)
        response = HttpResponse(message, status=status_code, content_type="text/plain")
        for name, value in headers.items():
            response[name] = value
        return response


class ConflictRetryMiddleware:
    """Run an API request again when PostgreSQL aborted its transaction to break a
    deadlock or a serialization conflict (up to MEMHOUSE_WRITE_CONFLICT_RETRIES times,
    then 409 `write_conflict`). ATOMIC_REQUESTS makes each request one transaction that
    was rolled back whole, so running it again is safe; a deadlock is not an outage.
    Sits outside ApiErrorMiddleware and the request transaction."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        import random
        import time

        from django.conf import settings

        retries = int(getattr(settings, "MEMHOUSE_WRITE_CONFLICT_RETRIES", 0))
        if not (retries > 0 and _is_api(request) and _buffer_body(request)):
            return self.get_response(request)
        for attempt in range(retries + 1):
            setattr(request, _CONFLICT_FLAG, False)
            response = self.get_response(request)
            if not getattr(request, _CONFLICT_FLAG, False) or attempt == retries:
                return response
            log.info("write conflict: running the request again",
                     extra={"attempt": attempt + 1, "path": request.path})
            response.close()
            _rewind(request)
            time.sleep(random.uniform(0.01, 0.1) * (attempt + 1))  # let the other commit
        return response  # not reached


def _buffer_body(request: HttpRequest) -> bool:
    """Read the body once into memory so the request can be replayed (False when it
    cannot be: too large or unreadable; the view then reports that as before)."""
    try:
        request.body  # noqa: B018 (cached on the request)
    except Exception:
        return False
    return True


def _rewind(request: HttpRequest) -> None:
    import io

    request._stream = io.BytesIO(request.body)  # type: ignore[attr-defined]
    for cached in ("_post", "_files", "_cached_user"):
        if hasattr(request, cached):
            delattr(request, cached)


def _fallback(default: Callable[..., HttpResponse], code: str, message: str,
              status_code: int) -> Callable[..., HttpResponse]:
    def view(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
        if _is_api(request):
            return json_error(code, message, status_code)
        if exception is None:
            return default(request)
        return default(request, exception)

    view.__name__ = f"{code}_view"
    return view


def _django_defaults() -> dict[str, Callable[..., HttpResponse]]:
    from django.views import defaults

    return {"400": defaults.bad_request, "403": defaults.permission_denied,
            "404": defaults.page_not_found, "500": defaults.server_error}


_defaults = _django_defaults()
# memhouse.urls points handler400/403/404/500 here: JSON under /api/, Django's pages elsewhere.
bad_request = _fallback(_defaults["400"], "bad_request", "The request was refused as malformed.",
                        400)
permission_denied = _fallback(_defaults["403"], "permission_denied",
                              "You may not do this.", 403)
page_not_found = _fallback(_defaults["404"], "not_found", "No such API endpoint.", 404)
server_error = _fallback(_defaults["500"], "internal_error",
                         "An unexpected error occurred; it has been logged.", 500)
