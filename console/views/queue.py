"""The curator queue: held statements, disputes, contradictions, bulk review."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from console import selectors as views_sel
from console.forms import (
    BULK_ACTIONS,
    BulkForm,
    ContradictionForm,
    NoteForm,
    ResolveForm,
    RevalidationForm,
    errors_in_words,
)
from console.htmx import is_partial
from console.views.common import (
    _actions_response,
    _error,
    _message_of,
    _nav,
    _page,
    _redirect_with,
    _subject_label,
    console_view,
)
from governance import selectors as gov
from governance import services
from governance.models import Validation
from knowledge import lifecycle
from knowledge.lifecycle import TransitionError
from knowledge.models import Knowledge, Peer
from knowledge.selectors import reader_for
from memhouse.core.errors import ApplicationError, NotFound
from memhouse.core.principal import Principal

QUEUE_PAGE = 25


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
