"""`manage.py people`: add people, set passwords, change roles and scope grants, invite,
deactivate, list - the command-line face of knowledge.people.

Passwords are prompted for (twice) or read from standard input with --password-stdin;
they are never command-line arguments, which end up in shell history and `ps`.
"""

from __future__ import annotations

import getpass
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from knowledge import people
from knowledge.models import Account, Peer
from memhouse.core import served_url
from memhouse.core.errors import ApplicationError
from memhouse.core.tenancy import ACCOUNT_SCAN_SETTING, account_context, narrow_lookup

ACTOR = "system:people"


class Command(BaseCommand):
    help = ("Manage the people of an Account: create, set-password, set-role, grant, "
            "revoke-grant, invite, deactivate, reactivate, list.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--account", help="Account slug or id (default: the only one)")
        sub = parser.add_subparsers(dest="action", required=True)

        def person(name: str, help_text: str) -> Any:
            p = sub.add_parser(name, help=help_text)
            p.add_argument("key", help="the person's peer key")
            return p

        def password_source(p: Any) -> None:
            p.add_argument("--password-stdin", action="store_true",
                           help="read the password from standard input (one line)")

        create = person("create", "add a person with a role and scopes")
        create.add_argument("--name", default="", help="display name")
        create.add_argument("--role", choices=list(people.ROLES), default="member")
        create.add_argument("--scope", action="append", dest="scopes",
                            help="a scope path they may use (repeat; default '/')")
        create.add_argument("--username", help="sign-in name (default: the key)")
        how = create.add_mutually_exclusive_group()
        how.add_argument("--password-stdin", action="store_true",
                         help="read the password from standard input (one line)")
        how.add_argument("--invite", action="store_true",
                         help="no password now: print a one-time invitation link instead")
        base_help = ("where the console is served, for the invitation link (default: "
                     "MEMHOUSE_PUBLIC_URL, else the address `manage.py serve` last served, "
                     "else http://127.0.0.1:8000)")
        create.add_argument("--base-url", default=None, help=base_help)

        password_source(person("set-password", "set or reset a person's password"))
        role = person("set-role", "change a person's role")
        role.add_argument("role", choices=list(people.ROLES))
        grant = person("grant", "grant scopes")
        grant.add_argument("paths", nargs="+", metavar="SCOPE")
        revoke = person("revoke-grant", "revoke scope grants")
        revoke.add_argument("paths", nargs="+", metavar="SCOPE")
        invite = person("invite", "a new one-time invitation link (earlier ones stop working)")
        invite.add_argument("--base-url", default=None, help=base_help)
        invite.add_argument("--reset", action="store_true",
                            help="for someone who has a password: make it unusable, revoke "
                                 "their tokens and keys and end their sessions first")
        person("deactivate", "deactivate: sign-in, sessions, tokens and keys stop at once")
        person("reactivate", "let a deactivated person sign in again")
        sub.add_parser("list", help="list the Account's people")

    # --- helpers -------------------------------------------------------------------------

    def _account(self, wanted: str | None) -> Account:
        with transaction.atomic(), narrow_lookup(ACCOUNT_SCAN_SETTING, "on"):
            accounts = list(Account.objects.order_by("created_at"))
        if wanted is None:
            if len(accounts) != 1:
                raise CommandError("there are several Accounts; name one with --account "
                                   f"({', '.join(a.slug for a in accounts) or 'none'})")
            return accounts[0]
        found = next((a for a in accounts if wanted in (a.slug, str(a.id))), None)
        if found is None:
            raise CommandError(f"no Account {wanted!r}")
        return found

    def _password(self, options: dict[str, Any]) -> str:
        if options.get("password_stdin"):
            line = sys.stdin.readline().rstrip("\r\n")
            if not line:
                raise CommandError("no password on standard input")
            return line
        if not sys.stdin.isatty():
            raise CommandError("no terminal to prompt on: pass --password-stdin and pipe "
                               "the password in")
        first = getpass.getpass("Password: ")
        if first != getpass.getpass("Password (again): "):
            raise CommandError("the passwords differ")
        return first

    def _peer(self, key: str, account: Account) -> Peer:
        peer = Peer.objects.filter(account_id=account.id, key=key,
                                   kind=Peer.Kind.HUMAN).first()
        if peer is None:
            raise CommandError(f"no person {key!r} in {account.slug}")
        return peer

    def _line(self, row: people.PersonRow) -> str:
        state = "active" if row.active else "deactivated"
        sign_in = ("password set" if row.has_password else
                   "invited" if row.invitation_expires_at else "no password")
        return (f"{row.key:<20} {row.role:<8} {state:<11} {sign_in:<12} "
                f"{', '.join(row.scopes) or '-'}  ({row.display_name})")

    # --- actions -------------------------------------------------------------------------

    def handle(self, *args: Any, **options: Any) -> None:
        account = self._account(options["account"])
        action = options["action"]
        password = None
        if action == "set-password" or (action == "create" and not options["invite"]):
            password = self._password(options)  # before the transaction: no prompt in it
        try:
            with account_context(account.id):
                self._do(account, action, options, password)
        except ApplicationError as exc:
            raise CommandError(f"{exc.message} ({exc.code})") from exc

    def _do(self, account: Account, action: str, options: dict[str, Any],
            password: str | None) -> None:
        out = self.stdout.write
        if action == "list":
            rows = people.person_rows(list(Peer.objects.filter(account_id=account.id,
                                                         kind=Peer.Kind.HUMAN)
                                     .order_by("key")))
            for row in rows:
                out(self._line(row))
            return
        if action == "create":
            existed = Peer.objects.filter(account_id=account.id,
                                                key=options["key"]).exists()
            peer = people.person_create(account_id=account.id, key=options["key"],
                                        actor=ACTOR, display_name=options["name"],
                                        role=options["role"],
                                        scope_paths=options["scopes"] or ["/"],
                                        username=options["username"], password=password)
            out(f"created {peer.key} ({options['role']}) in {account.slug}; "
                f"scopes {', '.join(peer.scope_paths)}"
                + ("; the peer already existed (an agent registered it), so it was given "
                   "this login" if existed else ""))
            if options["invite"]:
                self._invite(peer, options["base_url"])
            return
        peer = self._peer(options["key"], account)
        if action == "set-password":
            assert password is not None
            people.password_set(peer=peer, password=password, actor=ACTOR)
            out(f"password set for {peer.key}")
        elif action == "set-role":
            people.person_update(peer=peer, actor=ACTOR, role=options["role"])
            out(f"{peer.key} is now {options['role']}")
        elif action == "grant":
            peer = people.scopes_grant(peer=peer, actor=ACTOR, paths=options["paths"])
            out(f"{peer.key} may use {', '.join(peer.scope_paths)}")
        elif action == "revoke-grant":
            peer = people.scopes_revoke(peer=peer, actor=ACTOR, paths=options["paths"])
            out(f"{peer.key} may use {', '.join(peer.scope_paths) or 'no scope'}")
        elif action == "invite":
            self._invite(peer, options["base_url"], reset=options["reset"])
        elif action == "deactivate":
            people.person_update(peer=peer, actor=ACTOR, active=False)
            out(f"{peer.key} is deactivated; their sessions, tokens and keys no longer work")
        elif action == "reactivate":
            people.person_update(peer=peer, actor=ACTOR, active=True)
            out(f"{peer.key} is active again; their old tokens and keys stay revoked")

    def _invite(self, peer: Peer, base_url: str | None, *, reset: bool = False) -> None:
        base_url = base_url or served_url.public_base_url()
        cred, token = people.invitation_create(peer=peer, actor=ACTOR, reset=reset)
        self.stdout.write(f"invitation for {peer.key}, valid until "
                          f"{cred.expires_at:%Y-%m-%d %H:%M} UTC, shown only now:\n"
                          f"  {people.invitation_url(base_url, token)}")
