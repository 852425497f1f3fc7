"""What a newcomer hit in the console's first hour (issue 35), one browser test per item,
in a real Chromium at 1280 px against the live server and committed data: the queue's
Edit… is visible, an administrator's header is one row and says ADMIN, scope counts sit
beside their names, an invitation is confirmed once, lifecycle evidence reads as words,
About me folds gate refusals away, speaks to its reader and asks Confirm / Not true of a
provisional claim, with no stray outline around Confirm."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge
from memhouse.core.tenancy import account_context
from tests.console.browser import CHROMIUM, CHROMIUM_ARGS, sign_in
from tests.console.builders import active, held, propose, provisional

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WHITE = "rgb(255, 255, 255)"


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch, sync_playwright: Any) -> Iterator[Any]:
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        pg = context.new_page()
        pg.set_default_timeout(20_000)
        try:
            yield pg
        finally:
            context.close()
            browser.close()
            connections.close_all()


def _admin(w: Any) -> None:
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="dave", kind="human",
                             display_name="Dave Administrator", password="dave-pass-1234",
                             is_curator=True, is_admin=True)


def _style(locator: Any, prop: str) -> str:
    return str(locator.evaluate(f"e => getComputedStyle(e).{prop}"))


def test_the_queue_edit_button_is_visible_on_its_card(page, live_server, committed_world):
    w = committed_world
    with account_context(w.account.id):
        item = held(w, "The social team posts every Tuesday.")
    sign_in(page, live_server.url, "carol", "carol-pass-123")
    page.goto(f"{live_server.url}/console/queue/")
    edit = page.locator(f"#q-{item.pk}").get_by_role("link", name="Edit…")
    assert edit.is_visible()
    card = _style(page.locator(f"#q-{item.pk}"), "backgroundColor")
    assert card == WHITE
    # White text on a white card was the bug: the text must differ from the card.
    assert _style(edit, "color") != card
    edit.click()
    page.wait_for_url(f"**/console/knowledge/{item.pk}/#edit")


def test_an_administrators_header_is_one_row_and_says_admin(page, live_server,
                                                            committed_world):
    _admin(committed_world)
    sign_in(page, live_server.url, "dave", "dave-pass-1234")
    page.goto(f"{live_server.url}/console/queue/")
    bar = page.locator(".site-header .bar")
    tops = [round(box["y"]) for box in (
        bar.locator(sel).bounding_box() for sel in (".brand", ".site-nav", ".who"))]
    boxes = [bar.locator(sel).bounding_box() for sel in (".brand", ".site-nav", ".who")]
    assert max(tops) - min(tops) < 12, (tops, boxes)  # one row, not nav above name
    assert bar.bounding_box()["height"] < 70
    assert page.locator(".who .role").inner_text().strip().lower() == "admin"
    # A curator who is not an administrator still reads "curator".
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, live_server.url, "carol", "carol-pass-123")
    assert page.locator(".who .role").inner_text().strip().lower() == "curator"


def test_scope_counts_sit_beside_their_names(page, live_server, committed_world):
    w = committed_world
    with account_context(w.account.id):
        active(w, "The social team posts every Tuesday.")
    sign_in(page, live_server.url, "carol", "carol-pass-123")
    page.goto(f"{live_server.url}/console/scopes/marketing/social/")
    rows = page.locator(".scope-tree li")
    assert rows.count() >= 3
    for i in range(rows.count()):
        name = rows.nth(i).locator("a").bounding_box()
        count = rows.nth(i).locator(".count-inline").bounding_box()
        assert abs(name["y"] - count["y"]) < name["height"], (i, name, count)
        assert count["x"] > name["x"]


def test_an_invitation_is_confirmed_once(page, live_server, committed_world):
    _admin(committed_world)
    sign_in(page, live_server.url, "dave", "dave-pass-1234")
    page.goto(f"{live_server.url}/console/people/")
    # No scope is filled in for the administrator: they choose it.
    assert page.locator("#invite-scopes").input_value() == ""
    page.get_by_label("Peer key").fill("erin")
    page.get_by_label("Name", exact=True).fill("Erin")
    page.locator("#invite-scopes").fill("/marketing")
    page.get_by_role("button", name="Invite").click()
    page.wait_for_selector("#invitation-url")
    assert page.locator("body").inner_text().count("Erin is invited.") == 1
    assert page.locator("#flash").inner_text().strip() == ""


def test_lifecycle_evidence_reads_as_words(page, live_server, committed_world):
    w = committed_world
    with account_context(w.account.id):
        item = active(w, "The social team posts every Tuesday.")
        transition(item, "active", actor="system:test", reason="f4_timer_evidence",
                   evidence={"checked": ["calendar", "handbook"],
                             "window": {"days": 30, "strict": True}})
    sign_in(page, live_server.url, "carol", "carol-pass-123")
    page.goto(f"{live_server.url}/console/knowledge/{item.pk}/")
    history = page.locator("table.history").inner_text()
    assert "calendar, handbook" in history
    assert "days: 30; strict: yes" in history
    assert "[" not in history and "{" not in history


def test_about_me_folds_refused_junk_away_from_what_was_said(page, live_server,
                                                              committed_world):
    w = committed_world
    with account_context(w.account.id):
        fact = active(w, "Alice leads the design team.", subject=w.subject)
        junk = []
        for line in ("Alice said: Traceback (most recent call last).",
                     "Alice said: ValueError: bad value.",
                     "Alice said INFO started in 3.2s."):
            row = propose(w, line, subject=w.subject)
            junk.append(transition(row, "rejected", actor="system:test",
                                   reason="f4_gate_a_machine_output"))
        curator_no = transition(propose(w, "Alice is a robot.", subject=w.subject),
                                "rejected", actor="system:test", reason="f4_curator_rejected")
    sign_in(page, live_server.url, "alice", "alice-pass-123")
    page.goto(f"{live_server.url}/console/me/")
    assert page.locator(f"#me-{fact.pk}").is_visible()
    # A curator's rejection is a decision about a real claim: it stays in the list.
    assert page.locator(f"#me-{curator_no.pk}").is_visible()
    group = page.locator("details#me-refused")
    assert group.get_attribute("open") is None
    assert "Refused, kept as evidence 3" in " ".join(group.locator("> summary").inner_text()
                                                        .split())
    for row in junk:
        assert not page.locator(f"#me-{row.pk}").is_visible()
    group.locator("> summary").click()
    assert all(page.locator(f"#me-{row.pk}").is_visible() for row in junk)


def test_about_me_speaks_to_its_reader_and_asks_confirm_or_not_true(page, live_server,
                                                                     committed_world):
    w = committed_world
    with account_context(w.account.id):
        claim = provisional(w, "Alice is moving to Lisbon.", subject=w.subject)
        other = provisional(w, "Alice plays the cello.", subject=w.subject)
        mine = active(w, "Alice leads the design team.", subject=w.subject)
    sign_in(page, live_server.url, "alice", "alice-pass-123")
    page.goto(f"{live_server.url}/console/me/")
    row = page.locator(f"#me-{claim.pk}")
    text = row.inner_text()
    assert "Someone else said it about you: only you see it until you confirm it." in text
    assert "this person" not in page.locator("#me-statements").inner_text()
    assert "Correct: this is outdated" not in text and "Contest" not in text
    confirm = row.get_by_role("button", name="Confirm")
    assert confirm.is_visible() and row.get_by_role("button", name="Not true").is_visible()
    # No outline around the Confirm button's form (it borrowed a confirmation card's).
    form = row.locator("form.confirm-form")
    assert _style(form, "borderTopWidth") == "0px" and _style(form, "borderLeftWidth") == "0px"
    # Correcting stays for statements in use.
    assert "Correct: this is outdated" in page.locator(f"#me-{mine.pk}").inner_text()

    row.get_by_role("button", name="Not true").click()
    page.wait_for_selector(f"#me-{claim.pk} .decided-msg")
    assert "Withdrawn: you said it is not true" in page.locator(f"#me-{claim.pk}").inner_text()
    page.locator(f"#me-{other.pk}").get_by_role("button", name="Confirm").click()
    page.wait_for_selector(f"#me-{other.pk} .decided-msg")
    with account_context(w.account.id):
        denied = Knowledge.objects.get(pk=claim.pk)
        assert (denied.state, denied.state_reason) == ("retracted", "f4_subject_denied")
        assert Knowledge.objects.get(pk=other.pk).state == "active"
        from governance.models import PeerQuestion

        assert PeerQuestion.objects.get(knowledge=claim).status == "expired"
