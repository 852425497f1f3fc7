"""The audit log and its hash-chain verification."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from console import selectors as views_sel
from console.views.common import _page, _redirect_with, console_view
from knowledge.services import audit_chain_verify
from memhouse.core.principal import Principal

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
