"""manage.py backup --out DIR: the whole deployment (every Account, the blob store,
Django's tables) in one consistent, signed snapshot (governance/backup.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.management.commands.export_account import read_key_file


class Command(BaseCommand):
    help = ("Back up the whole deployment: pg_dump --format=custom of the database in one "
            "snapshot (derived tables' rows excluded) plus a manifest (versions, migrations, "
            "row counts, audit heads, SHA-256) signed with the archive key.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", required=True, help="a new (or empty) directory")
        parser.add_argument("--archive-key-file", default=None,
                            help="file holding the operator signing key (default: "
                                 "MEMHOUSE_ARCHIVE_KEY, else derived from SECRET_KEY)")

    def handle(self, *args: Any, **options: Any) -> None:
        from governance.archive import ArchiveError
        from governance.backup import BackupError, create_backup

        try:
            create_backup(options["out"], progress=self.stdout.write,
                          archive_key=read_key_file(options["archive_key_file"]))
        except (BackupError, ArchiveError, OSError) as exc:
            raise CommandError(str(exc)) from exc
