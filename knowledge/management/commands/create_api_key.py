"""`manage.py create_api_key`: mint an API key for an agent peer or a peerless machine,
with its scopes and its act-for grant (which peers it may name as peer_key)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from knowledge import services
from knowledge.models import Account, Peer
from memhouse.core.errors import ApplicationError
from memhouse.core.tenancy import ACCOUNT_SCAN_SETTING, account_context, narrow_lookup


class Command(BaseCommand):
    help = ("Mint an API key and print it once. --act-for sets which peers it may read and "
            "speak for besides its own: none (default), all, or peers with --act-for-peer.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("account", help="Account slug or id")
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--peer", help="the agent peer's key")
        who.add_argument("--peerless", action="store_true", help="a key with no peer")
        parser.add_argument("--name", default="", help="a label for the key")
        parser.add_argument("--scope", action="append", dest="scopes",
                            help="a scope path the key may use (repeat; default '/')")
        parser.add_argument("--act-for", choices=["none", "peers", "all"], default="none")
        parser.add_argument("--act-for-peer", action="append", dest="act_for_peers",
                            help="a peer key the key may act for (repeat; with --act-for peers)")
        parser.add_argument("--expires-days", type=int, help="expire after this many days")

    def handle(self, *args: Any, **options: Any) -> None:
        wanted = options["account"]
        with transaction.atomic(), narrow_lookup(ACCOUNT_SCAN_SETTING, "on"):
            account = next((a for a in Account.objects.all()
                            if wanted in (a.slug, str(a.id))), None)
        if account is None:
            raise CommandError(f"no Account {wanted!r}")
        if options["act_for"] == "peers" and not options["act_for_peers"]:
            raise CommandError("--act-for peers needs at least one --act-for-peer")
        expires = (timezone.now() + timedelta(days=options["expires_days"])
                   if options["expires_days"] else None)
        with account_context(account.id):
            peer = None
            if options["peer"]:
                peer = Peer.objects.filter(key=options["peer"]).first()
                if peer is None:
                    raise CommandError(f"no peer {options['peer']!r} in {account.slug}")
            try:
                cred, key = services.credential_create(
                    account_id=account.id, peer=peer, name=options["name"],
                    scope_paths=options["scopes"], expires_at=expires,
                    act_for_all=options["act_for"] == "all",
                    act_for=options["act_for_peers"] if options["act_for"] == "peers" else None,
                    actor="system:create_api_key")
            except ApplicationError as exc:
                raise CommandError(exc.message) from exc
        grant = "all" if cred.act_for_all else (", ".join(cred.act_for) or "none")
        self.stdout.write(f"{key}\n  prefix {cred.prefix}; scopes {', '.join(cred.scope_paths)}; "
                          f"act for: {grant}; shown only now")
