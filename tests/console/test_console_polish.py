"""What a curator and a subject notice (issue 17, item 6): reason codes read as
sentences, "About me" grouped with a filter and the reason box on demand, contested items
without a consent line, one message per action, an honest redaction confirmation, and the
Account's activity at a glance."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge import lifecycle, services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge
from tests.console.builders import HX, active, contested, held, provisional, reread

pytestmark = pytest.mark.django_db


def _text(html: str) -> str:
    """What a reader sees: the HTML without tags and attributes."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


# --- reason codes as sentences ------------------------------------------------------------

def test_every_reason_code_of_the_contract_has_a_sentence():
    codes = {r for s in lifecycle.STATES.values() for r in s.reasons}
    assert codes <= set(lifecycle.REASON_SENTENCES)
    for code in lifecycle.REASON_SENTENCES:
        sentence = lifecycle.reason_sentence(code)
        assert sentence.endswith(".") and "f4_" not in sentence and "_" not in sentence
    # An unknown code still reads as words, never as the bare code.
    assert lifecycle.reason_sentence("f4_some_new_reason") == "Some new reason."
    assert lifecycle.reason_sentence("") == ""


def test_the_queue_says_why_an_item_is_held_in_words(carol, world):
    item = held(world, "The social team posts every Tuesday.")
    html = carol.get("/console/queue/").content.decode()
    assert item.statement in html
    assert ('<a class="reason" href="/console/lifecycle/#f4_scope_hold">'
            + lifecycle.REASON_SENTENCES["f4_scope_hold"] + "</a>") in html
    assert "f4_scope_hold" not in _text(html)


def test_the_lifecycle_page_lists_the_reason_codes_with_anchors(carol):
    html = carol.get("/console/lifecycle/").content.decode()
    assert '<tr id="f4_scope_hold">' in html
    assert lifecycle.REASON_SENTENCES["f4_subject_redacted"] in html


# --- contested items ----------------------------------------------------------------------

def test_a_contested_item_shows_the_dispute_not_a_consent_line(carol, world):
    disputed = contested(world)
    waiting = held(world, "The social team posts every Tuesday.")
    html = carol.get("/console/queue/").content.decode()
    rows = {m.group(1): m.group(0) for m in re.finditer(
        r'<li id="q-([0-9a-f-]+)" class="queue-item card".*?</li>', html, flags=re.S)}
    assert "I drink coffee, never tea." in rows[str(disputed.pk)]
    assert "Consent" not in rows[str(disputed.pk)]
    assert "not part of a dispute" not in html
    assert "<dt>Consent</dt>" in rows[str(waiting.pk)]  # held items keep theirs


# --- one message per action ---------------------------------------------------------------

def test_an_inline_decision_says_its_outcome_once(carol, world):
    item = held(world, "The social team posts every Tuesday.")
    r = carol.post(f"/console/queue/{item.pk}/approve/", {"note": ""}, **HX)
    html = r.content.decode()
    assert r.status_code == 200
    assert html.count("Approved: the statement is now active and searchable.") == 1
    # The out-of-band flash is still sent, empty, so an earlier message is cleared.
    flash = re.search(r'<div hx-swap-oob="innerHTML:#flash">(.*?)</div>', html, flags=re.S)
    assert flash is not None and flash.group(1).strip() == ""


def test_a_refused_decision_says_why_once(carol, world):
    item = held(world, "The social team posts every Tuesday.")
    carol.post(f"/console/queue/{item.pk}/approve/", {"note": ""}, **HX)
    r = carol.post(f"/console/queue/{item.pk}/approve/", {"note": ""}, **HX)
    html = r.content.decode()
    assert r.status_code == 409
    errors = re.findall(r'class="flash flash-error"', html)
    assert len(errors) == 1


def test_self_governance_and_answers_say_their_outcome_once(alice, world):
    from governance.models import PeerQuestion

    fact = provisional(world, "Alice leads the design team.", subject=world.subject)
    r = alice.post(f"/console/me/knowledge/{fact.pk}/confirm/", {}, **HX)
    assert r.status_code == 200
    assert r.content.decode().count("Confirmed: the statement is active again.") == 1
    other = provisional(world, "Alice is moving to Lisbon.", subject=world.subject)
    question = PeerQuestion.objects.get(knowledge=other, status="open")
    r = alice.post(f"/console/me/questions/{question.pk}/answer/", {"answer": "yes"}, **HX)
    assert r.status_code == 200
    assert r.content.decode().count("Thank you: the statement is confirmed.") == 1


# --- redaction ----------------------------------------------------------------------------

def test_the_redaction_confirmation_says_curators_still_see_it(alice, world):
    fact = active(world, "Alice has asthma.", subject=world.subject, sensitivity="personal")
    html = alice.post(f"/console/me/knowledge/{fact.pk}/redact/", {"reason": "private"},
                      **HX).content.decode()
    # The contract: a redacted row is visible to its subject, curators and administrators,
    # never to other members, and nothing searches it.
    visible = lifecycle.STATES["redacted"].visibility
    assert (visible.member, visible.curator, visible.admin) == (False, True, True)
    text = _text(html)
    assert "curators and administrators still see it, with your reason" in text
    assert "other members no longer see it" in text
    assert "Only the record that you redacted it remains" not in text
    r = alice.post(f"/console/me/knowledge/{fact.pk}/redact/",
                   {"reason": "private", "confirmed": "yes"}, **HX)
    assert "Curators and administrators can still see it" in r.content.decode()
    assert reread(world, fact).state == "redacted"


# --- About me: grouped, filtered, the reason box on demand ------------------------------------

@pytest.fixture
def alice_statements(world):
    team = services.scope_ensure(account_id=world.account.id, path="/design")
    return {
        "active_social": active(world, "Alice leads the design team.", subject=world.subject),
        "active_design": active(world, "Alice sketches on paper first.", subject=world.subject,
                                scope=team),
        "provisional": provisional(world, "Alice is moving to Lisbon.", subject=world.subject),
        "contested": contested(world),
    }


def test_about_me_puts_questions_first_then_groups_by_state_and_scope(alice, alice_statements):
    html = alice.get("/console/me/").content.decode()
    questions = html.index('id="questions-title"')
    statements = html.index('id="about-title"')
    assert questions < statements
    # What asks something of alice comes first: provisional, then contested, then active.
    order = [html.index(f'id="me-state-{s}"') for s in ("provisional", "contested", "active")]
    assert order == sorted(order) and order[0] > statements
    active_group = html[html.index('id="me-state-active"'):]
    assert active_group.index(">/design</a></h4>") < active_group.index(
        ">/marketing/social</a></h4>")
    assert active_group.index(alice_statements["active_design"].statement) < active_group.index(
        alice_statements["active_social"].statement)


def test_about_me_filters_by_state_and_scope(alice, alice_statements):
    page = alice.get("/console/me/?state=active&scope=/design").content.decode()
    html = page[page.index('<div id="me-statements">'):]  # not the questions above
    assert alice_statements["active_design"].statement in html
    assert alice_statements["active_social"].statement not in html
    assert alice_statements["provisional"].statement not in html
    assert '<option value="active" selected>' in page
    # The filter's choices are alice's own states and scopes, with counts.
    assert '<option value="provisional">provisional (1)</option>' in page
    assert '<option value="/design" selected>/design (1)</option>' in page
    # An HTMX filter swaps only the statements.
    r = alice.get("/console/me/?state=contested", HTTP_HX_TARGET="me-statements", **HX)
    part = r.content.decode()
    assert part.lstrip().startswith('<div id="me-statements">') and "<html" not in part
    assert alice_statements["contested"].statement in part
    assert alice_statements["active_design"].statement not in part
    empty = alice.get("/console/me/?state=expired").content.decode()
    assert "Nothing about you in state expired" in empty
    r = alice.get("/console/me/?state=bogus")
    assert r.status_code == 400 and "is not a lifecycle state" in r.content.decode()


def test_the_reason_box_opens_on_demand_without_inline_script(alice, alice_statements):
    html = alice.get("/console/me/").content.decode()
    item = alice_statements["active_social"]
    row = re.search(rf'<li id="me-{item.pk}".*?\n</li>', html, flags=re.S).group(0)
    # Confirm needs no reason; contest and redact sit in a closed <details>.
    assert re.search(r'<details class="dispute-box">\s*<summary>Contest or redact…</summary>',
                     row)
    assert row.index('<details class="dispute-box">') < row.index('name="reason"')
    assert "onclick" not in html and "<script>" not in html
    # After a refused contest the box comes back open with the error.
    r = alice.post(f"/console/me/knowledge/{item.pk}/contest/", {"reason": " "}, **HX)
    assert '<details class="dispute-box" open>' in r.content.decode()


# --- the Account's activity at a glance -------------------------------------------------------

def test_curators_see_the_accounts_activity(carol, bob, world):
    held(world, "The social team posts every Tuesday.")
    contested(world)
    stale = active(world, "Bob likes green tea.", subject=world.member)
    transition(stale, "needs_revalidation", actor="system:test", reason="f4_revalidation_due")
    transition(stale, "stale", actor="system:test", reason="f4_revalidation_confidence_decay")
    soon = active(world, "The spring offsite is in Porto.")
    later = active(world, "The summer offsite is in Faro.")
    Knowledge.objects.filter(pk=soon.pk).update(expires_at=timezone.now() + timedelta(days=2))
    Knowledge.objects.filter(pk=later.pk).update(expires_at=timezone.now() + timedelta(days=30))
    provisional(world, "Bob might move to Oslo.", subject=world.member)  # never counted

    def stats(html: str) -> dict[str, str]:
        panel = html[html.index('id="activity"'):]
        panel = panel[:panel.index("</section>")]
        return {_text(dt).strip(): dd for dt, dd in re.findall(
            r"<dt>(.*?)</dt><dd>(\d+)</dd>", panel, flags=re.S)}

    home = stats(carol.get("/console/").content.decode())
    assert home == {"Held": "1", "Contested": "1", "Needs revalidation": "0", "Stale": "1",
                    "Expiring within 7 days": "1"}
    queue = stats(carol.get("/console/queue/").content.decode())
    assert queue == {"Needs revalidation": "0", "Stale": "1", "Expiring within 7 days": "1"}
    assert 'id="activity"' not in bob.get("/console/").content.decode()  # members: none
