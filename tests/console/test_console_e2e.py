"""End to end in a real Chromium (Playwright) against the live server and committed data:
a curator approves a held statement and then finds it with the knowledge browser's
search; a subject redacts a fact about themself.

Set MEMHOUSE_SCREENSHOTS=1 to refresh docs/screenshots/*.png (the tour, docs/tour.md)
from this run; otherwise the screenshots go to the test's temporary directory (they are
taken either way, so a page that fails to render fails here).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from knowledge import lifecycle
from knowledge.models import Knowledge
from memhouse.core.tenancy import account_context
from tests.console.browser import CHROMIUM, CHROMIUM_ARGS, sign_in
from tests.console.builders import active, held

DOCS_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch, sync_playwright: Any) -> Iterator[Any]:
    # Playwright's sync API keeps an event loop on this thread; the test's own ORM calls
    # (setup and assertions) are ordinary synchronous code.
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
            # Inside Playwright's sync API Django sees its own connection (asgiref keys
            # connections by context); close it here, or the test database cannot be
            # dropped at the end of the session.
            connections.close_all()


@pytest.fixture
def shots(tmp_path: Path) -> Any:
    publish = bool(os.environ.get("MEMHOUSE_SCREENSHOTS"))

    def take(pg: Any, name: str) -> Path:
        target = tmp_path / f"{name}.png"
        pg.screenshot(path=str(target), full_page=True)
        assert target.stat().st_size > 5_000
        if publish:
            DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(target, DOCS_SHOTS / f"{name}.png")
        return target

    return take


def _search(pg: Any, live_server: Any, query: str) -> None:
    pg.goto(f"{live_server.url}/console/scopes/marketing/social/")
    pg.locator("#id_q").fill(query)
    with pg.expect_response(lambda r: "/console/scopes/" in r.url and "q=" in r.url):
        pg.get_by_role("button", name="Search").click()
    pg.wait_for_selector("#search-title")


def test_curator_approves_a_held_statement_and_finds_it_searchable(
        page: Any, live_server: Any, committed_world: Any, shots: Any) -> None:
    from retrieval.vectors import embed_knowledge

    w = committed_world
    statement = "The social team publishes a product video every Tuesday."
    with account_context(w.account.id):
        item = held(w, statement, excerpt="scribe: we publish the product video on Tuesdays",
                    confidence=0.82)
        other = held(w, "The social team answers comments within a day.")
        fact = active(w, "Alice leads the design team.", subject=w.subject)
    embed_knowledge(w.account.id, [str(item.pk), str(other.pk), str(fact.pk)])

    page.goto(f"{live_server.url}/console/queue/")
    page.wait_for_url("**/console/login/?next=/console/queue/")
    shots(page, "login")
    page.get_by_label("Username").fill("carol")
    page.get_by_label("Password").fill("carol-pass-123")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live_server.url}/console/queue/")

    # Held statements are not searchable yet.
    row = page.locator(f"#q-{item.pk}")
    assert "we publish the product video on Tuesdays" in row.inner_text()
    assert page.locator("#queue-count").inner_text() == "2"
    shots(page, "queue")

    # Approve inline: the row swaps in place and the counters update out of band.
    row.get_by_label("Note for the record").fill("Confirmed with the social lead")
    row.get_by_role("button", name="Approve").click()
    page.wait_for_selector(f"#q-{item.pk}.decided")
    decided = page.locator(f"#q-{item.pk}")
    assert "Approved" in decided.inner_text()
    assert page.locator("#queue-count").inner_text() == "1"
    assert page.locator("#queue-stats dd").first.inner_text() == "1"
    # One message per action: the row says it; the flash area stays empty.
    assert "now active and searchable" in decided.inner_text()
    assert page.locator("#flash").inner_text().strip() == ""
    # Focus moved to the outcome, not lost with the removed button.
    assert page.evaluate("document.activeElement.classList.contains('decided-msg')")
    with account_context(w.account.id):
        assert Knowledge.objects.get(pk=item.pk).state == "active"

    # Bulk: the confirmation step comes first, then the decision.
    page.locator(f"#sel-{other.pk}").check()
    page.get_by_label("With the selected statements").select_option("reject")
    page.get_by_role("button", name="Review selection…").click()
    page.wait_for_selector("#bulk-confirm-title")
    assert "Reject: 1 statement?" in page.locator("#bulk-confirm-title").inner_text()
    page.get_by_role("button", name="Yes, reject 1").click()
    page.wait_for_selector("text=1 statement(s) rejected.")
    assert page.locator("#queue-count").inner_text() == "0"

    # Now the approved statement is found by the balanced-profile search.
    _search(page, live_server, "When does the social team publish product videos?")
    results = page.locator("ol.results")
    assert statement in results.inner_text()
    assert "Profile balanced" in page.locator("#scope-results").inner_text()
    shots(page, "scope")

    page.get_by_role("link", name=statement).first.click()
    page.wait_for_selector("#item-title")
    assert page.locator("#item-title").inner_text() == statement
    history = page.locator("table.history").inner_text()
    assert lifecycle.REASON_SENTENCES["f4_scope_hold"] in history
    assert lifecycle.REASON_SENTENCES["f4_curator_approved"] in history
    assert "f4_" not in history
    assert "Carol" in history
    shots(page, "item")

    page.get_by_role("link", name="Audit").click()
    page.wait_for_selector("text=Chain verified.")
    shots(page, "audit")

    page.goto(f"{live_server.url}/console/lifecycle/#held")
    assert page.locator("tr#held").is_visible()
    shots(page, "lifecycle")


def test_subject_redacts_a_fact_about_themself(page: Any, live_server: Any,
                                               committed_world: Any, shots: Any) -> None:
    w = committed_world
    with account_context(w.account.id):
        fact = active(w, "Alice has asthma and uses an inhaler.", subject=w.subject,
                      sensitivity="personal",
                      excerpt="scribe: Alice mentioned her inhaler during the offsite")
        active(w, "Alice leads the design team.", subject=w.subject)
        from tests.console.builders import provisional

        provisional(w, "Alice is moving to Lisbon.", subject=w.subject)
        # Junk the gates refused: folded into "Refused, kept as evidence" (issue 35).
        from knowledge.lifecycle import transition
        from tests.console.builders import propose

        transition(propose(w, "Alice said: Traceback (most recent call last).",
                           subject=w.subject),
                   "rejected", actor="system:test", reason="f4_gate_a_machine_output")

    sign_in(page, live_server.url, "alice", "alice-pass-123")
    page.get_by_role("link", name="About me").first.click()
    page.wait_for_selector("#about-title")
    assert page.locator("#question-count").inner_text() == "1"
    row = page.locator(f"#me-{fact.pk}")
    badge = row.locator("a.badge")
    assert badge.get_attribute("href") == "/console/lifecycle/#active"
    shots(page, "me")

    # Answer the peer question with the keyboard only; the counter updates out of band.
    page.get_by_role("button", name="Yes, that is right").focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("li.question.answered")
    assert page.locator("#question-count").inner_text() == "0"
    assert "the statement is confirmed" in page.locator("li.question.answered").inner_text()
    assert page.locator("#flash").inner_text().strip() == ""

    # The reason box opens on demand (a <details>; no inline script under the CSP).
    assert not row.get_by_label("Reason").is_visible()
    row.get_by_text("Contest or redact…").click()

    row.get_by_label("Reason").fill("This is private health information.")
    row.get_by_role("button", name="Redact…").click()
    page.wait_for_selector(f"#me-{fact.pk} .confirm-inline")
    with account_context(w.account.id):
        assert Knowledge.objects.get(pk=fact.pk).state == "active"  # asked first
    page.locator(f"#me-{fact.pk}").get_by_role("button", name="Yes, redact it").click()
    page.wait_for_selector(f"#me-{fact.pk} .decided-msg")
    row = page.locator(f"#me-{fact.pk}")
    assert "Redacted" in row.inner_text()
    assert "can still see it" in row.inner_text()
    assert row.locator("a.badge").get_attribute("href") == "/console/lifecycle/#redacted"
    with account_context(w.account.id):
        redacted = Knowledge.objects.get(pk=fact.pk)
        assert (redacted.state, redacted.state_reason) == ("redacted", "f4_subject_redacted")
        event = redacted.events.latest("created_at")
        assert event.evidence == {"reason": "This is private health information."}

    # The badge leads to the contract's row for the new state.
    row.locator("a.badge").click()
    page.wait_for_url("**/console/lifecycle/#redacted")
    assert page.locator("tr#redacted").is_visible()


def test_curator_edits_a_statement_and_the_item_page_shows_the_chain(
        page: Any, live_server: Any, committed_world: Any, shots: Any) -> None:
    w = committed_world
    old_text = "The social team posts product videos every Tuesday."
    new_text = "The social team posts product videos every Wednesday."
    with account_context(w.account.id):
        item = active(w, old_text, excerpt="scribe: videos go out on Tuesdays")

    sign_in(page, live_server.url, "carol", "carol-pass-123")
    page.goto(f"{live_server.url}/console/knowledge/{item.pk}/")
    page.wait_for_selector("#edit-title")
    page.get_by_label("Corrected statement").fill(new_text)
    page.get_by_label("Note for the record").fill("Moved to Wednesdays in March")
    page.get_by_role("button", name="Save the correction").click()
    page.wait_for_url(lambda url: "/console/knowledge/" in url and str(item.pk) not in url)

    # The new statement's page: the outcome, then the chain back to the old one.
    assert page.locator("#item-title").inner_text() == new_text
    assert "Edited: the corrected statement is active" in page.locator("#flash").inner_text()
    older = page.locator("#supersedes")
    assert old_text in older.inner_text()
    assert lifecycle.REASON_SENTENCES["f4_curator_edit"] in older.inner_text()
    assert older.locator("a.badge").first.get_attribute("href") == (
        "/console/lifecycle/#superseded")
    assert "scribe: videos go out on Tuesdays" in page.locator("table.list").first.inner_text()
    history = page.locator("table.history").inner_text()
    assert lifecycle.REASON_SENTENCES["f4_curator_edited"] in history and "Carol" in history
    with account_context(w.account.id):
        new = Knowledge.objects.get(supersedes_id=item.pk)
        old = Knowledge.objects.get(pk=item.pk)
        assert (new.statement, new.state) == (new_text, "active")
        assert (old.state, old.state_reason) == ("superseded", "f4_curator_edit")
    assert page.url.endswith(f"/console/knowledge/{new.pk}/")
    shots(page, "item-chain")

    # Walking the chain the other way: the old page names its replacement and offers no
    # edit form (superseded rows are history).
    older.get_by_role("link", name=old_text).click()
    page.wait_for_url(f"**/console/knowledge/{item.pk}/")
    newer = page.locator("#superseded-by")
    assert new_text in newer.inner_text()
    assert lifecycle.REASON_SENTENCES["f4_curator_edited"] in newer.inner_text()
    assert page.locator("#edit-title").count() == 0
