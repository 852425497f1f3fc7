"""manage.py import_account IN.tar.gz: restore an Account from an archive."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = ("Restore an Account from a signed export_account archive: durable rows in their "
            "archived states, erased content skipped, derived data (chunks, vectors, "
            "entities) rebuilt, audit chain verified against the manifest head. Unsigned "
            "or badly signed archives are refused. API keys and sign-in passwords are not "
            "restored unless --with-credentials is given.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", help="path of the .tar.gz to read")
        parser.add_argument("--archive-key-file", default=None,
                            help="file holding the operator key the archive was signed with "
                                 "(default: MEMHOUSE_ARCHIVE_KEY, else derived from "
                                 "SECRET_KEY)")
        parser.add_argument("--expect-audit-head", default=None, metavar="SEQ:HASH",
                            help="the audit head export printed, kept apart from the archive; "
                                 "the import is refused unless the archive ends there")
        parser.add_argument("--with-credentials", action="store_true",
                            help="also restore API key hashes and sign-in password hashes "
                                 "(only for archives you trust: a planted key would work)")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.db import DatabaseError

        from governance.archive import ArchiveError, import_account
        from governance.management.commands.export_account import read_key_file

        try:
            result = import_account(options["archive"], progress=self.stdout.write,
                                    archive_key=read_key_file(options["archive_key_file"]),
                                    expect_audit_head=options["expect_audit_head"],
                                    with_credentials=options["with_credentials"])
        except (ArchiveError, DatabaseError, ValueError, KeyError, TypeError) as exc:
            # Nothing was written: the import is one transaction.
            raise CommandError(f"import refused: {exc}") from exc
        self.stdout.write(self.style.SUCCESS(
            f"imported Account {result.account_id}: "
            f"{sum(result.inserted.values())} rows, {sum(result.skipped.values())} skipped"))
