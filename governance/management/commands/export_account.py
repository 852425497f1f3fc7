"""manage.py export_account ACCOUNT_ID OUT.tar.gz: archive one Account's durable data."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


def read_key_file(path: str | None) -> str | None:
    """The operator archive key from a file (never from the command line, which other
    users of the machine can read in the process list)."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError as exc:
        raise CommandError(f"cannot read the archive key file: {exc}") from exc


class Command(BaseCommand):
    help = ("Write an Account's durable tables (JSON lines per table plus a manifest with the "
            "audit head and row counts) to a .tar.gz archive, signed (HMAC-SHA256) with the "
            "operator key or, by default, a key derived from SECRET_KEY. Prints the audit "
            "head: keep it apart from the archive and pass it to import_account "
            "--expect-audit-head.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("account_id")
        parser.add_argument("out", help="path of the .tar.gz to write")
        parser.add_argument("--archive-key-file", default=None,
                            help="file holding the operator signing key (default: "
                                 "MEMHOUSE_ARCHIVE_KEY, else derived from SECRET_KEY)")

    def handle(self, *args: Any, **options: Any) -> None:
        from governance.archive import ArchiveError, export_account

        try:
            export_account(options["account_id"], options["out"], progress=self.stdout.write,
                           archive_key=read_key_file(options["archive_key_file"]))
        except (ArchiveError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
