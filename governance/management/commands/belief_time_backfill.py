"""Stamp revalidate_after / expires_at on existing statements by the belief-time policy.

    python manage.py belief_time_backfill [--account SLUG] [--all-rows]

Rows proposed before the policy existed have neither date, so the revalidation and expiry
workers never touch them. Idempotent: by default only rows with neither date are stamped.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from governance.services import belief_time_backfill
from knowledge import lifecycle
from knowledge.accounts import list_account_ids
from knowledge.models import Knowledge
from memhouse.core.tenancy import account_context


class Command(BaseCommand):
    help = "Stamp belief time (revalidate_after, expires_at) on existing statements."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--account", help="an Account slug (default: every Account)")
        parser.add_argument("--all-rows", action="store_true",
                            help="restamp rows that already have dates")
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args: Any, **opts: Any) -> None:
        ids = list_account_ids()
        if opts["account"]:
            ids = [a for a in ids if _slug(a) == opts["account"]]
            if not ids:
                raise CommandError(f"no Account with slug {opts['account']!r}")
        total = 0
        for account_id in ids:
            with account_context(account_id):
                qs = Knowledge.objects.filter(state__in=sorted(lifecycle.CURRENT))
                if not opts["all_rows"]:
                    qs = qs.filter(revalidate_after__isnull=True, expires_at__isnull=True)
                todo = qs.count()
                with tqdm(total=todo, desc=f"account {account_id}", unit="row",
                          disable=todo == 0) as bar:
                    total += belief_time_backfill(
                        account_id=account_id, only_missing=not opts["all_rows"],
                        batch_size=opts["batch_size"], progress=bar.update)
        self.stdout.write(f"stamped {total} statement(s)")


def _slug(account_id: Any) -> str:
    from knowledge.models import Account

    with account_context(account_id):
        return Account.objects.filter(pk=account_id).values_list("slug", flat=True).first() or ""
