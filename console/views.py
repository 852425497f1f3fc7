"""Console views for curators and subjects. Sign-in is for humans: only Django users
linked to a human Peer exist, so an agent (API keys only) can never get in.

Every view:

1. requires a signed-in human and builds their Principal with `principal_for_user`, which
   binds the request's transaction (ATOMIC_REQUESTS) to their Account - so PostgreSQL
   row-level security hides every other Account's rows;
2. reads through the governance / knowledge selectors (or console.selectors, which
   applies the same audiences) and writes only through governance services, exactly as
   the REST API does, so authorisation, lifecycle events and audit are identical;
3. renders the page, or only its fragment for an HTMX request (`is_partial`), from the
   same templates; a mutating POST answers an HTMX request with the updated fragment, the
   queue / question counters out-of-band (hx-swap-oob) and an HX-Trigger event, and a
   plain form post with a redirect and a flash message.

Errors reach people as sentences: ApplicationError messages, and 403 / 404 pages that
say what happened. Another Account's ids simply do not exist (404).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import authenticate, get_user_model, login, update_session_auth_hash
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from console import selectors as views_sel
from console.forms import (
    BULK_ACTIONS,
    ROLE_CHOICES,
    ActiveForm,
    AnswerForm,
    BrowseForm,
    BulkForm,
    ContradictionForm,
    CorrectForm,
    EditForm,
    InvitationAcceptForm,
    InviteForm,
    MergeForm,
    NoteForm,
    PasswordChangeForm,
    PersonForm,
    ReasonForm,
    ResolveForm,
    RevalidationForm,
    errors_in_words,
)
from console.htmx import is_partial, retarget, trigger
from console.markdown import lifecycle_markdown
from console.markdown import render as render_markdown
from governance import selectors as gov
from governance import services
from governance.models import PeerQuestion, Validation
from knowledge import lifecycle, people
from knowledge.credentials import principal_for_user
from knowledge.lifecycle import TransitionError
from knowledge.models import Knowledge, Peer
from knowledge.selectors import reader_for, scope_for_read
from knowledge.services import audit_chain_verify
from memhouse.errors import ApplicationError, NotFound
from memhouse.principal import Principal, ancestor_paths

QUEUE_PAGE = 25
SEARCH_LIMIT = 20
TITLES = {400: "That did not work", 403: "Not allowed", 404: "Not found",
          409: "That cannot be done now", 422: "That did not work"}
ANSWER_LABELS = {"yes": "Yes, that is right", "no": "No, that is wrong",
                 "consent": "I consent", "decline": "I decline"}

View = Callable[..., HttpResponse]


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


# --- curator queue ----------------------------------------------------------------------

@dataclass(frozen=True)
class QueueRow:
    item: Knowledge
    subject: str
    sources: list[Any]
    validations: list[Validation]
    consent: str
    consent_tone: str
    dispute_reason: str
    review_target: str
    can_decide: bool  # held: approve / reject
    can_resolve: bool  # contested: resolve for / against
    contradiction: Validation | None  # an open contradiction review: keep / retire
    contradicted_by: list[views_sel.ContradictionView]
    can_edit: bool  # the item page's edit form applies
    # past its revalidation date with nobody else to confirm it: reconfirm / retire
    revalidation: Validation | None = None

    @property
    def can_settle(self) -> bool:
        return self.contradiction is not None


def _consent_state(item: Knowledge, latest: Validation | None,
                   review: Validation | None) -> tuple[str, str]:
    """The consent position shown to a curator, in words, with a tone for styling."""
    if item.state == lifecycle.CONTESTED:
        # A dispute is about whether the statement is true, not where it is shared: the
        # queue shows the subject's reason instead of a consent line.
        return "", ""
    if latest is not None:
        if latest.status == Validation.Status.OPEN:
            return "waiting for the subject to answer", "pending"
        if latest.resolution == "consented":
            return "given by the subject", "ok"
        if latest.resolution == "declined":
            return "declined by the subject", "bad"
        return f"closed ({latest.resolution or latest.status})", "muted"
    target_level = (review.target_level if review and review.target_level else item.level)
    if target_level != Knowledge.Level.PEER and services.needs_consent(item):
        return "needed, and not yet asked (a promotion asks the subject)", "bad"
    return "not needed", "muted"


def _queue_rows(principal: Principal, items: list[Knowledge]) -> list[QueueRow]:
    ids = [k.pk for k in items]
    sources = views_sel.sources_by_knowledge(ids)
    consent = views_sel.consent_by_knowledge(ids)
    contradicting = views_sel.contradictions_by_knowledge(
        principal=principal, reader=reader_for(principal=principal), ids=ids)
    rows = []
    for k in items:
        opened = getattr(k, "open_validations", None)
        if opened is None:
            opened = list(Validation.objects.filter(knowledge_id=k.pk,
                                                    status=Validation.Status.OPEN)
                          .select_related("target_scope").order_by("created_at"))
        review = next((v for v in opened if v.kind == Validation.Kind.REVIEW), None)
        dispute = next((v for v in opened if v.kind == Validation.Kind.DISPUTE), None)
        contradiction = next((v for v in opened if v.kind == Validation.Kind.CONTRADICTION),
                             None)
        revalidation = next((v for v in opened if v.kind == Validation.Kind.REVALIDATION
                             and k.state == lifecycle.NEEDS_REVALIDATION
                             and not services.has_human_subject(k)), None)
        label, tone = _consent_state(k, consent.get(k.pk), review)
        target = ""
        if review is not None and review.target_scope is not None:
            target = f"{review.target_level or k.level} level at {review.target_scope.path}"
        rows.append(QueueRow(
            item=k, subject=_subject_label(k), sources=sources.get(k.pk, []),
            validations=opened, consent=label, consent_tone=tone,
            dispute_reason=dispute.note if dispute else "", review_target=target,
            can_decide=k.state == lifecycle.HELD,
            can_resolve=k.state == lifecycle.CONTESTED,
            contradiction=contradiction,
            contradicted_by=contradicting.get(k.pk, []) if contradiction else [],
            can_edit=views_sel.curator_may_correct(principal=principal, item=k),
            revalidation=revalidation))
    return rows


def _queue_filters(request: HttpRequest) -> dict[str, str]:
    scope = (request.GET.get("scope") or request.POST.get("filter_scope") or "").strip()
    state = (request.GET.get("state") or request.POST.get("filter_state") or "").strip()
    return {"scope": scope, "state": state}


def _queue_url(filters: dict[str, str]) -> str:
    query = urlencode({k: v for k, v in filters.items() if v})
    return reverse("console:queue") + (f"?{query}" if query else "")


def _queue_context(request: HttpRequest, principal: Principal, filters: dict[str, str],
                   cursor: str | None = None) -> dict[str, Any]:
    narrowed = principal
    if filters["scope"]:
        # The queue selector has no scope parameter: narrow the Principal's own grants to
        # the chosen scope (after checking the curator may access it), so the selector's
        # authorisation still decides what is listed.
        scope = gov.scope_for_curator(principal=principal, path=filters["scope"])
        filters = {**filters, "scope": scope.path}
        narrowed = replace(principal, scope_paths=(scope.path,))
    page = gov.curator_queue(principal=narrowed, state=filters["state"] or None,
                             cursor=cursor, limit=QUEUE_PAGE)
    more = None
    if page.next_cursor:
        more = _queue_url(filters) + ("&" if "?" in _queue_url(filters) else "?") + urlencode(
            {"cursor": page.next_cursor})
    return {"rows": _queue_rows(principal, page.items), "filters": filters, "more_url": more,
            "activity": views_sel.account_activity(principal=principal),
            "queue_url": _queue_url(filters), "paged": bool(cursor),
            "scopes": views_sel.scopes_for(principal=principal),
            "bulk_actions": [(k, v[0]) for k, v in BULK_ACTIONS.items()]}


@require_GET
@console_view(curator=True, denied="The curator queue is for curators: here they approve "
                                   "or reject held statements and settle disputes. You "
                                   "are signed in without the curator role, so there is "
                                   "nothing for you to decide.")
def queue(request: HttpRequest, principal: Principal) -> HttpResponse:
    context = _queue_context(request, principal, _queue_filters(request),
                             cursor=request.GET.get("cursor") or None)
    if is_partial(request):
        return render(request, "console/partials/queue_region.html",
                      {**_nav(principal), **context})
    return _page(request, principal, "console/queue.html", context)


_DECISIONS: dict[str, tuple[str, str]] = {
    # action: (flash text, HX-Trigger event detail "decision")
    "approve": ("Approved: the statement is now active and searchable.", "approved"),
    "reject": ("Rejected: the statement is kept only as decision evidence.", "rejected"),
    "resolve_for": ("Dispute resolved in favour of the statement: it is active again.",
                    "resolved_for"),
    "resolve_against": ("Dispute resolved against the statement: it is now rejected.",
                        "resolved_against"),
    "contradiction_keep": ("Kept: the statement stays in use; the contradicting claim is "
                           "kept as history.", "contradiction_kept"),
    "contradiction_retire": ("Retired: the statement is superseded and no longer used.",
                             "contradiction_retired"),
    "revalidation_reconfirm": ("Reconfirmed: the statement is in use again until its next "
                               "revalidation date.", "revalidation_reconfirmed"),
    "revalidation_retire": ("Retired: the statement is no longer relied on.",
                            "revalidation_retired"),
}


def _apply_decision(action: str, item: Knowledge, actor: Peer, note: str) -> Knowledge:
    if action == "approve":
        return services.knowledge_approve(item=item, actor=actor, note=note)
    if action == "reject":
        return services.knowledge_reject(item=item, actor=actor, note=note)
    if action.startswith("contradiction_"):
        return services.contradiction_resolve(item=item, actor=actor,
                                              outcome=action.removeprefix("contradiction_"),
                                              note=note)
    if action.startswith("revalidation_"):
        return services.revalidation_decide(item=item, actor=actor,
                                            outcome=action.removeprefix("revalidation_"),
                                            note=note)
    outcome = "for" if action == "resolve_for" else "against"
    return services.contest_resolve(item=item, actor=actor, outcome=outcome, note=note)


def _decide(request: HttpRequest, principal: Principal, knowledge_id: uuid.UUID,
            action: str) -> HttpResponse:
    with_outcome = {"resolve": ResolveForm, "contradiction": ContradictionForm,
                    "revalidation": RevalidationForm}
    form: NoteForm = with_outcome.get(action, NoteForm)(request.POST)
    item = gov.knowledge_for_curator(principal=principal, knowledge_id=knowledge_id)
    fallback = _queue_url(_queue_filters(request))
    error = "" if form.is_valid() else errors_in_words(form)
    status = 400
    decided = None
    if not error:
        if action in with_outcome:
            action = f"{action}_{form.cleaned_data['outcome']}"
        try:
            decided = _apply_decision(action, item, principal.peer, form.cleaned_data["note"])
        except (ApplicationError, TransitionError) as exc:
            if isinstance(exc, NotFound):
                raise
            status, error = _message_of(exc)
    if error:
        if not is_partial(request):
            return _redirect_with(request, messages.ERROR, f"\u201c{item.statement}\u201d: "
                                                           f"{error}", fallback)
        [row] = _queue_rows(principal, [gov.knowledge_for_curator(
            principal=principal, knowledge_id=knowledge_id)])
        return _actions_response(request, principal, "console/partials/queue_item_response.html",
                                 {"row": row, "error": error},
                                 flash=[],
                                 event="queue-error", detail={"id": str(knowledge_id)},
                                 status=status)
    assert decided is not None
    text, code = _DECISIONS[action]
    if not is_partial(request):
        return _redirect_with(request, messages.SUCCESS, text, fallback)
    return _actions_response(request, principal, "console/partials/queue_item_response.html",
                             {"decided": decided, "decision": text,
                              "subject": _subject_label(decided)},
                             flash=[],
                             event="queue-changed",
                             detail={"id": str(decided.pk), "decision": code,
                                     "state": decided.state})


@require_POST
@console_view(curator=True)
def queue_approve(request: HttpRequest, principal: Principal,
                  knowledge_id: uuid.UUID) -> HttpResponse:
    return _decide(request, principal, knowledge_id, "approve")


@require_POST
@console_view(curator=True)
def queue_reject(request: HttpRequest, principal: Principal,
                 knowledge_id: uuid.UUID) -> HttpResponse:
    return _decide(request, principal, knowledge_id, "reject")


@require_POST
@console_view(curator=True)
def queue_resolve(request: HttpRequest, principal: Principal,
                  knowledge_id: uuid.UUID) -> HttpResponse:
    return _decide(request, principal, knowledge_id, "resolve")


@require_POST
@console_view(curator=True)
def queue_contradiction(request: HttpRequest, principal: Principal,
                        knowledge_id: uuid.UUID) -> HttpResponse:
    return _decide(request, principal, knowledge_id, "contradiction")


@require_POST
@console_view(curator=True)
def queue_revalidation(request: HttpRequest, principal: Principal,
                       knowledge_id: uuid.UUID) -> HttpResponse:
    return _decide(request, principal, knowledge_id, "revalidation")


@require_POST
@console_view(curator=True)
def queue_bulk(request: HttpRequest, principal: Principal) -> HttpResponse:
    """Two steps: the selection comes back for confirmation, then `confirmed=yes` applies
    the action to each statement in its own service transaction and reports each result."""
    form = BulkForm(request.POST)
    filters = _queue_filters(request)
    fallback = _queue_url(filters)
    if not form.is_valid():
        text = errors_in_words(form)
        if not is_partial(request):
            return _redirect_with(request, messages.ERROR, text, fallback)
        return _error(request, principal, 400, text)
    action = form.cleaned_data["action"]
    label, done_word = BULK_ACTIONS[action]
    items: list[Knowledge] = []
    missing = 0
    for knowledge_id in form.cleaned_data["ids"]:
        try:
            items.append(gov.knowledge_for_curator(principal=principal,
                                                   knowledge_id=knowledge_id))
        except NotFound:
            missing += 1
    if form.cleaned_data.get("confirmed") != "yes":
        context = {"action": action, "action_label": label, "items": items, "missing": missing,
                   "note": form.cleaned_data["note"], "filters": filters,
                   "queue_url": fallback}
        if is_partial(request):
            return render(request, "console/partials/bulk_confirm.html", context)
        return _page(request, principal, "console/bulk_confirm.html", context)
    done: list[Knowledge] = []
    failed: list[str] = []
    for item in items:
        try:
            done.append(_apply_decision(action, item, principal.peer,
                                        form.cleaned_data["note"]))
        except (ApplicationError, TransitionError) as exc:
            failed.append(f"\u201c{item.statement}\u201d: {_message_of(exc)[1]}")
    if missing:
        failed.append(f"{missing} selected statement(s) are no longer in your queue.")
    summary = f"{len(done)} statement(s) {done_word}."
    flash = [{"level": "success" if done else "info", "text": summary}]
    flash += [{"level": "error", "text": f} for f in failed]
    if not is_partial(request):
        for f in flash:
            messages.add_message(request, messages.ERROR if f["level"] == "error"
                                 else messages.SUCCESS, f["text"])
        return HttpResponseRedirect(fallback, status=303)
    context = _queue_context(request, principal, filters)
    return _actions_response(request, principal, "console/partials/queue_region_response.html",
                             context, flash=flash, event="queue-changed",
                             detail={"bulk": action, "done": len(done), "failed": len(failed)})


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


# --- knowledge browser ------------------------------------------------------------------

@require_GET
@console_view()
def scope_browser(request: HttpRequest, principal: Principal, path: str = "") -> HttpResponse:
    from retrieval import engine
    from retrieval.profiles import resolve_profile

    reader = reader_for(principal=principal)
    scope = scope_for_read(reader=reader, path="/" + path.strip("/"))
    counts = views_sel.statement_counts_by_scope(principal=principal, reader=reader)
    scopes = views_sel.scopes_for(principal=principal)
    if not path.strip("/") and not request.GET and not counts.get(scope.pk):
        # Nothing is anchored at the root for this viewer: open on the scope where a read
        # sees the most (its statements and its ancestors'; the first path on a tie)
        # rather than on an empty "/ (0)".
        held = {s.path: counts.get(s.pk, 0) for s in scopes}
        fullest = max((s for s in scopes if held[s.path]), default=None,
                      key=lambda s: sum(held.get(p, 0) for p in ancestor_paths(s.path)))
        if fullest is not None:
            return HttpResponseRedirect(
                reverse("console:scope-root") + fullest.path.strip("/") + "/")
    form = BrowseForm(request.GET)
    if not form.is_valid():
        raise ApplicationError("invalid_filter", errors_in_words(form))
    query = form.cleaned_data["q"]
    states = form.cleaned_data["state"]
    search = None
    if query:
        profile = resolve_profile(requested="balanced", scope=scope, default="balanced")
        search = engine.search(reader=reader, scope=scope, query=query, profile=profile,
                               limit=SEARCH_LIMIT)
    listing = views_sel.browse_knowledge(principal=principal, reader=reader, scope=scope,
                                         states=states, page=form.cleaned_data["page"] or 1)
    base_query = {k: v for k, v in (("q", query),) if v}
    filter_query = urlencode([*base_query.items(), *(("state", s) for s in states)])
    # Curators may tick statements to merge (knowledge_merge; one subject, one scope).
    mergeable = {k.pk for k in listing.object_list
                 if views_sel.curator_may_correct(principal=principal, item=k)}
    context = {
        "scope": scope, "form": form, "query": query, "states": states, "search": search,
        "listing": listing, "filter_query": filter_query, "mergeable": mergeable,
        "here": request.get_full_path(),
        "all_states": list(lifecycle.STATES),
        "scopes": [(s, counts.get(s.pk, 0)) for s in scopes],
    }
    if is_partial(request):
        return render(request, "console/partials/scope_results.html", context)
    return _page(request, principal, "console/scope.html", context)


@console_view()
def readiness_panel(request: HttpRequest, principal: Principal) -> HttpResponse:
    """The scope page's readiness panel (HTMX): the signed-in person's read at ?scope=,
    about the scope or about ?subject= (a peer key). Gap statements are listed only in
    the person's own report (retrieval.readiness)."""
    from knowledge.models import Peer
    from retrieval.readiness import readiness

    reader = reader_for(principal=principal)
    scope = scope_for_read(reader=reader, path=request.GET.get("scope") or "/")
    key = (request.GET.get("subject") or "").strip()
    subject = None
    if key:
        subject = Peer.objects.filter(account_id=principal.account_id, key=key).first()
        if subject is None:
            raise ApplicationError("unknown_subject", f"There is nobody called {key!r} here.")
    report = readiness(reader=reader, scope=scope, subject=subject)
    peers = list(Peer.objects.filter(account_id=principal.account_id, deactivated_at=None)
                 .order_by("display_name", "key").values_list("key", "display_name"))
    context = {"report": report, "scope": scope, "subject_key": key, "peers": peers,
               "me": principal.peer.key}
    if is_partial(request):
        return render(request, "console/partials/readiness.html", context)
    return _page(request, principal, "console/readiness.html", context)


def _detail_page(request: HttpRequest, principal: Principal, knowledge_id: uuid.UUID,
                 *, status: int = 200, **extra: Any) -> HttpResponse:
    reader = reader_for(principal=principal)
    item = views_sel.knowledge_for_viewer(principal=principal, reader=reader,
                                          knowledge_id=knowledge_id)
    context = {"item": item, "subject": _subject_label(item),
               "is_subject": item.subject_peer_id == principal.peer.id,
               "in_queue": principal.is_curator and (
                   item.state in gov.QUEUE_STATES
                   or Validation.objects.filter(knowledge_id=item.pk,
                                                kind=Validation.Kind.CONTRADICTION,
                                                status=Validation.Status.OPEN).exists()),
               "may_edit": views_sel.curator_may_correct(principal=principal, item=item),
               **views_sel.lineage(principal=principal, reader=reader, item=item), **extra}
    return _page(request, principal, "console/knowledge.html", context, status=status)


@require_GET
@console_view()
def knowledge_detail(request: HttpRequest, principal: Principal,
                     knowledge_id: uuid.UUID) -> HttpResponse:
    return _detail_page(request, principal, knowledge_id)


def _to_statement(request: HttpRequest, item: Knowledge, text: str) -> HttpResponse:
    """After a correction: the new statement's page, with the outcome as a flash."""
    messages.success(request, text)
    url = reverse("console:knowledge", args=[item.pk])
    if is_partial(request):
        return HttpResponseClientRedirect(url)
    return HttpResponseRedirect(url, status=303)


@require_POST
@console_view(curator=True, denied="Only curators may edit a statement. If it is about "
                                   "you, correct it on \u201cAbout me\u201d instead.")
def knowledge_edit(request: HttpRequest, principal: Principal,
                   knowledge_id: uuid.UUID) -> HttpResponse:
    """A curator corrects a statement (knowledge_edit): a new active row with the old
    provenance supersedes it. A refusal re-renders the page with the text kept."""
    item = gov.knowledge_for_curator(principal=principal, knowledge_id=knowledge_id)
    form = EditForm(request.POST)
    error = "" if form.is_valid() else errors_in_words(form)
    status = 400
    new = None
    if not error:
        try:
            new = services.knowledge_edit(item=item, actor=principal.peer,
                                          statement=form.cleaned_data["statement"],
                                          note=form.cleaned_data["note"])
        except (ApplicationError, TransitionError) as exc:
            if isinstance(exc, NotFound):
                raise
            status, error = _message_of(exc)
    if error:
        return _detail_page(request, principal, knowledge_id, status=status, edit_error=error,
                            edit_statement=request.POST.get("statement", ""),
                            edit_note=request.POST.get("note", ""))
    assert new is not None
    return _to_statement(request, new, "Edited: the corrected statement is active and the "
                                       "old one is kept as superseded history.")


@require_POST
@console_view(curator=True, denied="Only curators may merge statements.")
def knowledge_merge(request: HttpRequest, principal: Principal) -> HttpResponse:
    """Two steps, like the queue's bulk form: the selected statements come back with the
    merged text to confirm, then `confirmed=yes` merges them (knowledge_merge)."""
    form = MergeForm(request.POST)
    fallback = _safe_next(request, reverse("console:scope-root"))
    if not form.is_valid():
        text = errors_in_words(form)
        if is_partial(request):
            return _error(request, principal, 400, text)
        return _redirect_with(request, messages.ERROR, text, fallback)
    items = [gov.knowledge_for_curator(principal=principal, knowledge_id=knowledge_id)
             for knowledge_id in form.cleaned_data["ids"]]
    context = {"items": items, "subject": _subject_label(items[0]),
               "statement": form.cleaned_data["statement"] or items[0].statement,
               "note": form.cleaned_data["note"], "next": fallback}
    if form.cleaned_data.get("confirmed") != "yes":
        return _page(request, principal, "console/merge_confirm.html", context)
    try:
        new = services.knowledge_merge(items=items, actor=principal.peer,
                                       statement=form.cleaned_data["statement"] or None,
                                       note=form.cleaned_data["note"])
    except (ApplicationError, TransitionError) as exc:
        if isinstance(exc, NotFound):
            raise
        status, error = _message_of(exc)
        return _page(request, principal, "console/merge_confirm.html",
                     {**context, "error": error}, status=status)
    return _to_statement(request, new, f"Merged {len(items)} statements into one; the "
                                       f"originals are kept as superseded history.")


# --- audit ------------------------------------------------------------------------------

@require_GET
@console_view(auditor=True)
def audit_log(request: HttpRequest, principal: Principal) -> HttpResponse:
    entries = views_sel.audit_page(principal=principal, page=request.GET.get("page") or 1)
    verify = views_sel.audit_verification(principal=principal)
    if verify is None:
        # Never verified (a new Account): verify once now; later views read the record,
        # which the nightly schedule and "Verify now" refresh.
        audit_chain_verify(account_id=principal.account_id, trigger="on_demand")
        verify = views_sel.audit_verification(principal=principal)
    return _page(request, principal, "console/audit.html",
                 {"entries": entries, "verify": verify})


@require_POST
@console_view(auditor=True)
def audit_verify(request: HttpRequest, principal: Principal) -> HttpResponse:
    record = audit_chain_verify(account_id=principal.account_id, trigger="on_demand")
    if record.ok:
        return _redirect_with(request, messages.SUCCESS,
                              f"Chain verified: all {record.entries} entries recompute to "
                              f"their hashes.", reverse("console:audit"))
    return _redirect_with(request, messages.ERROR,
                          f"Chain broken at entry #{record.broken_seq}: {record.problem}.",
                          reverse("console:audit"))


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
