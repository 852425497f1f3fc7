"""`manage.py serve`: migrate, make sure the demo Account exists, run the server.

First start: the demo Account, its agent and its curator are created; the curator gets a
random password and the agent an API key (acting for every demo peer), both printed once
and never stored in plain text. Later starts reuse them and say so: the key printed the
first time keeps working (`--rotate-key` revokes it and prints a new one), and the
curator's password is changed with `manage.py changepassword demo-curator`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from knowledge import services
from knowledge.models import Account, Credential, Peer
from memhouse.tenancy import ACCOUNT_SCAN_SETTING, account_context, narrow_lookup

DEMO_SLUG = "demo"
DEMO_KEY_NAME = "demo key"


@dataclass
class DemoSetup:
    account: Account
    key: str | None  # the plaintext key when minted now; None when an earlier one is reused
    key_prefix: str
    password: str | None  # the curator's password when created now


def ensure_demo_account(*, rotate_key: bool = False) -> DemoSetup:
    """The demo Account with an agent and a human curator (random password, shown once),
    and the agent's API key: reused when one is live, minted when there is none or when
    asked to rotate (the old one is then revoked)."""
    password = None
    with transaction.atomic(), narrow_lookup(ACCOUNT_SCAN_SETTING, "on"):
        account = Account.objects.filter(slug=DEMO_SLUG).first()
    if account is None:
        password = secrets.token_urlsafe(12)
        with transaction.atomic():
            account = services.account_create(name="Demo", slug=DEMO_SLUG)
            services.scope_ensure(account_id=account.id, path="/demo")
            services.peer_create(account_id=account.id, key="demo-agent", kind="agent",
                                 display_name="Demo agent")
            services.peer_create(account_id=account.id, key="demo-curator", kind="human",
                                 display_name="Demo curator", password=password,
                                 is_curator=True, is_admin=True)
    with account_context(account.id):
        agent = Peer.objects.get(key="demo-agent")
        live = Credential.objects.filter(peer=agent, name=DEMO_KEY_NAME,
                                         revoked_at__isnull=True).order_by("-created_at")
        current = live.first()
        if current is not None and not rotate_key:
            return DemoSetup(account, None, current.prefix, password)
        for old in live:
            services.credential_revoke(credential=old, actor="system:serve")
        cred, key = services.credential_create(account_id=account.id, peer=agent,
                                               name=DEMO_KEY_NAME, act_for_all=True)
    return DemoSetup(account, key, cred.prefix, password)


class Command(BaseCommand):
    help = "Migrate, make sure the demo Account exists, print an API key and run the server."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--no-run", action="store_true", help="set up and print, then exit")
        parser.add_argument("--rotate-key", action="store_true",
                            help="revoke the demo agent's API key and print a new one")

    def handle(self, *args: Any, **options: Any) -> None:
        from django.core.exceptions import ImproperlyConfigured

        from memhouse.checks import require_safe_secret_key

        host = options["addrport"].rsplit(":", 1)[0] if ":" in options["addrport"] else (
            "127.0.0.1")
        try:  # fail fast, before any setup, rather than serve with the built-in key
            require_safe_secret_key(bind_host=host.strip("[]"))
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        call_command("migrate", interactive=False, verbosity=0)
        demo = ensure_demo_account(rotate_key=options["rotate_key"])
        base = f"http://{options['addrport']}"
        self.stdout.write(self.style.SUCCESS("MemHouse is ready."))
        self.stdout.write(f"  Account:        {demo.account.slug} ({demo.account.id})")
        if demo.key:
            self.stdout.write(f"  API key:        {demo.key}   (agent peer 'demo-agent'; "
                              "shown once, keep it)")
            key_for_curl = demo.key
        else:
            self.stdout.write(f"  API key:        reused: the key mh_{demo.key_prefix}_... "
                              "printed on first start still works (--rotate-key for a new one)")
            key_for_curl = "$KEY"
        if demo.password:
            self.stdout.write(f"  Console:        {base}/console/  (demo-curator / "
                              f"{demo.password}; shown once)")
        else:
            self.stdout.write(f"  Console:        {base}/console/  (demo-curator; password "
                              "printed on first start, `manage.py changepassword "
                              "demo-curator` sets a new one)")
        self.stdout.write(
            f"  Try:            curl -H 'Authorization: Bearer {key_for_curl}' {base}/api/v1/me")
        if not options["no_run"]:
            call_command("runserver", options["addrport"], use_reloader=False)
