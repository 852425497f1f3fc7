"""The curator queue: what it lists, inline and bulk decisions through the governance
services, HTMX fragments with out-of-band counters, and who is refused."""

from __future__ import annotations

import json

import pytest

from governance import services as gov_services
from governance.models import Validation
from knowledge import services
from knowledge.models import AuditEntry, LifecycleEvent
from memhouse.core.tenancy import rebind_account_for_tests
from tests.console.builders import HX, held, reread

pytestmark = pytest.mark.django_db


def test_the_queue_lists_held_and_contested_with_their_evidence(carol, world, queue_items):
    r = carol.get("/console/queue/")
    html = r.content.decode()
    assert r.status_code == 200
    assert queue_items.held.statement in html and queue_items.contested.statement in html
    assert "scribe: the social team posts every Tuesday at nine" in html  # provenance excerpt
    assert "I drink coffee, never tea." in html  # the subject's dispute reason
    assert "70%" in html and "internal" in html  # confidence and sensitivity
    assert "Consent" in html and "not needed" in html
    assert 'href="/console/lifecycle/#held"' in html
    assert 'href="/console/lifecycle/#contested"' in html
    # Provisional rows wait for their subject, never for a curator.
    assert queue_items.bob_provisional.statement not in html
    assert queue_items.alice_provisional.statement not in html
    assert 'id="queue-count"' in html and ">2<" in html


def test_the_queue_filters_by_scope_and_state(carol, world, queue_items):
    other = services.scope_ensure(account_id=world.account.id, path="/engineering")
    elsewhere = held(world, "The engineering team deploys on Thursdays.", scope=other)
    html = carol.get("/console/queue/?scope=/engineering").content.decode()
    assert elsewhere.statement in html and queue_items.held.statement not in html
    html = carol.get("/console/queue/?scope=/marketing").content.decode()
    assert queue_items.held.statement in html and elsewhere.statement not in html
    html = carol.get("/console/queue/?state=contested").content.decode()
    assert queue_items.contested.statement in html and queue_items.held.statement not in html
    r = carol.get("/console/queue/?scope=/nowhere")
    assert r.status_code == 404 and "scope not found" in r.content.decode().lower()
    r = carol.get("/console/queue/?state=active")
    assert r.status_code == 400 and "queue holds" in r.content.decode()


def test_an_htmx_filter_returns_only_the_queue_region(carol, queue_items):
    r = carol.get("/console/queue/?state=held", **HX)
    html = r.content.decode()
    assert r.status_code == 200 and html.lstrip().startswith('<section id="queue-region"')
    assert "<html" not in html


@pytest.mark.parametrize("persona", ["alice", "bob", "mallory"])
def test_people_without_the_curator_role_get_a_403_page_in_words(request, persona, queue_items):
    client = request.getfixturevalue(persona)
    r = client.get("/console/queue/")
    assert r.status_code == 403
    assert "The curator queue is for curators" in r.content.decode()


def test_approving_inline_swaps_the_row_and_updates_counters(carol, world, queue_items):
    item = queue_items.held
    r = carol.post(f"/console/queue/{item.pk}/approve/", {"note": "checked the calendar"}, **HX)
    html = r.content.decode()
    assert r.status_code == 200
    assert html.lstrip().startswith(f'<li id="q-{item.pk}"') and "Approved" in html
    assert 'id="queue-count" class="count" hx-swap-oob="true"' in html and ">1<" in html
    assert 'id="queue-stats" class="stats" hx-swap-oob="true"' in html
    assert 'hx-swap-oob="innerHTML:#flash"' in html
    assert json.loads(r["HX-Trigger"])["queue-changed"]["decision"] == "approved"
    item = reread(world, item)
    assert (item.state, item.state_reason, item.verification) == (
        "active", "f4_curator_approved", "curator_approved")
    event = LifecycleEvent.objects.filter(knowledge=item).latest("created_at")
    assert event.actor == "peer:carol" and event.evidence["note"] == "checked the calendar"
    assert AuditEntry.objects.filter(target_id=str(item.pk), actor="peer:carol").exists()
    assert Validation.objects.get(knowledge=item, kind="review").resolution == "approved"


def test_a_plain_form_post_redirects_back_with_a_message(carol, world, queue_items):
    item = queue_items.held
    r = carol.post(f"/console/queue/{item.pk}/reject/",
                   {"note": "not true", "next": "/console/queue/?state=held"})
    assert r.status_code == 303 and r["Location"] == "/console/queue/?state=held"
    assert reread(world, item).state == "rejected"
    page = carol.get(r["Location"]).content.decode()
    assert "Rejected: the statement is kept only as decision evidence." in page


def test_next_cannot_redirect_off_site(carol, queue_items):
    r = carol.post(f"/console/queue/{queue_items.held.pk}/reject/",
                   {"next": "https://evil.example/"})
    assert r.status_code == 303 and r["Location"] == "/console/queue/"


@pytest.mark.parametrize(("outcome", "state", "reason"), [
    ("for", "active", "f4_contest_resolved_for"),
    ("against", "rejected", "f4_contest_resolved_against"),
])
def test_resolving_a_dispute(carol, world, queue_items, outcome, state, reason):
    item = queue_items.contested
    r = carol.post(f"/console/queue/{item.pk}/resolve/", {"outcome": outcome}, **HX)
    assert r.status_code == 200 and "Dispute resolved" in r.content.decode()
    item = reread(world, item)
    assert (item.state, item.state_reason) == (state, reason)
    assert Validation.objects.get(knowledge=item, kind="dispute").resolution == (
        f"resolved_{outcome}")


def test_a_resolution_needs_an_outcome(carol, queue_items):
    r = carol.post(f"/console/queue/{queue_items.contested.pk}/resolve/", {}, **HX)
    assert r.status_code == 400 and "Outcome: This field is required." in r.content.decode()


def test_a_refused_decision_is_explained_inline(carol, world, queue_items):
    r = carol.post(f"/console/queue/{queue_items.contested.pk}/approve/", **HX)
    html = r.content.decode()
    assert r.status_code == 409
    assert "only held statements can be approved; this one is contested" in html
    assert html.lstrip().startswith(f'<li id="q-{queue_items.contested.pk}"')
    assert reread(world, queue_items.contested).state == "contested"


def test_a_personal_scope_statement_needs_consent_before_approval(carol, world):
    item = held(world, "Alice runs the Tuesday posts.", subject=world.subject)
    html = carol.get("/console/queue/").content.decode()
    assert "needed, and not yet asked" in html
    r = carol.post(f"/console/queue/{item.pk}/approve/", **HX)
    assert r.status_code == 409 and "needs their consent" in r.content.decode()
    assert reread(world, item).state == "held"


def test_consent_state_follows_a_promotion(carol, alice, world):
    from tests.console.builders import active

    item = active(world, "Alice speaks Portuguese.", subject=world.subject)
    gov_services.knowledge_promote(item=item, actor=world.curator, level="account")
    html = carol.get("/console/queue/").content.decode()
    assert "waiting for the subject to answer" in html
    r = carol.post(f"/console/queue/{item.pk}/approve/", **HX)
    assert r.status_code == 409 and "not yet consented" in r.content.decode()


@pytest.mark.parametrize("persona", ["alice", "bob"])
def test_members_and_subjects_cannot_decide(request, persona, world, queue_items):
    client = request.getfixturevalue(persona)
    for action in ("approve", "reject"):
        r = client.post(f"/console/queue/{queue_items.held.pk}/{action}/")
        assert r.status_code == 403
    assert client.post(f"/console/queue/{queue_items.contested.pk}/resolve/",
                       {"outcome": "for"}).status_code == 403
    assert client.post("/console/queue/bulk/", {"action": "approve",
                                                "ids": [str(queue_items.held.pk)],
                                                "confirmed": "yes"}).status_code == 403
    assert reread(world, queue_items.held).state == "held"


def test_an_outsider_curator_finds_nothing_of_another_account(world, queue_items,
                                                               outsider_curator):
    r = outsider_curator.get("/console/queue/")
    assert r.status_code == 200 and queue_items.held.statement not in r.content.decode()
    rebind_account_for_tests(None)
    r = outsider_curator.post(f"/console/queue/{queue_items.held.pk}/approve/")
    assert r.status_code == 404 and "knowledge not found" in r.content.decode().lower()
    assert reread(world, queue_items.held).state == "held"


def test_curators_never_decide_a_provisional_row(carol, world, queue_items):
    r = carol.post(f"/console/queue/{queue_items.bob_provisional.pk}/approve/")
    assert r.status_code == 404
    assert reread(world, queue_items.bob_provisional).state == "provisional"


def test_bulk_asks_for_confirmation_first(carol, world, queue_items):
    second = held(world, "The social team uses a shared calendar.")
    ids = [str(queue_items.held.pk), str(second.pk)]
    r = carol.post("/console/queue/bulk/", {"action": "approve", "ids": ids}, **HX)
    html = r.content.decode()
    assert r.status_code == 200 and "Approve: 2 statements?" in html
    assert queue_items.held.statement in html and second.statement in html
    assert 'name="confirmed" value="yes"' in html
    assert reread(world, second).state == "held"  # nothing decided yet
    page = carol.post("/console/queue/bulk/", {"action": "approve", "ids": ids})
    assert page.status_code == 200 and "<html" in page.content.decode()  # without JS too


def test_bulk_confirmed_decides_each_and_reports_failures(carol, world, queue_items):
    second = held(world, "The social team uses a shared calendar.")
    ids = [str(queue_items.held.pk), str(second.pk), str(queue_items.contested.pk)]
    r = carol.post("/console/queue/bulk/", {"action": "approve", "ids": ids,
                                            "confirmed": "yes", "note": "batch"}, **HX)
    html = r.content.decode()
    assert r.status_code == 200 and html.lstrip().startswith('<section id="queue-region"')
    assert "2 statement(s) approved." in html
    assert "only held statements can be approved; this one is contested" in html
    assert 'id="queue-count" class="count" hx-swap-oob="true"' in html
    assert json.loads(r["HX-Trigger"])["queue-changed"] == {
        "bulk": "approve", "done": 2, "failed": 1}
    assert reread(world, second).state == "active"
    assert reread(world, queue_items.held).state == "active"
    assert reread(world, queue_items.contested).state == "contested"


def test_bulk_rejects_without_js_and_redirects(carol, world, queue_items):
    r = carol.post("/console/queue/bulk/", {"action": "reject", "confirmed": "yes",
                                            "ids": [str(queue_items.held.pk)],
                                            "filter_state": "held"})
    assert r.status_code == 303 and r["Location"] == "/console/queue/?state=held"
    assert reread(world, queue_items.held).state == "rejected"
    assert "1 statement(s) rejected." in carol.get(r["Location"]).content.decode()


def test_bulk_needs_a_selection(carol, queue_items):
    r = carol.post("/console/queue/bulk/", {"action": "approve"}, **HX)
    assert r.status_code == 400 and "Choose at least one statement first." in r.content.decode()
    assert r["HX-Retarget"] == "#flash"
    r = carol.post("/console/queue/bulk/", {"action": "approve", "ids": ["not-a-uuid"]}, **HX)
    assert r.status_code == 400 and "not valid" in r.content.decode()


def test_bulk_skips_ids_outside_the_queue(carol, world, queue_items):
    ids = [str(queue_items.bob_provisional.pk), str(queue_items.held.pk)]
    r = carol.post("/console/queue/bulk/", {"action": "reject", "ids": ids}, **HX)
    assert "1 of the selected statement is no longer in your queue" in r.content.decode()
    r = carol.post("/console/queue/bulk/", {"action": "reject", "ids": ids,
                                            "confirmed": "yes"}, **HX)
    assert "no longer in your queue" in r.content.decode()
    assert reread(world, queue_items.bob_provisional).state == "provisional"


def _queries(client, path):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        assert client.get(path).status_code == 200
    return len(ctx.captured_queries)


def test_the_queue_does_not_query_per_row(carol, world, queue_items):
    few = _queries(carol, "/console/queue/")
    for n in range(4):
        held(world, f"The social team runs campaign number {n} this spring.")
    rebind_account_for_tests(world.account.id)
    assert _queries(carol, "/console/queue/") == few
