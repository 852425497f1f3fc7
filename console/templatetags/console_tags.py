"""Presentation helpers for console templates (URLs and labels only, no decisions)."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

register = template.Library()


@register.filter
def scope_url(path: str) -> str:
    """'/' -> /console/scopes/, '/marketing/social' -> /console/scopes/marketing/social/."""
    inner = str(path or "/").strip("/")
    if not inner:
        return reverse("console:scope-root")
    return reverse("console:scope-root") + inner + "/"


@register.filter
def human(value: Any) -> str:
    """'needs_revalidation' -> 'needs revalidation'."""
    return str(value or "").replace("_", " ")


@register.filter
def percent(value: Any) -> str:
    try:
        return f"{round(float(value) * 100)}%"
    except (TypeError, ValueError):
        return ""


@register.filter
def reason(code: Any) -> str:
    """'f4_scope_hold' -> the lifecycle module's sentence for it."""
    from knowledge.lifecycle import reason_sentence

    return reason_sentence(str(code or ""))


@register.inclusion_tag("console/partials/reason.html")
def reason_text(code: str, audience: str = "") -> dict[str, Any]:
    """A reason code as its sentence, linked to its row in the lifecycle contract;
    audience "subject" speaks to the person the statement is about."""
    from knowledge.lifecycle import reason_sentence

    return {"code": code,
            "sentence": reason_sentence(str(code or ""), to_subject=audience == "subject")}


@register.inclusion_tag("console/partials/state_badge.html")
def state_badge(state: str) -> dict[str, Any]:
    return {"state": state}


@register.filter
def depth(path: str) -> int:
    """'/' -> 0, '/marketing' -> 1, '/marketing/social' -> 2."""
    inner = str(path or "/").strip("/")
    return 0 if not inner else inner.count("/") + 1


@register.filter
def leaf(path: str) -> str:
    """'/marketing/social' -> 'social'; '/' -> '/'."""
    inner = str(path or "/").strip("/")
    return inner.rsplit("/", 1)[-1] if inner else "/"


# Readiness statuses drawn with the badge of the lifecycle state they resemble.
_READINESS_BADGES = {"ready": "active", "fresh": "active", "gap": "needs_revalidation",
                     "dirty": "needs_revalidation", "stale": "needs_revalidation",
                     "missing": "superseded"}


@register.filter
def readiness_badge(status: str) -> str:
    """'gap' -> 'badge-needs_revalidation' (retrieval.readiness statuses)."""
    return "badge-" + _READINESS_BADGES.get(str(status), "superseded")


@register.filter
def entry(mapping: Any, key: str) -> Any:
    """mapping[key] for templates (a readiness kind's gap counts by state)."""
    return (mapping or {}).get(key)


def _evidence_words(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{human(k)}: {_evidence_words(v)}" for k, v in value.items()
                         if v not in (None, "", [], {}))
    if isinstance(value, (list, tuple)):
        return ", ".join(_evidence_words(v) for v in value if v not in (None, "", [], {}))
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


@register.filter
def evidence_value(value: Any) -> str:
    """A lifecycle event's evidence value as words: a list reads as its items separated by
    commas and a mapping as "key: value" pairs, never as a Python literal."""
    return _evidence_words(value)
