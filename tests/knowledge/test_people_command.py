"""`manage.py people`: the README's two commands, then grants, roles, invitations and
deactivation from the command line, each leaving an audit entry."""

from __future__ import annotations

import io
import re
import sys
from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.core.management import CommandError, call_command

from knowledge import people, services
from knowledge.models import AuditEntry, Peer
from memhouse.core.tenancy import account_context, rebind_account_for_tests

pytestmark = pytest.mark.django_db


def run(monkeypatch: Any, *args: str, stdin: str = "") -> str:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    out = io.StringIO()
    rebind_account_for_tests(None)
    call_command("people", *args, stdout=out)
    rebind_account_for_tests(None)
    return out.getvalue()


def test_add_a_curator_and_a_subject(world: Any, monkeypatch: Any) -> None:
    out = run(monkeypatch, "--account", "acme", "create", "cora", "--name", "Cora",
              "--role", "curator", "--password-stdin", stdin="cora-pass-1234\n")
    assert "created cora (curator)" in out
    out = run(monkeypatch, "--account", "acme", "create", "sam", "--scope",
              "/marketing/social", "--invite")
    link = re.search(r"/console/invitation/#(mh_\S+)", out)
    assert link is not None and "shown only now" in out
    assert people.invitation_peek(token=link.group(1)).key == "sam"
    assert authenticate(username="cora", password="cora-pass-1234") is not None
    rebind_account_for_tests(None)
    with account_context(world.account.id):
        cora = Peer.objects.get(key="cora")
        assert (cora.is_curator, cora.is_admin, cora.scope_paths) == (True, False, ["/"])
        assert Peer.objects.get(key="sam").scope_paths == ["/marketing/social"]
    listing = run(monkeypatch, "--account", "acme", "list")
    assert re.search(r"cora\s+curator\s+active\s+password set", listing)
    assert re.search(r"sam\s+member\s+active\s+invited", listing)


def test_grants_roles_passwords_and_deactivation(world: Any, monkeypatch: Any) -> None:
    acme = ("--account", "acme")
    with pytest.raises(CommandError, match="scopes_required"):
        run(monkeypatch, *acme, "revoke-grant", "bob", "/")  # it would leave none
    assert "may use /, /marketing" in run(monkeypatch, *acme, "grant", "bob", "/marketing")
    assert "may use /marketing" in run(monkeypatch, *acme, "revoke-grant", "bob", "/")
    with pytest.raises(CommandError, match="not_granted"):
        run(monkeypatch, *acme, "revoke-grant", "bob", "/marketing/social")
    out = run(monkeypatch, *acme, "set-role", "bob", "admin")
    assert "bob is now admin" in out
    rebind_account_for_tests(world.account.id)
    token = services.token_issue(peer=world.member)[0]
    run(monkeypatch, *acme, "set-password", "bob", "--password-stdin",
        stdin="bob-other-pass-9\n")
    assert authenticate(username="bob", password="bob-other-pass-9") is not None
    rebind_account_for_tests(world.account.id)
    token.refresh_from_db()
    assert token.revoked_at is not None  # a reset ends the login tokens of the old one
    with pytest.raises(CommandError, match="weak_password"):
        run(monkeypatch, *acme, "set-password", "bob", "--password-stdin", stdin="x\n")
    # Someone with a password is not invited; a reset is, loudly (issue #34).
    with pytest.raises(CommandError, match="has_password"):
        run(monkeypatch, *acme, "invite", "bob")
    assert "/console/invitation/#mh_" in run(monkeypatch, *acme, "invite", "bob", "--reset")
    assert authenticate(username="bob", password="bob-other-pass-9") is None
    with pytest.raises(CommandError, match="no terminal"):
        run(monkeypatch, *acme, "set-password", "bob")  # never a password argument
    with pytest.raises(CommandError, match="no person 'scribe'"):
        run(monkeypatch, *acme, "deactivate", "scribe")  # agents are not people
    with pytest.raises(CommandError, match="several Accounts"):
        run(monkeypatch, "list")
    assert "deactivated" in run(monkeypatch, *acme, "deactivate", "alice")
    assert authenticate(username="alice", password="alice-pass-123") is None
    rebind_account_for_tests(None)
    with account_context(world.account.id):
        events = set(AuditEntry.objects.filter(actor="system:people")
                     .values_list("event_type", flat=True))
    assert {"person.role_changed", "person.password_set", "person.deactivated",
            "person.scopes_changed", "person.password_reset"} <= events


def test_create_gives_a_login_to_a_person_an_agent_registered_first(
        world: Any, monkeypatch: Any, settings: Any) -> None:
    """Issue 35: agents ingest first and register `sam`; `people create sam` then gives
    that peer the login (role, scopes, invitation) instead of failing with peer_exists."""
    settings.MEMHOUSE_PUBLIC_URL = "https://memory.example.com"
    rebind_account_for_tests(world.account.id)
    services.peer_create(account_id=world.account.id, key="sam", kind="human",
                         display_name="Sam")
    out = run(monkeypatch, "--account", "acme", "create", "sam", "--role", "curator",
              "--scope", "/marketing", "--invite")
    assert "already existed (an agent registered it)" in out
    # The link starts with MEMHOUSE_PUBLIC_URL, not a fixed 127.0.0.1:8000.
    link = re.search(r"(\S+)/console/invitation/#(mh_\S+)", out)
    assert link is not None and link.group(1) == "https://memory.example.com"
    assert people.invitation_peek(token=link.group(2)).key == "sam"
    rebind_account_for_tests(None)
    with account_context(world.account.id):
        sam = Peer.objects.get(key="sam")
        assert (sam.is_curator, sam.scope_paths, sam.user.username) == (
            True, ["/marketing"], "sam")
        assert Peer.objects.filter(key="sam").count() == 1
    # Once it has a login, a second create says what to do instead.
    with pytest.raises(CommandError, match=r"people invite sam.*\(peer_exists\)"):
        run(monkeypatch, "--account", "acme", "create", "sam", "--invite")
    # An agent cannot be given a login at all.
    with pytest.raises(CommandError, match="'scribe' is an agent peer"):
        run(monkeypatch, "--account", "acme", "create", "scribe", "--invite")


def test_invitation_links_follow_the_served_address(world: Any, monkeypatch: Any,
                                                    settings: Any, tmp_path: Any) -> None:
    from memhouse.core import served_url

    settings.MEMHOUSE_PUBLIC_URL = ""
    settings.DATA_DIR = tmp_path
    assert served_url.public_base_url() == "http://127.0.0.1:8000"  # nothing served yet
    served_url.record(served_url.base_for("0.0.0.0:8123"))  # what `serve` writes
    # alice has a password: a new link for her is a reset
    out = run(monkeypatch, "--account", "acme", "invite", "alice", "--reset")
    assert "  http://127.0.0.1:8123/console/invitation/#mh_" in out
    out = run(monkeypatch, "--account", "acme", "invite", "alice", "--reset", "--base-url",
              "https://people.example.org/")
    assert "  https://people.example.org/console/invitation/#mh_" in out
