"""The knowledge browser: scopes, readiness, a statement, edit and merge."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from console import selectors as views_sel
from console.forms import (
    BrowseForm,
    EditForm,
    MergeForm,
    errors_in_words,
)
from console.htmx import is_partial
from console.views.common import (
    _error,
    _message_of,
    _page,
    _redirect_with,
    _safe_next,
    _subject_label,
    console_view,
)
from governance import selectors as gov
from governance import services
from governance.models import Validation
from knowledge import lifecycle
from knowledge.lifecycle import TransitionError
from knowledge.models import Knowledge
from knowledge.selectors import reader_for, scope_for_read
from memhouse.core.errors import ApplicationError, NotFound
from memhouse.core.principal import Principal, ancestor_paths

SEARCH_LIMIT = 20


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
