from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from knowledge.accounts import list_account_ids
from retrieval.entities import rebuild_entities
from retrieval.entity_resolution import resolve_entities


class Command(BaseCommand):
    help = ("Rebuild the entity mention index from governed statements, per Account "
            "(every Account unless --account is given), and relink the names a model "
            "already confirmed (no model is called). Prints counts only.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--account", help="rebuild this Account id only")

    def handle(self, *args: Any, **options: Any) -> None:
        accounts = list_account_ids()
        if options.get("account"):
            try:
                wanted = uuid.UUID(str(options["account"]))
            except ValueError as exc:
                raise CommandError("--account must be an Account id (a UUID)") from exc
            if wanted not in accounts:
                raise CommandError(f"no Account {wanted}")
            accounts = [wanted]
        totals = {"statements": 0, "entities": 0, "mentions": 0}
        for account_id in accounts:
            counts = rebuild_entities(account_id)
            links = resolve_entities(account_id, ask=False)["links"]
            for k in totals:
                totals[k] += counts[k]
            self.stdout.write(f"{account_id}: {counts['statements']} statements, "
                              f"{counts['entities']} entities, {counts['mentions']} mentions, "
                              f"{links} links")
        self.stdout.write(f"rebuilt {len(accounts)} account(s): {totals['statements']} "
                          f"statements, {totals['entities']} entities, "
                          f"{totals['mentions']} mentions")
