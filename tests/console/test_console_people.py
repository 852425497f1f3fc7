"""The console's People page (administrators), one's own password, and invitations.

Django's test client for the rules (who may see and change what, the invitation's one
URL and single use); then a real Chromium: an administrator invites a curator, the
invitee opens the link in another browser and chooses a password, and a deactivation
signs them out on their next request - with no Content-Security-Policy violation.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.test import Client

from knowledge import people, services
from knowledge.models import AuditEntry, Peer
from memhouse.core.tenancy import account_context, rebind_account_for_tests
from tests.console.browser import CHROMIUM, CHROMIUM_ARGS, sign_in
from tests.console.builders import HX, client_for
from tests.console.test_console_e2e import DOCS_SHOTS


@pytest.fixture
def dave(world: Any) -> Client:
    """An administrator of Account A, signed in."""
    peer = services.peer_create(account_id=world.account.id, key="dave", kind="human",
                                display_name="Dave", password="dave-pass-1234",
                                is_curator=True, is_admin=True)
    rebind_account_for_tests(None)
    return client_for(peer)


def _unbind() -> None:
    rebind_account_for_tests(None)


@pytest.mark.django_db
def test_only_administrators_see_and_change_people(world: Any, bob: Client, carol: Client,
                                                   dave: Client) -> None:
    r = bob.get("/console/people/")
    assert r.status_code == 403 and "for administrators" in r.content.decode()
    assert 'href="/console/people/"' not in r.content.decode()  # no nav link either
    _unbind()
    r = carol.post(f"/console/people/{world.subject.id}/", {"role": "admin", "scopes": "/"},
                   **HX)
    assert r.status_code == 403
    _unbind()
    r = carol.post("/console/people/invite/", {"key": "zed", "role": "member", "scopes": "/"})
    assert r.status_code == 403
    _unbind()
    page = dave.get("/console/people/").content.decode()
    assert 'href="/console/people/"' in page and 'id="person-' in page
    for key in ("alice", "bob", "carol", "dave"):
        assert f'<span class="tag">{key}</span>' in page
    assert "scribe" not in page  # agents are not people
    _unbind()
    r = dave.post(f"/console/people/{world.member.id}/",
                  {"role": "curator", "scopes": "/marketing, /marketing/social",
                   "display_name": "Bob"}, **HX)
    html = r.content.decode()
    assert r.status_code == 200 and html.startswith(f'<li id="person-{world.member.id}"')
    assert "Saved bob." in html and 'hx-swap-oob="innerHTML:#flash"' in html
    rebind_account_for_tests(world.account.id)
    bob_peer = Peer.objects.get(pk=world.member.pk)
    assert (bob_peer.is_curator, bob_peer.scope_paths) == (True, ["/marketing",
                                                                  "/marketing/social"])
    _unbind()
    r = dave.post(f"/console/people/{world.member.id}/", {"role": "member",
                                                          "scopes": "/nowhere"}, **HX)
    assert r.status_code == 400 and "no scopes [&#x27;/nowhere&#x27;]" in r.content.decode()
    rebind_account_for_tests(world.account.id)
    events = list(AuditEntry.objects.filter(actor="peer:dave")
                  .values_list("event_type", flat=True))
    assert {"person.role_changed", "person.scopes_changed"} <= set(events)


@pytest.mark.django_db
def test_a_person_changes_their_own_password(world: Any, alice: Client) -> None:
    assert 'href="/console/me/password/"' in alice.get("/console/me/").content.decode()
    _unbind()
    r = alice.post("/console/me/password/", {"current_password": "nope",
                                              "new_password": "alice-new-pass-1",
                                              "new_password_again": "alice-new-pass-1"})
    assert r.status_code == 403 and "current password is not right" in r.content.decode()
    _unbind()
    r = alice.post("/console/me/password/", {"current_password": "alice-pass-123",
                                              "new_password": "alice-new-pass-1",
                                              "new_password_again": "alice-other-1"})
    assert r.status_code == 400 and "differ" in r.content.decode()
    _unbind()
    r = alice.post("/console/me/password/", {"current_password": "alice-pass-123",
                                              "new_password": "alice-new-pass-1",
                                              "new_password_again": "alice-new-pass-1"})
    assert r.status_code == 303 and r["Location"] == "/console/me/"
    _unbind()
    assert alice.get("/console/me/").status_code == 200  # this session stays signed in
    _unbind()
    assert Client().login(username="alice", password="alice-new-pass-1")


@pytest.mark.django_db
def test_an_invitation_link_is_used_once_and_leaves_the_url(world: Any, dave: Client) -> None:
    r = dave.post("/console/people/invite/", {"key": "erin", "display_name": "Erin",
                                              "role": "curator", "scopes": "/marketing"})
    assert r.status_code == 201, r.content.decode()[:2000]
    link = re.search(r'value="http://testserver(/console/invitation/)#(mh_[^"]+)"',
                     r.content.decode())
    assert link is not None
    _unbind()
    invitee = Client()
    # The token follows '#', which a browser never sends: the page posts it (console.js).
    page = invitee.get(link.group(1))
    assert page.status_code == 200 and 'id="invitation-code-form"' in page.content.decode()
    r = invitee.post("/console/invitation/code/", {"token": link.group(2)})
    assert r.status_code == 303 and r["Location"] == "/console/invitation/"
    page = invitee.get("/console/invitation/")
    assert page.status_code == 200 and "Welcome, Erin" in page.content.decode()
    assert link.group(2) not in page.content.decode()
    _unbind()
    r = invitee.post("/console/invitation/", {"password": "erin-pass-1234",
                                              "password_again": "erin-pass-9999"})
    assert r.status_code == 400 and "differ" in r.content.decode()
    _unbind()
    r = invitee.post("/console/invitation/", {"password": "erin-pass-1234",
                                              "password_again": "erin-pass-1234"})
    assert r.status_code == 303 and r["Location"] == "/console/"
    _unbind()
    assert "Erin" in invitee.get("/console/").content.decode()  # signed in
    _unbind()
    again = Client()
    again.post("/console/invitation/code/", {"token": link.group(2)})
    r = again.get("/console/invitation/")
    assert r.status_code == 404 and "already used" in r.content.decode()


@pytest.mark.django_db
def test_someone_with_a_password_gets_a_reset_not_an_invitation(world: Any,
                                                                dave: Client) -> None:
    page = dave.get("/console/people/").content.decode()
    assert "Reset password" in page  # alice has a password: no plain invitation button
    _unbind()
    r = dave.post(f"/console/people/{world.subject.id}/invite/", **HX)
    assert r.status_code == 409 and "already has a password" in r.content.decode()
    _unbind()
    r = dave.post(f"/console/people/{world.subject.id}/invite/", {"reset": "yes"}, **HX)
    html = r.content.decode()
    assert r.status_code == 200 and "signed out everywhere" in html
    assert re.search(r'value="http://testserver/console/invitation/#mh_[^"]+"', html)
    rebind_account_for_tests(world.account.id)
    entry = AuditEntry.objects.get(event_type="person.password_reset")
    assert entry.actor == "peer:dave" and entry.target_id == str(world.subject.pk)
    assert not Peer.objects.get(pk=world.subject.pk).user.has_usable_password()


# --- in a real browser -----------------------------------------------------------------

@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch, sync_playwright: Any) -> Iterator[Any]:
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()
            connections.close_all()


def _page(browser: Any, problems: list[str]) -> Any:
    pg = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    pg.set_default_timeout(20_000)
    pg.on("console", lambda m: problems.append(m.text)
          if m.type == "error" or "Content Security Policy" in m.text else None)
    return pg


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_administrator_invites_and_deactivates_in_the_browser(
        browser: Any, live_server: Any, committed_world: Any) -> None:
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="dave", kind="human",
                             display_name="Dave", password="dave-pass-1234",
                             is_curator=True, is_admin=True)
    problems: list[str] = []
    admin = _page(browser, problems)
    sign_in(admin, live_server.url, "dave", "dave-pass-1234")
    admin.get_by_role("link", name="People").click()
    admin.wait_for_url(f"{live_server.url}/console/people/")

    admin.get_by_label("Peer key").fill("erin")
    admin.get_by_label("Name", exact=True).fill("Erin")
    admin.locator("#invite-role").select_option("curator")
    admin.locator("#invite-scopes").fill("/marketing")
    admin.get_by_role("button", name="Invite").click()
    url = admin.locator("#invitation-url").input_value()
    assert re.fullmatch(rf"{re.escape(live_server.url)}/console/invitation/#mh_\S+", url)
    erin_row = admin.locator("li.person", has_text="erin")
    assert "invited" in erin_row.inner_text()

    invitee = _page(browser, problems)
    invitee.goto(url)  # console.js posts the token after '#' and drops it from the URL
    invitee.get_by_role("heading", name="Welcome, Erin").wait_for()
    assert invitee.url == f"{live_server.url}/console/invitation/"
    invitee.get_by_label("Password", exact=True).fill("erin-pass-1234")
    invitee.get_by_label("Password, again").fill("erin-pass-1234")
    invitee.get_by_role("button", name="Set my password and sign in").click()
    invitee.wait_for_url(f"{live_server.url}/console/")
    assert "Welcome, Erin" in invitee.locator("#flash").inner_text()
    assert invitee.locator(".site-nav").get_by_role("link", name="Queue").count() == 1

    admin.reload()
    if os.environ.get("MEMHOUSE_SCREENSHOTS"):
        admin.screenshot(path=str(DOCS_SHOTS / "people.png"), full_page=True)
    erin_row = admin.locator("li.person", has_text="erin")
    assert "can sign in as erin" in erin_row.inner_text()
    erin_row.get_by_role("button", name="Deactivate").click()
    admin.wait_for_selector("li.person-inactive")
    assert "is deactivated" in admin.locator("li.person-inactive").inner_text()
    assert admin.locator("#flash").inner_text().strip() == ""

    invitee.goto(f"{live_server.url}/console/me/")
    invitee.wait_for_url(f"{live_server.url}/console/login/?next=/console/me/")
    assert not problems, problems
    with account_context(w.account.id):
        erin = Peer.objects.get(key="erin")
        assert erin.deactivated_at is not None and erin.is_curator
    assert people.invitation_ttl().total_seconds() > 0
