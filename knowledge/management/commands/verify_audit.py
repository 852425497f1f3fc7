from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from knowledge.accounts import list_account_ids
from knowledge.services import audit_chain_verify
from memhouse.core.tenancy import account_context


class Command(BaseCommand):
    help = ("Recompute every Account's audit hash chain and name the first broken link. "
            "--expected-head SEQ:HASH (or a JSON file from --export-heads) also checks that "
            "an exported head is still present and unchanged.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--account", help="only this Account id")
        parser.add_argument("--expected-head", help="SEQ:HASH of an exported head")
        parser.add_argument("--heads-file", help="JSON {account_id: [seq, hash]} to compare")
        parser.add_argument("--export-heads", help="write current heads to this JSON file")

    def handle(self, *args: Any, **options: Any) -> None:
        heads: dict[str, tuple[int, str]] = {}
        if options["heads_file"]:
            with open(options["heads_file"]) as fh:
                heads = {k: (int(v[0]), str(v[1])) for k, v in json.load(fh).items()}
        ids = list_account_ids()
        if options["account"]:
            ids = [i for i in ids if str(i) == options["account"]]
            if not ids:
                raise CommandError(f"no Account {options['account']}")
        single = None
        if options["expected_head"]:
            seq, _, digest = options["expected_head"].partition(":")
            single = (int(seq), digest)
        failed = False
        exported: dict[str, list[Any]] = {}
        for account_id in ids:
            with account_context(account_id):
                expected = single or heads.get(str(account_id))
                result = audit_chain_verify(account_id=account_id, trigger="command",
                                            expected_head=expected)
            exported[str(account_id)] = [result.head_seq, result.head_hash]
            if result.ok:
                self.stdout.write(f"{account_id}: ok, {result.entries} entries, "
                                  f"head {result.head_seq}:{result.head_hash}")
            else:
                failed = True
                self.stdout.write(f"{account_id}: BROKEN at seq {result.broken_seq}: "
                                  f"{result.problem}")
        if options["export_heads"]:
            with open(options["export_heads"], "w") as fh:
                json.dump(exported, fh, indent=2)
        if failed:
            raise CommandError("audit chain verification failed")
