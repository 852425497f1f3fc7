"""Subject screens: everything about me, self-governance with reasons, and answering
peer questions and consent requests - all through the governance services."""

from __future__ import annotations

import json

import pytest

from governance import services as gov_services
from governance.models import PeerQuestion, Validation
from knowledge.models import LifecycleEvent
from memhouse.core.tenancy import rebind_account_for_tests
from tests.console.builders import HX, active, held, provisional, reread

pytestmark = pytest.mark.django_db


@pytest.fixture
def mine(world):
    return {
        "active": active(world, "Alice loves hiking in the Alps.", subject=world.subject,
                         sensitivity="personal"),
        "provisional": provisional(world, "Alice is moving to Lisbon.", subject=world.subject),
        "bob": active(world, "Bob enjoys hiking on weekends.", subject=world.member),
        "bob_provisional": provisional(world, "Bob might move to Oslo.", subject=world.member),
        "scope": held(world, "The social team posts every Tuesday."),
    }


def test_me_lists_everything_about_me_with_badges_and_questions(alice, mine):
    html = alice.get("/console/me/").content.decode()
    assert mine["active"].statement in html and mine["provisional"].statement in html
    assert 'href="/console/lifecycle/#active"' in html
    assert 'href="/console/lifecycle/#provisional"' in html
    assert "Is this right about you?" in html  # the confirmation question
    assert 'id="question-count"' in html and "1 open question" in html
    # Nothing about anyone else, not even in the same scope.
    assert mine["bob"].statement not in html and mine["bob_provisional"].statement not in html
    assert mine["scope"].statement not in html


def test_each_person_sees_only_their_own(bob, mine):
    html = bob.get("/console/me/").content.decode()
    assert mine["bob"].statement in html and mine["bob_provisional"].statement in html
    assert mine["active"].statement not in html


def test_confirming_a_provisional_statement(alice, world, mine):
    item = mine["provisional"]
    r = alice.post(f"/console/me/knowledge/{item.pk}/confirm/", **HX)
    html = r.content.decode()
    assert r.status_code == 200 and "Confirmed" in html
    assert 'id="question-count" class="count count-zero" hx-swap-oob="true"' in html
    assert json.loads(r["HX-Trigger"])["me-changed"]["state"] == "active"
    item = reread(world, item)
    assert (item.state, item.state_reason) == ("active", "f4_subject_confirmed")
    assert PeerQuestion.objects.get(knowledge=item).status == "expired"


def test_contesting_needs_a_reason_in_words(alice, world, mine):
    item = mine["active"]
    r = alice.post(f"/console/me/knowledge/{item.pk}/contest/", {"reason": "  "}, **HX)
    assert r.status_code == 400 and "say why (a non-empty reason)" in r.content.decode()
    assert reread(world, item).state == "active"
    r = alice.post(f"/console/me/knowledge/{item.pk}/contest/",
                   {"reason": "I have never been to the Alps."}, **HX)
    assert r.status_code == 200 and "a curator will review your dispute" in r.content.decode()
    item = reread(world, item)
    assert item.state == "contested"
    dispute = Validation.objects.get(knowledge=item, kind="dispute")
    assert dispute.note == "I have never been to the Alps." and dispute.status == "open"


def test_redacting_asks_for_confirmation_then_withdraws(alice, world, mine):
    item = mine["active"]
    r = alice.post(f"/console/me/knowledge/{item.pk}/redact/", {"reason": "too personal"}, **HX)
    html = r.content.decode()
    assert r.status_code == 200 and "Redact this statement?" in html
    assert 'name="confirmed" value="yes"' in html and 'value="too personal"' in html
    assert reread(world, item).state == "active"
    r = alice.post(f"/console/me/knowledge/{item.pk}/redact/",
                   {"reason": "too personal", "confirmed": "yes"}, **HX)
    assert r.status_code == 200 and "Redacted" in r.content.decode()
    item = reread(world, item)
    assert (item.state, item.state_reason) == ("redacted", "f4_subject_redacted")
    event = LifecycleEvent.objects.filter(knowledge=item).latest("created_at")
    assert event.actor == "peer:alice" and event.evidence == {"reason": "too personal"}


def test_redacting_without_js_uses_a_confirmation_page(alice, world, mine):
    item = mine["active"]
    r = alice.post(f"/console/me/knowledge/{item.pk}/redact/", {"reason": ""})
    assert r.status_code == 200 and "<h1>Redact a statement</h1>" in r.content.decode()
    r = alice.post(f"/console/me/knowledge/{item.pk}/redact/", {"confirmed": "yes"})
    assert r.status_code == 303 and r["Location"] == "/console/me/"
    assert reread(world, item).state == "redacted"
    assert "Redacted: the statement is withdrawn" in alice.get("/console/me/").content.decode()


def test_a_redacted_statement_offers_no_more_actions(alice, world, mine):
    item = mine["active"]
    gov_services.knowledge_redact(item=item, actor=world.subject, reason="")
    html = alice.get("/console/me/").content.decode()
    assert "Nothing to do: a redacted statement is history." in html
    r = alice.post(f"/console/me/knowledge/{item.pk}/contest/", {"reason": "x"}, **HX)
    assert r.status_code == 409 and "a redacted statement cannot be contested" in (
        r.content.decode())


@pytest.mark.parametrize("action", ["confirm", "deny", "contest", "redact"])
def test_nobody_else_can_govern_my_statements(bob, carol, world, mine, action):
    for client in (bob, carol):  # another member, and even a curator
        r = client.post(f"/console/me/knowledge/{mine['provisional'].pk}/{action}/",
                        {"reason": "not yours", "confirmed": "yes"})
        assert r.status_code == 404
    assert reread(world, mine["provisional"]).state == "provisional"


def test_saying_not_true_withdraws_only_what_waits_for_me(alice, world, mine):
    r = alice.post(f"/console/me/knowledge/{mine['active'].pk}/deny/", **HX)
    assert r.status_code == 409 and "contest it instead" in r.content.decode()
    assert reread(world, mine["active"]).state == "active"
    r = alice.post(f"/console/me/knowledge/{mine['provisional'].pk}/deny/", **HX)
    assert r.status_code == 200 and "Withdrawn: you said it is not true" in r.content.decode()
    item = reread(world, mine["provisional"])
    assert (item.state, item.state_reason) == ("retracted", "f4_subject_denied")


def test_an_outsider_cannot_govern_across_accounts(world, mine, mallory):
    r = mallory.post(f"/console/me/knowledge/{mine['active'].pk}/redact/", {"confirmed": "yes"})
    assert r.status_code == 404
    r = mallory.post(f"/console/me/knowledge/{mine['provisional'].pk}/deny/")
    assert r.status_code == 404
    assert reread(world, mine["provisional"]).state == "provisional"
    assert reread(world, mine["active"]).state == "active"
    rebind_account_for_tests(None)
    assert "Alice" not in mallory.get("/console/me/").content.decode().split("<main")[1]


def test_answering_a_confirmation_question(alice, world, mine):
    q = PeerQuestion.objects.get(knowledge=mine["provisional"])
    r = alice.post(f"/console/me/questions/{q.pk}/answer/", {"answer": "no"}, **HX)
    html = r.content.decode()
    assert r.status_code == 200 and "the statement is withdrawn" in html
    assert 'href="/console/lifecycle/#retracted"' in html
    assert reread(world, mine["provisional"]).state == "retracted"
    r = alice.post(f"/console/me/questions/{q.pk}/answer/", {"answer": "yes"}, **HX)
    assert r.status_code == 409 and "already answered" in r.content.decode()


def test_an_invalid_answer_is_refused_in_words(alice, mine):
    q = PeerQuestion.objects.get(knowledge=mine["provisional"])
    r = alice.post(f"/console/me/questions/{q.pk}/answer/", {"answer": "maybe"}, **HX)
    assert r.status_code == 400 and "answer yes or no" in r.content.decode()


def test_consent_requests_are_answered_by_the_subject_only(alice, bob, world, mine):
    gov_services.knowledge_promote(item=mine["active"], actor=world.curator, level="account")
    html = alice.get("/console/me/").content.decode()
    assert "May we share this about you with everyone in the Account?" in html
    assert "I consent" in html and "I decline" in html
    q = PeerQuestion.objects.get(knowledge=mine["active"], kind="consent")
    assert bob.post(f"/console/me/questions/{q.pk}/answer/",
                    {"answer": "consent"}).status_code == 404
    r = alice.post(f"/console/me/questions/{q.pk}/answer/", {"answer": "consent"})
    assert r.status_code == 303
    consent = Validation.objects.get(knowledge=mine["active"], kind="consent")
    assert (consent.status, consent.resolution) == ("resolved", "consented")
    assert reread(world, mine["active"]).state == "held"  # the curator still decides


def test_the_me_page_does_not_query_per_row(alice, world, mine):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def count():
        with CaptureQueriesContext(connection) as ctx:
            assert alice.get("/console/me/").status_code == 200
        return len(ctx.captured_queries)

    few = count()
    for n in range(3):
        provisional(world, f"Alice visited museum number {n}.", subject=world.subject)
    assert count() == few
