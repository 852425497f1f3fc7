"""HTMX helpers: one template serves a full page and its fragments (conventions item 9)."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse


def is_partial(request: HttpRequest) -> bool:
    """True for an HTMX request that swaps a fragment (boosted navigation wants a page)."""
    htmx = getattr(request, "htmx", None)
    return htmx is not None and bool(htmx) and not htmx.boosted


def trigger(response: HttpResponse, events: dict[str, Any]) -> HttpResponse:
    """Set HX-Trigger so listeners elsewhere on the page can react to a change."""
    response["HX-Trigger"] = json.dumps(events)
    return response


def retarget(response: HttpResponse, target: str, swap: str = "innerHTML") -> HttpResponse:
    """Send a fragment somewhere other than the requesting element (e.g. the flash area)."""
    response["HX-Retarget"] = target
    response["HX-Reswap"] = swap
    return response
