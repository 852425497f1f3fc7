"""About me: the subject's statements and questions, and their own password."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import authenticate, get_user_model, update_session_auth_hash
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from console import selectors as views_sel
from console.forms import (
    AnswerForm,
    CorrectForm,
    PasswordChangeForm,
    ReasonForm,
    errors_in_words,
)
from console.htmx import is_partial
from console.views.common import (
    _actions_response,
    _error,
    _message_of,
    _page,
    _redirect_with,
    console_view,
)
from governance import selectors as gov
from governance import services
from governance.models import PeerQuestion
from knowledge import lifecycle, people
from knowledge.lifecycle import TransitionError
from knowledge.models import Knowledge
from memhouse.core.errors import ApplicationError, NotFound
from memhouse.core.principal import Principal

ANSWER_LABELS = {"yes": "Yes, that is right", "no": "No, that is wrong",
                 "consent": "I consent", "decline": "I decline"}


# --- subject screens --------------------------------------------------------------------

@dataclass(frozen=True)
class MeRow:
    item: Knowledge
    sources: list[Any]
    can_confirm: bool
    can_deny: bool
    can_contest: bool
    can_redact: bool
    can_correct: bool
def _me_rows(items: list[Knowledge]) -> list[MeRow]:
    """What the person may do with each statement about them. Someone else's claim
    waiting for them (provisional) asks Confirm or Not true; contesting it (for a curator)
    or correcting it (as outdated) would answer a question nobody asked."""
    sources = views_sel.sources_by_knowledge([k.pk for k in items])
    return [MeRow(item=k, sources=sources.get(k.pk, []),
                  can_confirm=k.state in services.CONFIRMABLE,
                  can_deny=k.state in services.CONFIRMABLE,
                  can_contest=(k.state in lifecycle.CURRENT
                               and k.state != lifecycle.PROVISIONAL),
                  can_redact=lifecycle.is_allowed(k.state, lifecycle.REDACTED),
                  can_correct=(k.state in services.CORRECTABLE
                               and k.state != lifecycle.PROVISIONAL))
            for k in items]
@dataclass(frozen=True)
class QuestionRow:
    question: PeerQuestion
    answers: list[tuple[str, str]]
def _question_rows(questions: list[PeerQuestion]) -> list[QuestionRow]:
    return [QuestionRow(question=q, answers=[
        (a, ANSWER_LABELS.get(a, a)) for a in services.ANSWERS[PeerQuestion.Kind(q.kind)]])
        for q in questions]
@require_GET
@console_view()
def me(request: HttpRequest, principal: Principal) -> HttpResponse:
    """Questions first, then every statement about me grouped by state and scope, with a
    state / scope filter (an HTMX filter swaps only the statements)."""
    state = (request.GET.get("state") or "").strip()
    scope = (request.GET.get("scope") or "").strip()
    if state and state not in lifecycle.STATES:
        raise ApplicationError("invalid_filter",
                               f"\u201c{state}\u201d is not a lifecycle state; choose one "
                               f"from the list.")
    page = views_sel.about_me(principal=principal, state=state, scope=scope,
                              page=request.GET.get("page") or 1)
    # Gate A's refusals (junk kept as evidence) in their own folded group, first page only.
    refused = views_sel.about_me(principal=principal, state=state, scope=scope,
                                 refused=True)
    states, scopes = views_sel.about_me_facets(principal=principal)
    filters = {k: v for k, v in (("state", state), ("scope", scope)) if v}
    context = {"rows": _me_rows(list(page.object_list)), "page": page, "filters": filters,
               "refused_rows": _me_rows(list(refused.object_list)),
               "refused_total": refused.paginator.count,
               "filter_query": urlencode(filters), "state_choices": states,
               "scope_choices": scopes}
    htmx = getattr(request, "htmx", None)  # django-htmx's middleware sets it
    if is_partial(request) and getattr(htmx, "target", None) == "me-statements":
        return render(request, "console/partials/me_statements.html", context)
    open_qs = gov.questions_for_me(principal=principal, limit=gov.MAX_LIMIT).items
    consent = [q for q in open_qs if q.kind == PeerQuestion.Kind.CONSENT]
    others = [q for q in open_qs if q.kind != PeerQuestion.Kind.CONSENT]
    return _page(request, principal, "console/me.html", {
        **context, "questions": _question_rows(others), "consents": _question_rows(consent)})
def _who_still_sees(state: str) -> str:
    """Who besides the subject may still inspect a statement in `state`, in words, from
    the lifecycle contract's visibility (for redaction: curators and administrators)."""
    seen = lifecycle.STATES[state].visibility
    who = [label for label, yes in (("other members", seen.member), ("curators", seen.curator),
                                    ("administrators", seen.admin)) if yes]
    if not who:
        return "nobody else"
    return who[0] if len(who) == 1 else ", ".join(who[:-1]) + " and " + who[-1]
_SELF_ACTIONS = {
    "confirm": "Confirmed: the statement is active again.",
    "deny": "Withdrawn: you said it is not true, so it is not used.",
    "contest": "Contested: a curator will review your dispute. Until then the statement "
               "is not used.",
    "redact": ("Redacted: the statement is withdrawn from use. "
               f"{_who_still_sees(lifecycle.REDACTED).capitalize()} can still see it, with "
               "your reason, as the record of your decision."),
}
def _self_govern(request: HttpRequest, principal: Principal, knowledge_id: uuid.UUID,
                 action: str) -> HttpResponse:
    form = ReasonForm(request.POST)
    item = gov.knowledge_for_subject(principal=principal, knowledge_id=knowledge_id)
    fallback = reverse("console:me")
    error = "" if form.is_valid() else errors_in_words(form)
    status = 400
    reason = form.cleaned_data.get("reason", "") if not error else ""
    if not error and action == "redact" and not form.is_confirmed:
        # Redaction is terminal: ask once more, carrying the reason over.
        [row] = _me_rows([item])
        context = {"row": row, "confirm_redact": True, "reason": reason,
                   "still_seen_by": _who_still_sees(lifecycle.REDACTED)}
        if is_partial(request):
            return render(request, "console/partials/me_item.html", context)
        return _page(request, principal, "console/redact_confirm.html", context)
    changed = None
    if not error:
        try:
            if action == "confirm":
                changed = services.knowledge_confirm(item=item, actor=principal.peer)
            elif action == "deny":
                changed = services.knowledge_deny(item=item, actor=principal.peer)
            elif action == "contest":
                changed = services.knowledge_contest(item=item, actor=principal.peer,
                                                     reason=reason)
            else:
                changed = services.knowledge_redact(item=item, actor=principal.peer,
                                                    reason=reason)
        except (ApplicationError, TransitionError) as exc:
            if isinstance(exc, NotFound):
                raise
            status, error = _message_of(exc)
    if error:
        if not is_partial(request):
            return _redirect_with(request, messages.ERROR, error, fallback)
        [row] = _me_rows([gov.knowledge_for_subject(principal=principal,
                                                    knowledge_id=knowledge_id)])
        return _actions_response(request, principal, "console/partials/me_item_response.html",
                                 {"row": row, "error": error, "reason": reason},
                                 flash=[],
                                 event="me-error", detail={"id": str(knowledge_id)},
                                 status=status)
    assert changed is not None
    text = _SELF_ACTIONS[action]
    if not is_partial(request):
        return _redirect_with(request, messages.SUCCESS, text, fallback)
    [row] = _me_rows([gov.knowledge_for_subject(principal=principal, knowledge_id=knowledge_id)])
    return _actions_response(request, principal, "console/partials/me_item_response.html",
                             {"row": row, "done": text},
                             flash=[],
                             event="me-changed",
                             detail={"id": str(knowledge_id), "action": action,
                                     "state": changed.state})
@require_POST
@console_view()
def me_confirm(request: HttpRequest, principal: Principal,
               knowledge_id: uuid.UUID) -> HttpResponse:
    return _self_govern(request, principal, knowledge_id, "confirm")
@require_POST
@console_view()
def me_deny(request: HttpRequest, principal: Principal,
            knowledge_id: uuid.UUID) -> HttpResponse:
    return _self_govern(request, principal, knowledge_id, "deny")
@require_POST
@console_view()
def me_contest(request: HttpRequest, principal: Principal,
               knowledge_id: uuid.UUID) -> HttpResponse:
    return _self_govern(request, principal, knowledge_id, "contest")
@require_POST
@console_view()
def me_redact(request: HttpRequest, principal: Principal,
              knowledge_id: uuid.UUID) -> HttpResponse:
    return _self_govern(request, principal, knowledge_id, "redact")
@require_POST
@console_view()
def me_correct(request: HttpRequest, principal: Principal,
               knowledge_id: uuid.UUID) -> HttpResponse:
    """My statement is outdated; this is what is true now (knowledge_correct). The HTMX
    answer replaces my row with the new statement followed by the superseded one."""
    item = gov.knowledge_for_subject(principal=principal, knowledge_id=knowledge_id)
    form = CorrectForm(request.POST)
    fallback = reverse("console:me")
    error = "" if form.is_valid() else errors_in_words(form)
    status = 400
    statement = form.cleaned_data.get("statement", "") if not error else ""
    reason = form.cleaned_data.get("reason", "") if not error else ""
    new = None
    if not error:
        try:
            new = services.knowledge_correct(item=item, actor=principal.peer,
                                             statement=statement, reason=reason)
        except (ApplicationError, TransitionError) as exc:
            if isinstance(exc, NotFound):
                raise
            status, error = _message_of(exc)
    if error:
        if not is_partial(request):
            return _redirect_with(request, messages.ERROR, error, fallback)
        [row] = _me_rows([gov.knowledge_for_subject(principal=principal,
                                                    knowledge_id=knowledge_id)])
        return _actions_response(request, principal, "console/partials/me_item_response.html",
                                 {"row": row, "correct_error": error, "statement": statement,
                                  "correct_reason": reason},
                                 flash=[],
                                 event="me-error", detail={"id": str(knowledge_id)},
                                 status=status)
    assert new is not None
    text = ("Corrected: the new statement is in use and the old one is kept as superseded "
            "history.")
    if not is_partial(request):
        return _redirect_with(request, messages.SUCCESS, text, fallback)
    new_row, old_row = _me_rows([
        gov.knowledge_for_subject(principal=principal, knowledge_id=new.pk),
        gov.knowledge_for_subject(principal=principal, knowledge_id=knowledge_id)])
    return _actions_response(request, principal, "console/partials/me_item_response.html",
                             {"row": new_row, "done": text, "replaced_row": old_row},
                             flash=[],
                             event="me-changed",
                             detail={"id": str(knowledge_id), "action": "correct",
                                     "state": lifecycle.SUPERSEDED, "new": str(new.pk)})
_ANSWERED = {
    "yes": "Thank you: the statement is confirmed.",
    "no": "Thank you: the statement is withdrawn.",
    "consent": "Thank you: you consented. A curator makes the final decision.",
    "decline": "Thank you: you declined. The statement stays private to its current level.",
}
@require_POST
@console_view()
def question_answer(request: HttpRequest, principal: Principal,
                    question_id: uuid.UUID) -> HttpResponse:
    question = gov.question_for_me(principal=principal, question_id=question_id)
    form = AnswerForm(request.POST)
    fallback = reverse("console:me")
    if not form.is_valid():
        raise ApplicationError("invalid_answer", errors_in_words(form))
    answer = form.cleaned_data["answer"]
    try:
        question = services.question_answer(question=question, actor=principal.peer,
                                            answer=answer)
    except (ApplicationError, TransitionError) as exc:
        if isinstance(exc, NotFound):
            raise
        status, error = _message_of(exc)
        if not is_partial(request):
            return _redirect_with(request, messages.ERROR, error, fallback)
        question = gov.question_for_me(principal=principal, question_id=question_id)
        return _actions_response(request, principal, "console/partials/question_response.html",
                                 {"q": _question_rows([question])[0], "error": error},
                                 flash=[],
                                 event="question-error", detail={"id": str(question_id)},
                                 status=status)
    text = _ANSWERED.get(answer, "Thank you for answering.")
    if not is_partial(request):
        return _redirect_with(request, messages.SUCCESS, text, fallback)
    question.knowledge.refresh_from_db()
    return _actions_response(request, principal, "console/partials/question_response.html",
                             {"answered": question, "done": text},
                             flash=[],
                             event="question-answered",
                             detail={"id": str(question.pk), "answer": answer})


# --- one's own password, and invitations ------------------------------------------------

def _current_password_refused(request: HttpRequest, principal: Principal,
                              current: str) -> tuple[str, int] | None:
    """The current password is checked like a sign-in (django-axes counts a failure and
    refuses a locked username and address), so this form is no way around the lockout."""
    from axes.exceptions import AxesBackendPermissionDenied
    from django.conf import settings as conf

    try:
        user = authenticate(request, username=people.username_of(principal.peer) or "",
                            password=current)
    except AxesBackendPermissionDenied:
        user = None
    if getattr(request, "axes_locked_out", False):
        # AxesMiddleware answers with the lockout page (429, Retry-After), as for sign-in.
        return (f"Too many wrong passwords: try again in {conf.AXES_COOLOFF_MINUTES} "
                "minutes", 429)
    if user is None or user.pk != principal.peer.user_id:
        return "The current password is not right.", 403
    return None
@console_view()
def me_password(request: HttpRequest, principal: Principal) -> HttpResponse:
    if request.method not in ("GET", "POST"):
        return _error(request, principal, 405, "Use the form on this page.")
    error, status = "", 200
    if request.method == "POST":
        form = PasswordChangeForm(request.POST)
        if form.is_valid() and (refused := _current_password_refused(
                request, principal, form.cleaned_data["current_password"])):
            error, status = refused
        elif form.is_valid():
            try:
                people.password_change(peer=principal.peer,
                                       current=form.cleaned_data["current_password"],
                                       new=form.cleaned_data["new_password"])
            except ApplicationError as exc:
                error, status = exc.message, exc.status_code
            else:
                # This session stays signed in; the person's other sessions end.
                update_session_auth_hash(request,
                                         get_user_model().objects.get(peer=principal.peer))
                return _redirect_with(request, messages.SUCCESS,
                                      "Your password is changed. Other signed-in browsers "
                                      "are signed out.", reverse("console:me"))
        else:
            error, status = errors_in_words(form), 400
        if error[:1].islower():
            error = error[0].upper() + error[1:] + "."
    return _page(request, principal, "console/password.html", {"error": error},
                 status=status)
