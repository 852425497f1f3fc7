"""The curator queue's revalidation list in a real Chromium: a shared statement nobody
else can confirm comes due, the curator reconfirms one and retires another with the row's
buttons; members cannot, and a person's own statement never shows these buttons. A
claim held for naming an unregistered person says whom it names."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from governance import services, workers
from governance.models import Validation
from knowledge.models import Knowledge
from memhouse.core.tenancy import account_context
from tests.console.browser import CHROMIUM, CHROMIUM_ARGS
from tests.console.builders import HX, active, held


def _due(item: Knowledge) -> Knowledge:
    Knowledge.objects.filter(pk=item.pk).update(
        revalidate_after=timezone.now() - timedelta(days=1))
    item.refresh_from_db()
    return item


def _due_shared(w: Any, statement: str) -> Knowledge:
    return _due(services.knowledge_approve(item=held(w, statement), actor=w.curator))


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


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_curator_reconfirms_and_retires_due_shared_statements(
        page: Any, live_server: Any, committed_world: Any) -> None:
    w = committed_world
    with account_context(w.account.id):
        kept = _due_shared(w, "The social team posts every Tuesday.")
        gone = _due_shared(w, "The social team answers comments within a day.")
        alices = _due(active(w, "Alice leads the design team.", subject=w.subject))
    assert workers.revalidate_due(w.account.id) == 3

    page.goto(f"{live_server.url}/console/login/?next=/console/queue/%3Fstate%3Drevalidation")
    page.get_by_label("Username").fill("carol")
    page.get_by_label("Password").fill("carol-pass-123")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/console/queue/?state=revalidation")
    assert page.locator("#queue-count").inner_text() == "2"
    assert page.locator(f"#q-{alices.pk}").count() == 0  # hers to confirm, not ours
    row = page.locator(f"#q-{kept.pk}")
    assert "Due for revalidation" in row.inner_text()
    row.get_by_label("Note for the record").fill("still posting on Tuesdays")
    row.get_by_role("button", name="Reconfirm").click()
    page.wait_for_selector(f"#q-{kept.pk}.decided")
    assert "Reconfirmed" in page.locator(f"#q-{kept.pk}").inner_text()
    assert page.locator("#queue-count").inner_text() == "1"
    page.locator(f"#q-{gone.pk}").get_by_role("button", name="Retire").click()
    page.wait_for_selector(f"#q-{gone.pk}.decided")
    assert page.locator("#queue-count").inner_text() == "0"

    with account_context(w.account.id):
        kept.refresh_from_db()
        gone.refresh_from_db()
        assert (kept.state, kept.state_reason) == ("active", "f4_revalidation_confirmed")
        assert kept.revalidate_after > timezone.now()
        assert (gone.state, gone.state_reason) == ("rejected", "f4_curator_retired")
        review = Validation.objects.get(knowledge=kept, kind="revalidation")
        assert (review.resolution, review.note) == ("revalidation_reconfirm",
                                                    "still posting on Tuesdays")


@pytest.mark.django_db
def test_revalidation_needs_a_curator_an_outcome_and_no_human_subject(
        world: Any, carol: Any, bob: Any) -> None:
    shared = _due_shared(world, "The social team posts every Tuesday.")
    alices = _due(active(world, "Alice leads the design team.", subject=world.subject))
    workers.revalidate_due(world.account.id)
    r = bob.post(f"/console/queue/{shared.pk}/revalidation/", {"outcome": "retire"})
    assert r.status_code == 403
    r = carol.post(f"/console/queue/{shared.pk}/revalidation/", {}, **HX)
    assert r.status_code == 400 and "Outcome: This field is required." in r.content.decode()
    r = carol.post(f"/console/queue/{alices.pk}/revalidation/", {"outcome": "reconfirm"}, **HX)
    assert r.status_code == 409 and "they confirm it themselves" in r.content.decode()
    html = carol.get("/console/queue/").content.decode()
    assert f'formaction="/console/queue/{shared.pk}/revalidation/"' in html
    assert f'formaction="/console/queue/{alices.pk}/revalidation/"' not in html


@pytest.mark.django_db
def test_a_claim_held_for_an_unregistered_person_names_them_in_the_queue(
        world: Any, carol: Any) -> None:
    from governance.intake.gates import gate_b
    from tests.console.builders import propose

    item = propose(world, "Jordan told Alice he is quitting Google.", level="scope")
    Knowledge.objects.filter(pk=item.pk).update(named_entity="Jordan")
    item.refresh_from_db()
    gate_b(item, self_observation=False)
    html = carol.get("/console/queue/").content.decode()
    assert "Jordan (not a registered person)" in html
    assert "registering them links this to them" in html
    html = carol.get(f"/console/knowledge/{item.pk}/").content.decode()
    assert "Jordan (not a registered person)" in html
