"""Operator-side enumeration of Accounts: beat workers and commands list them, then enter
each one (memhouse.core.tenancy.account_context). Not a selector: it reads across Accounts,
through the narrow lookup the row-level security policies allow for exactly this."""

from __future__ import annotations

import uuid

from django.db import transaction

from knowledge.models import Account
from memhouse.core.tenancy import ACCOUNT_SCAN_SETTING, narrow_lookup


def list_account_ids() -> list[uuid.UUID]:
    """Account ids for operator commands and beat workers, which then enter each one."""
    with transaction.atomic(), narrow_lookup(ACCOUNT_SCAN_SETTING, "on"):
        return list(Account.objects.order_by("created_at").values_list("id", flat=True))
