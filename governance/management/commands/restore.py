"""manage.py restore --from DIR [--force]: restore a `manage.py backup` directory into the
configured database and rebuild derived data (governance/backup.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.management.commands.export_account import read_key_file


class Command(BaseCommand):
    help = ("Restore a deployment backup into the configured database: checks the manifest "
            "signature and the dump's SHA-256, refuses a database that holds data unless "
            "--force, verifies row counts and every audit chain, applies newer migrations "
            "and rebuilds chunks, vectors and the entity index.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="src", required=True, help="the backup directory")
        parser.add_argument("--force", action="store_true",
                            help="replace the contents of a database that holds data")
        parser.add_argument("--no-rebuild", action="store_true",
                            help="skip rebuilding derived data (run reembed and "
                                 "rebuild_entities later)")
        parser.add_argument("--archive-key-file", default=None,
                            help="file holding the operator key the backup was signed with")

    def handle(self, *args: Any, **options: Any) -> None:
        from governance.archive import ArchiveError
        from governance.backup import BackupError, restore_backup

        try:
            result = restore_backup(options["src"], force=options["force"],
                                    progress=self.stdout.write,
                                    archive_key=read_key_file(options["archive_key_file"]),
                                    rebuild=not options["no_rebuild"])
        except (BackupError, ArchiveError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"restored {result.accounts} account(s), "
                          f"{sum(result.tables.values())} rows")
