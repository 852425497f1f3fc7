"""Shared console plumbing: sign-in and role checks, pages, errors in words."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect

from console import selectors as views_sel
from console.htmx import is_partial, retarget, trigger
from knowledge.credentials import principal_for_user
from knowledge.lifecycle import TransitionError
from knowledge.models import Knowledge
from memhouse.core.errors import ApplicationError
from memhouse.core.principal import Principal

TITLES = {400: "That did not work", 403: "Not allowed", 404: "Not found",
          409: "That cannot be done now", 422: "That did not work"}


View = Callable[..., HttpResponse]


# --- plumbing ---------------------------------------------------------------------------

def _nav(principal: Principal | None) -> dict[str, Any]:
    if principal is None:
        return {"principal": None}
    return {
        "principal": principal,
        "queue_counts": (views_sel.queue_counts(principal=principal)
                         if principal.is_curator else None),
        "open_questions": views_sel.open_question_count(principal=principal),
        "may_audit": principal.is_curator or principal.is_admin,
    }
def _page(request: HttpRequest, principal: Principal | None, template: str,
          context: dict[str, Any] | None = None, *, status: int = 200) -> HttpResponse:
    return render(request, template, {**_nav(principal), **(context or {})}, status=status)
def _error(request: HttpRequest, principal: Principal | None, status: int, message: str,
           *, title: str | None = None) -> HttpResponse:
    """An error in words: the page, or (HTMX) a message swapped into the flash area."""
    if is_partial(request):
        resp = render(request, "console/partials/flash.html",
                      {"flash": [{"level": "error", "text": message}]}, status=status)
        return retarget(resp, "#flash")
    return _page(request, principal, "console/error.html",
                 {"status": status, "title": title or TITLES.get(status, "Something went wrong"),
                  "message": message}, status=status)
def _message_of(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, ApplicationError):
        return exc.status_code, exc.message
    return 409, f"That change is not allowed by the lifecycle contract: {exc}."
def console_view(*, curator: bool = False, auditor: bool = False,
                 denied: str = "") -> Callable[[View], View]:
    """Sign-in, Principal, role check and errors in words for one console view.

    The view is called as `view(request, principal, ...)`. ApplicationError and
    TransitionError escaping it become a page (or flash fragment) with their message, and
    the request's transaction is rolled back so a failure never commits half its work.
    """

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                if is_partial(request):
                    login = f"/console/login/?{urlencode({'next': request.get_full_path()})}"
                    return HttpResponseClientRedirect(login)
                return redirect_to_login(request.get_full_path())
            principal = principal_for_user(request.user)
            if principal is None or not principal.is_human:
                return _error(request, None, 403,
                              "This sign-in is not linked to a person in any MemHouse "
                              "Account, so there is nothing to show. Ask an administrator "
                              "to link it to your peer.")
            name = principal.peer.display_name
            if curator and not principal.is_curator:
                return _error(request, principal, 403,
                              denied or f"Only curators may do this, and {name} is not a "
                                        f"curator in this Account.")
            if auditor and not (principal.is_curator or principal.is_admin):
                return _error(request, principal, 403,
                              denied or f"Only curators and administrators may see this, "
                                        f"and {name} is neither.")
            try:
                return view(request, principal, *args, **kwargs)
            except (ApplicationError, TransitionError) as exc:
                status, text = _message_of(exc)
                response = _error(request, principal, status, text)
                transaction.set_rollback(True)
                return response

        return wrapper

    return decorate
def _safe_next(request: HttpRequest, fallback: str) -> str:
    nxt = request.POST.get("next") or ""
    if nxt and url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()},
                                               require_https=request.is_secure()):
        return nxt
    return fallback
def _redirect_with(request: HttpRequest, level: int, text: str, fallback: str
                   ) -> HttpResponseRedirect:
    messages.add_message(request, level, text)
    return HttpResponseRedirect(_safe_next(request, fallback), status=303)
def _actions_response(request: HttpRequest, principal: Principal, template: str,
                      context: dict[str, Any], *, flash: list[dict[str, str]],
                      event: str, detail: dict[str, Any], status: int = 200) -> HttpResponse:
    """An HTMX answer to a mutating POST: the fragment, counters and flash out-of-band,
    and an HX-Trigger event naming what changed.

    One message per action: when the fragment says the outcome itself (a decided row, an
    error in the row) `flash` is empty, and the out-of-band flash only clears what an
    earlier action left there."""
    resp = render(request, template, {**_nav(principal), **context, "flash": flash,
                                      "oob": True}, status=status)
    return trigger(resp, {event: detail})
def _subject_label(item: Knowledge) -> str:
    if item.subject_peer is None:
        if item.named_entity:  # held for naming someone nobody registered
            return f"{item.named_entity} (not a registered person)"
        return f"the scope {item.scope.path}"
    return item.subject_peer.display_name
