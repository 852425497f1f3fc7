"""The readiness panel of the console's scope page (HTMX), in a real Chromium.

A subject opens a scope: the panel loads on its own and shows her readiness there,
including which of her statements need revalidation. Switching the panel to another
person reloads it in place and shows statuses and counts only, never their statements.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections

from knowledge.lifecycle import transition
from memhouse.core.tenancy import account_context
from tests.console.browser import CHROMIUM, CHROMIUM_ARGS, sign_in
from tests.console.builders import HX, active, client_for

pytestmark = pytest.mark.django_db(transaction=True)


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


@pytest.fixture
def gaps(committed_world: Any) -> Any:
    w = committed_world
    with account_context(w.account.id):
        active(w, "Alice prefers green tea.", subject=w.subject)
        oslo = active(w, "Alice lives in Oslo.", subject=w.subject)
        transition(oslo, "needs_revalidation", actor="system:test",
                   reason="f4_revalidation_due")
        bergen = active(w, "Bob lives in Bergen.", subject=w.member)
        transition(bergen, "needs_revalidation", actor="system:test",
                   reason="f4_revalidation_due")
    return w


@pytest.mark.browser
def test_the_panel_loads_shows_my_gaps_and_only_counts_for_others(live_server, gaps, page):
    sign_in(page, live_server.url, "alice", "alice-pass-123")
    page.goto(f"{live_server.url}/console/scopes/marketing/social/")
    panel = page.locator("#readiness")
    # Loaded by HTMX after the page: the kinds table is not in the page's own HTML.
    panel.locator("table.readiness-kinds").wait_for()
    assert "about the scope" in panel.inner_text()
    scope_fact = panel.locator("tr[data-kind='fact'] td")
    assert scope_fact.nth(0).inner_text() == "ready"
    assert [scope_fact.nth(i).inner_text() for i in (1, 2)] == ["1", "2"]  # fresh, gaps

    panel.get_by_label("About").select_option("alice")
    panel.get_by_role("heading", name="Your statements with gaps").wait_for()
    assert panel.locator("ul.readiness-gaps li").all_inner_texts() == [
        "Alice lives in Oslo. needs_revalidation"]
    assert page.url.endswith("/console/scopes/marketing/social/")  # swapped in place

    panel.get_by_label("About").select_option("bob")
    panel.get_by_text("Only bob sees which of their statements these are.").wait_for()
    text = panel.inner_text()
    assert "Bergen" not in text and "Oslo" not in text
    bob_fact = panel.locator("tr[data-kind='fact'] td")
    assert [bob_fact.nth(i).inner_text() for i in (0, 1, 2)] == ["gap", "0", "1"]


def test_the_panel_without_a_browser_is_a_page_and_bad_input_is_in_words(gaps):
    w = gaps
    alice = client_for(w.subject)
    r = alice.get("/console/readiness/", {"scope": "/marketing/social", "subject": "alice"})
    assert r.status_code == 200 and b"<html" in r.content and b"Alice lives in Oslo." in r.content
    r = alice.get("/console/readiness/", {"scope": "/marketing/social", "subject": "bob"}, **HX)
    assert r.status_code == 200 and b"Bergen" not in r.content and b"<html" not in r.content
    r = alice.get("/console/readiness/", {"scope": "/marketing/social", "subject": "ghost"},
                  **HX)
    assert r.status_code == 400 and b"nobody called" in r.content
    r = alice.get("/console/readiness/", {"scope": "/nowhere"})
    assert r.status_code == 404
