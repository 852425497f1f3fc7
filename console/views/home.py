"""Console screens for everyone: sign-in, home, the lifecycle page, not found."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import Resolver404, resolve
from django.views.decorators.http import require_GET

from console import selectors as views_sel
from console.markdown import lifecycle_markdown
from console.markdown import render as render_markdown
from console.views.common import _page, console_view
from memhouse.core.errors import NotFound
from memhouse.core.principal import Principal

# --- sign-in ----------------------------------------------------------------------------

class LoginView(auth_views.LoginView):
    template_name = "console/login.html"
    redirect_authenticated_user = True
class LogoutView(auth_views.LogoutView):
    """Signing out also revokes the human's login tokens (they were minted for the
    person, not for this browser; a stolen one dies with the session)."""

    next_page = "/console/login/"

    def post(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        from django.db import transaction

        from knowledge.credentials import principal_for_user
        from knowledge.services import tokens_revoke

        if request.user.is_authenticated:
            with transaction.atomic():
                principal = principal_for_user(request.user)
                if principal is not None:
                    tokens_revoke(peer=principal.peer)
        return super().post(request, *args, **kwargs)


# --- home and lifecycle -----------------------------------------------------------------

@require_GET
@console_view()
def home(request: HttpRequest, principal: Principal) -> HttpResponse:
    activity = (views_sel.account_activity(principal=principal)
                if principal.is_curator else None)
    return _page(request, principal, "console/home.html", {"activity": activity})
@require_GET
@console_view()
def lifecycle_doc(request: HttpRequest, principal: Principal) -> HttpResponse:
    return _page(request, principal, "console/lifecycle.html",
                 {"document": render_markdown(lifecycle_markdown())})


# --- not found --------------------------------------------------------------------------

@console_view()
def not_found(request: HttpRequest, principal: Principal, rest: str = "") -> HttpResponse:
    """Unknown console URLs, as a page in words (and the usual missing-slash redirect)."""
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.url_name != "not-found":
            target = request.path + "/"
            if request.META.get("QUERY_STRING"):
                target += "?" + request.META["QUERY_STRING"]
            return HttpResponseRedirect(target)
    raise NotFound("page")
