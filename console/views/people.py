"""People (administrators) and invitations."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from console.forms import (
    ROLE_CHOICES,
    ActiveForm,
    InvitationAcceptForm,
    InviteForm,
    PersonForm,
    errors_in_words,
)
from console.htmx import is_partial, trigger
from console.views.common import _error, _nav, _page, _redirect_with, console_view
from knowledge import people
from memhouse.core.errors import ApplicationError
from memhouse.core.principal import Principal

# --- people (administrators) ------------------------------------------------------------

PEOPLE_DENIED = ("The People page is for administrators: here they invite people and change "
                 "their roles, scopes and access. Ask an administrator of this Account.")
INVITATION_SESSION_KEY = "memhouse_invitation"
def _admin_denied(request: HttpRequest, principal: Principal) -> HttpResponse | None:
    return None if principal.is_admin else _error(request, principal, 403, PEOPLE_DENIED)
def _invitation_link(request: HttpRequest, cred: Any, token: str) -> dict[str, Any]:
    return {"url": people.invitation_url(request.build_absolute_uri("/"), token),
            "expires_at": cred.expires_at}
def _people_region(request: HttpRequest, principal: Principal, *, status: int = 200,
                   **extra: Any) -> HttpResponse:
    """The invite form and the list of people: a page, or (HTMX) the region."""
    context = {"people": people.people_list(principal=principal),
               "role_choices": ROLE_CHOICES, "self_id": principal.peer.pk, **extra}
    if is_partial(request):
        # The region says its outcome itself (the error above the form, the confirmation
        # with the link); the flash is sent empty so an earlier message is cleared.
        return render(request, "console/partials/people_region_response.html",
                      {**_nav(principal), **context, "flash": []}, status=status)
    return _page(request, principal, "console/people.html", context, status=status)
def _person_row(request: HttpRequest, principal: Principal, person_id: uuid.UUID, *,
                done: str = "", error: str = "", status: int = 200,
                invitation: dict[str, Any] | None = None) -> HttpResponse:
    """One person's row after a change (HTMX), or back to the page with a message."""
    if not is_partial(request):
        if invitation:  # shown once, so it is rendered here, never put in a message
            return _people_region(request, principal, status=status, done=done,
                                  invitation=invitation)
        return _redirect_with(request, messages.ERROR if error else messages.SUCCESS,
                              error or done, reverse("console:people"))
    row = people.person_row(principal=principal, person_id=person_id)
    # The row says its outcome itself; the empty flash clears an earlier message.
    resp = render(request, "console/partials/person_row_response.html",
                  {**_nav(principal), "row": row, "done": done, "error": error,
                   "invitation": invitation, "flash": [], "self_id": principal.peer.pk,
                   "role_choices": ROLE_CHOICES},
                  status=status)
    return trigger(resp, {"person-changed": {"id": str(person_id)}})
@require_GET
@console_view()
def people_page(request: HttpRequest, principal: Principal) -> HttpResponse:
    return _admin_denied(request, principal) or _people_region(request, principal)
@require_POST
@console_view()
def people_invite(request: HttpRequest, principal: Principal) -> HttpResponse:
    if denied := _admin_denied(request, principal):
        return denied
    form = InviteForm(request.POST)
    values = {k: request.POST.get(k, "") for k in ("key", "display_name", "username",
                                                   "role", "scopes")}
    if not form.is_valid():
        return _people_region(request, principal, status=400, error=errors_in_words(form),
                              values=values)
    actor = f"peer:{principal.peer.key}"
    try:
        with transaction.atomic():
            peer = people.person_create(
                account_id=principal.account_id, key=form.cleaned_data["key"], actor=actor,
                display_name=form.cleaned_data["display_name"],
                role=form.cleaned_data["role"], scope_paths=form.scope_list,
                username=form.cleaned_data["username"] or None,
                granter_scopes=principal.scope_paths)
            cred, token = people.invitation_create(peer=peer, actor=actor)
    except ApplicationError as exc:
        return _people_region(request, principal, status=exc.status_code, error=exc.message,
                              values=values)
    return _people_region(request, principal, status=201,
                          done=f"{peer.display_name} is invited. Send them the link below; "
                               "it works once and is shown only now.",
                          invitation=_invitation_link(request, cred, token))
@require_POST
@console_view()
def person_update(request: HttpRequest, principal: Principal,
                  person_id: uuid.UUID) -> HttpResponse:
    if denied := _admin_denied(request, principal):
        return denied
    peer = people.person_get(principal=principal, person_id=person_id)
    form = PersonForm(request.POST)
    if not form.is_valid():
        return _person_row(request, principal, person_id, error=errors_in_words(form),
                           status=400)
    try:
        people.person_update(peer=peer, actor=f"peer:{principal.peer.key}",
                             role=form.cleaned_data["role"], scope_paths=form.scope_list,
                             display_name=form.cleaned_data["display_name"] or None,
                             granter_scopes=principal.scope_paths)
    except ApplicationError as exc:
        return _person_row(request, principal, person_id, error=exc.message,
                           status=exc.status_code)
    return _person_row(request, principal, person_id, done=f"Saved {peer.key}.")
@require_POST
@console_view()
def person_active(request: HttpRequest, principal: Principal,
                  person_id: uuid.UUID) -> HttpResponse:
    if denied := _admin_denied(request, principal):
        return denied
    peer = people.person_get(principal=principal, person_id=person_id)
    form = ActiveForm(request.POST)
    if not form.is_valid():
        return _person_row(request, principal, person_id, error=errors_in_words(form),
                           status=400)
    active = form.cleaned_data["active"] == "yes"
    try:
        people.person_update(peer=peer, actor=f"peer:{principal.peer.key}", active=active,
                             granter_scopes=principal.scope_paths)
    except ApplicationError as exc:
        return _person_row(request, principal, person_id, error=exc.message,
                           status=exc.status_code)
    done = (f"{peer.display_name} is active again." if active else
            f"{peer.display_name} is deactivated: their sessions, tokens and keys no longer "
            "work.")
    return _person_row(request, principal, person_id, done=done)
@require_POST
@console_view()
def person_invite(request: HttpRequest, principal: Principal,
                  person_id: uuid.UUID) -> HttpResponse:
    if denied := _admin_denied(request, principal):
        return denied
    peer = people.person_get(principal=principal, person_id=person_id)
    reset = request.POST.get("reset") == "yes"
    try:
        cred, token = people.invitation_create(peer=peer, actor=f"peer:{principal.peer.key}",
                                               reset=reset,
                                               granter_scopes=principal.scope_paths)
    except ApplicationError as exc:
        return _person_row(request, principal, person_id, error=exc.message,
                           status=exc.status_code)
    done = (f"{peer.display_name}'s password is reset: they are signed out everywhere and "
            "their tokens and keys no longer work. Send them the link below." if reset else
            f"A new invitation link for {peer.display_name}; earlier links no longer work.")
    return _person_row(request, principal, person_id, done=done,
                       invitation=_invitation_link(request, cred, token))


# --- one's own password, and invitations ------------------------------------------------

@never_cache
@require_GET
def invitation_open(request: HttpRequest, token: str) -> HttpResponse:
    """A link in the old form, token in the path: keep the token in the session and move
    on. New links put it after '#' instead (see invitation_code)."""
    request.session[INVITATION_SESSION_KEY] = token
    return HttpResponseRedirect(reverse("console:invitation"), status=303)
@never_cache
@require_POST
def invitation_code(request: HttpRequest) -> HttpResponse:
    """The invitation page posts the token from the link's fragment (or as pasted) here:
    it is kept in the session, never in a URL, so no access log or history holds it."""
    token = request.POST.get("token", "").strip()
    if token.startswith(("http://", "https://")) and "#" in token:
        token = token.rpartition("#")[2]  # the whole link pasted
    request.session[INVITATION_SESSION_KEY] = token
    return HttpResponseRedirect(reverse("console:invitation"), status=303)
@never_cache
def invitation(request: HttpRequest) -> HttpResponse:
    """Greet the invitee and let them choose their password; then they are signed in."""
    if request.method not in ("GET", "POST"):
        return _error(request, None, 405, "Use the form on this page.")
    token = request.session.get(INVITATION_SESSION_KEY)
    if not token and request.method == "GET":
        # The link's token is after '#': the page's script posts it (invitation_code).
        return _page(request, None, "console/invitation.html", {"ask_code": True})
    try:
        if not token:
            raise ApplicationError("invalid_invitation", "There is no invitation to "
                                   "accept here: open the link you were sent.",
                                   status_code=404)
        peer = people.invitation_peek(token=token)
    except ApplicationError as exc:
        request.session.pop(INVITATION_SESSION_KEY, None)
        return _page(request, None, "console/invitation.html",
                     {"invalid": exc.message}, status=exc.status_code)
    error, status = "", 200
    if request.method == "POST":
        form = InvitationAcceptForm(request.POST)
        if not form.is_valid():
            error, status = errors_in_words(form), 400
        else:
            try:
                peer = people.invitation_accept(token=token,
                                                password=form.cleaned_data["password"])
            except ApplicationError as exc:
                error, status = exc.message, exc.status_code
            else:
                request.session.pop(INVITATION_SESSION_KEY, None)
                user = get_user_model().objects.get(peer=peer)
                login(request, user, backend="django.contrib.auth.backends.ModelBackend")
                return _redirect_with(request, messages.SUCCESS,
                                      f"Welcome, {peer.display_name}. Your password is set "
                                      "and you are signed in.", reverse("console:home"))
        if error[:1].islower():
            error = error[0].upper() + error[1:] + "."
    return _page(request, None, "console/invitation.html",
                 {"invitee": peer, "error": error}, status=status)
