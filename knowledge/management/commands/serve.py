from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from knowledge import services
from knowledge.models import Account, Peer
from memhouse.tenancy import ACCOUNT_SCAN_SETTING, account_context, narrow_lookup

DEMO_SLUG = "demo"
DEMO_CURATOR_PASSWORD = "demo-curator-pass"


def ensure_demo_account() -> tuple[Account, str]:
    """The demo Account with an agent, a human curator and a fresh API key for the agent."""
    with transaction.atomic(), narrow_lookup(ACCOUNT_SCAN_SETTING, "on"):
        account = Account.objects.filter(slug=DEMO_SLUG).first()
    if account is None:
        with transaction.atomic():
            account = services.account_create(name="Demo", slug=DEMO_SLUG)
            services.scope_ensure(account_id=account.id, path="/demo")
            services.peer_create(account_id=account.id, key="demo-agent", kind="agent",
                                 display_name="Demo agent")
            services.peer_create(account_id=account.id, key="demo-curator", kind="human",
                                 display_name="Demo curator", password=DEMO_CURATOR_PASSWORD,
                                 is_curator=True, is_admin=True)
    with account_context(account.id):
        agent = Peer.objects.get(key="demo-agent")
        _, key = services.credential_create(account_id=account.id, peer=agent, name="demo key")
    return account, key


class Command(BaseCommand):
    help = "Migrate, make sure the demo Account exists, print an API key and run the server."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--no-run", action="store_true", help="set up and print, then exit")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        account, key = ensure_demo_account()
        base = f"http://{options['addrport']}"
        self.stdout.write(self.style.SUCCESS("MemHouse is ready."))
        self.stdout.write(f"  Account:        {account.slug} ({account.id})")
        self.stdout.write(f"  API key:        {key}   (agent peer 'demo-agent')")
        self.stdout.write(f"  Console:        {base}/console/  (demo-curator / "
                          f"{DEMO_CURATOR_PASSWORD})")
        self.stdout.write(
            f"  Try:            curl -H 'Authorization: Bearer {key}' {base}/api/v1/me")
        if not options["no_run"]:
            call_command("runserver", options["addrport"], use_reloader=False)
