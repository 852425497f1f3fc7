"""The belief-time policy: when the system should stop relying on a statement unasked.

Set once when a statement is proposed (intake, curator edit and merge, a subject's
correction) and by `manage.py belief_time_backfill` for older rows:

* ``revalidate_after`` = inserted_at + an interval by kind, shortened for personal and
  restricted statements (what a person prefers drifts faster than what they can do).
  Events get none: that something happened does not go out of date.
* ``expires_at`` = relevant_until + a grace period, for a statement whose valid-time
  window had not ended when it was said and that is *scheduled*: an appointment, meeting,
  booking, flight, pickup, deadline ("the dentist on Tuesday at 10"), or anything bounded
  by "until" / "through". Once past, such a claim has no use left. Other plans and
  experiences ("Caroline is going to a conference next month") become history people ask
  about later ("When did Caroline go to the conference?"), so by default they keep their
  valid time and do not expire: on the LoCoMo dev half, expiring every open window hid
  those answers (balanced recall@10 0.678 -> 0.655). A window already over when it was
  said is history too ("I went to a support group yesterday").
  ``"expire": "all"`` in a scope's override expires every open window, ``"none"`` none.

A scope overrides any part nearest-wins through ``Scope.settings["belief_time"]``
(written by governance.services.scope_belief_time_set, the admin API
``PUT /api/v1/scopes/settings/belief-time``), e.g.
``{"revalidate_days": {"preference": 30}, "expiry_grace_days": 1}``; a ``null`` interval
turns revalidation off for that kind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from knowledge.models import Knowledge, Scope
from memhouse.core.principal import ancestor_paths

SETTING_KEY = "belief_time"

# Days until a statement of this kind should be confirmed again (None: never).
REVALIDATE_DAYS: dict[str, int | None] = {
    "fact": 180,
    "preference": 90,
    "relation": 180,
    "skill": 365,
    "event": None,
}
# Multiplier by sensitivity: the more personal, the sooner a person is asked again.
SENSITIVITY_FACTOR: dict[str, float] = {
    "public": 1.0,
    "internal": 1.0,
    "personal": 0.5,
    "restricted": 0.25,
}
EXPIRY_GRACE_DAYS = 7
KINDS = tuple(REVALIDATE_DAYS)
EXPIRE_MODES = ("scheduled", "all", "none")
# What is only ever attended at a time: once past, it has no use left.
SCHEDULED = re.compile(
    r"\b(?:appointment|appt|check-?up|consultation|meeting|standup|stand-up|1:1|one-on-one"
    r"|interview|call|reservation|booking|flight|train|ferry|pick ?up|drop ?off|delivery"
    r"|deadline|due|until|through|till|expires?|valid)\b", re.IGNORECASE)


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_STATED_DAY = re.compile(rf"\b(\d{{1,2}}) ({'|'.join(_MONTHS)}) (\d{{4}})\b", re.IGNORECASE)


def stated_day_end(statement: str) -> datetime | None:
    """The end of the last calendar day written in a statement ("on 3 November 2026")."""
    from datetime import UTC

    ends = []
    for day, month, year in _STATED_DAY.findall(statement):
        try:
            start = datetime(int(year), _MONTHS.index(month.lower()) + 1, int(day), tzinfo=UTC)
        except ValueError:
            continue
        ends.append(start + timedelta(days=1))
    return max(ends) if ends else None


@dataclass(frozen=True)
class Policy:
    revalidate_days: dict[str, int | None]
    sensitivity_factor: dict[str, float]
    expiry_grace_days: float
    expire: str = "scheduled"

    def stamps(self, *, kind: str, sensitivity: str, inserted_at: datetime,
               relevant_until: datetime | None, said_at: datetime | None = None,
               statement: str = "") -> dict[str, datetime | None]:
        """`revalidate_after` and `expires_at` for a statement with these fields."""
        days = self.revalidate_days.get(kind)
        revalidate_after = None
        if days is not None:
            factor = self.sensitivity_factor.get(sensitivity, 1.0)
            revalidate_after = inserted_at + timedelta(days=max(days * factor, 1))
        expires_at = None
        expiring = self.expire == "all" or (self.expire == "scheduled"
                                            and bool(SCHEDULED.search(statement)))
        if relevant_until is None and expiring:
            # "Sam's dentist appointment is on 3 November 2026": the date is the claim
            # (the extractor keeps it in the text and sets no valid time).
            relevant_until = stated_day_end(statement)
        if expiring and relevant_until is not None and relevant_until > (said_at or inserted_at):
            expires_at = relevant_until + timedelta(days=self.expiry_grace_days)
            if revalidate_after is not None and revalidate_after >= expires_at:
                revalidate_after = None  # it expires before anyone would be asked
        return {"revalidate_after": revalidate_after, "expires_at": expires_at}


DEFAULT = Policy(dict(REVALIDATE_DAYS), dict(SENSITIVITY_FACTOR), EXPIRY_GRACE_DAYS)


def validate_override(raw: Any) -> dict[str, Any]:
    """A scope override, checked; raises ValueError with a message a caller can show."""
    if not isinstance(raw, dict):
        raise ValueError("belief_time must be an object")
    unknown = set(raw) - {"revalidate_days", "sensitivity_factor", "expiry_grace_days",
                          "expire"}
    if unknown:
        raise ValueError(f"unknown belief_time keys: {sorted(unknown)}")
    out: dict[str, Any] = {}
    days = raw.get("revalidate_days")
    if days is not None:
        if not isinstance(days, dict) or set(days) - set(KINDS):
            raise ValueError(f"revalidate_days maps a kind ({', '.join(KINDS)}) to days")
        for kind, value in days.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 1 <= value <= 36500):
                raise ValueError(f"revalidate_days.{kind} is a whole number of days "
                                 "(1..36500) or null")
        out["revalidate_days"] = days
    factors = raw.get("sensitivity_factor")
    if factors is not None:
        if not isinstance(factors, dict) or set(factors) - set(SENSITIVITY_FACTOR):
            raise ValueError("sensitivity_factor maps a sensitivity to a factor")
        for name, value in factors.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0.01 <= value <= 10:
                raise ValueError(f"sensitivity_factor.{name} is a number in 0.01..10")
        out["sensitivity_factor"] = factors
    grace = raw.get("expiry_grace_days")
    if grace is not None:
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) \
                or not 0 <= grace <= 3650:
            raise ValueError("expiry_grace_days is a number of days in 0..3650")
        out["expiry_grace_days"] = grace
    expire = raw.get("expire")
    if expire is not None:
        if expire not in EXPIRE_MODES:
            raise ValueError(f"expire is one of {', '.join(EXPIRE_MODES)}")
        out["expire"] = expire
    return out


def policy_for(scope: Scope) -> Policy:
    """The default policy with scope overrides applied root first, so the nearest scope
    wins for each part it sets and inherits the rest."""
    by_path = dict(Scope.objects.filter(account_id=scope.account_id,
                                        path__in=ancestor_paths(scope.path))
                   .values_list("path", "settings"))
    days, factors = dict(DEFAULT.revalidate_days), dict(DEFAULT.sensitivity_factor)
    grace, expire = DEFAULT.expiry_grace_days, DEFAULT.expire
    for path in reversed(ancestor_paths(scope.path)):
        override = (by_path.get(path) or {}).get(SETTING_KEY) or {}
        days.update(override.get("revalidate_days") or {})
        factors.update(override.get("sensitivity_factor") or {})
        grace = override.get("expiry_grace_days", grace)
        expire = override.get("expire", expire)
    return Policy(days, factors, grace, expire)


def stamps_for(item: Knowledge, *, policy: Policy | None = None) -> dict[str, datetime | None]:
    """The policy's dates for an existing row, said when its newest source was said."""
    from django.db.models import Max

    policy = policy or policy_for(item.scope)
    said = item.sources.aggregate(at=Max("message__occurred_at"))["at"]
    return policy.stamps(kind=item.kind, sensitivity=item.sensitivity,
                         inserted_at=item.inserted_at, relevant_until=item.relevant_until,
                         said_at=said, statement=item.statement)
