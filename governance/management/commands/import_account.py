"""manage.py import_account IN.tar.gz: restore an Account from an archive."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = ("Restore an Account from an export_account archive: durable rows in their "
            "archived states, erased content skipped, derived data (chunks, vectors, "
            "entities) rebuilt, audit chain verified against the manifest head.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", help="path of the .tar.gz to read")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.db import IntegrityError

        from governance.archive import ArchiveError, import_account

        try:
            result = import_account(options["archive"], progress=self.stdout.write)
        except (ArchiveError, IntegrityError, ValueError, KeyError) as exc:
            # Nothing was written: the import is one transaction.
            raise CommandError(f"import refused: {exc}") from exc
        self.stdout.write(self.style.SUCCESS(
            f"imported Account {result.account_id}: "
            f"{sum(result.inserted.values())} rows, {sum(result.skipped.values())} skipped"))
