"""One error shape for the whole API: {"error": {"code", "message", "details"}}.

Domain code raises ApplicationError (or a TransitionError from the lifecycle); the DRF
exception handler below turns every failure into a 4xx with a machine-readable code.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


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


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    from knowledge.lifecycle import TransitionError

    if isinstance(exc, ApplicationError):
        return error_response(exc.code, exc.message, exc.status_code, exc.details)
    if isinstance(exc, TransitionError):
        return error_response(exc.code, str(exc), status.HTTP_409_CONFLICT)
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
