"""manage.py export_account ACCOUNT_ID OUT.tar.gz: archive one Account's durable data."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = ("Write an Account's durable tables (JSON lines per table plus a manifest with the "
            "audit head and row counts) to a .tar.gz archive.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("account_id")
        parser.add_argument("out", help="path of the .tar.gz to write")

    def handle(self, *args: Any, **options: Any) -> None:
        from governance.archive import ArchiveError, export_account

        try:
            export_account(options["account_id"], options["out"], progress=self.stdout.write)
        except (ArchiveError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
