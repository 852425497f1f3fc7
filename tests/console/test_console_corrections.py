"""Corrections in the console: a curator edits or merges statements and settles
contradiction reviews, a subject corrects their own statement, and the item page walks
the supersession chain - all through the governance services, refused to anyone else."""

from __future__ import annotations

import json

import pytest

from governance import services as gov_services
from governance.models import Validation
from knowledge.models import Knowledge, LifecycleEvent, Relation
from memhouse.core.tenancy import rebind_account_for_tests
from tests.console.builders import HX, active, contradicted, provisional, reread

pytestmark = pytest.mark.django_db


def _newest(world, **filters):
    rebind_account_for_tests(world.account.id)
    return Knowledge.objects.filter(**filters).latest("inserted_at")


# --- curator edit -------------------------------------------------------------------------

def test_the_item_page_offers_the_edit_form_to_curators_only(alice, bob, carol, world):
    item = active(world, "The social team posts every Tuesday.")
    html = carol.get(f"/console/knowledge/{item.pk}/").content.decode()
    assert 'id="edit-title"' in html and f'action="/console/knowledge/{item.pk}/edit/"' in html
    for client in (alice, bob):
        html = client.get(f"/console/knowledge/{item.pk}/").content.decode()
        assert 'id="edit-title"' not in html


def test_a_curators_edit_supersedes_the_old_row(carol, world):
    item = active(world, "The social team posts every Tuesday.",
                  excerpt="scribe: we post on Tuesdays")
    r = carol.post(f"/console/knowledge/{item.pk}/edit/",
                   {"statement": "The social team posts every Wednesday.",
                    "note": "moved in March"})
    assert r.status_code == 303
    new = _newest(world, supersedes=item)
    assert r["Location"] == f"/console/knowledge/{new.pk}/"
    assert (new.statement, new.state, new.state_reason) == (
        "The social team posts every Wednesday.", "active", "f4_curator_edited")
    assert [s.excerpt for s in new.sources.all()] == ["scribe: we post on Tuesdays"]
    old = reread(world, item)
    assert (old.state, old.state_reason) == ("superseded", "f4_curator_edit")
    assert Relation.objects.filter(source=new, target=old, type="supersedes").exists()
    event = LifecycleEvent.objects.filter(knowledge=old).latest("created_at")
    assert event.actor == "peer:carol" and event.evidence["note"] == "moved in March"
    page = carol.get(r["Location"]).content.decode()
    assert "Edited: the corrected statement is active" in page
    assert 'id="supersedes"' in page and item.statement in page


def test_an_htmx_edit_redirects_the_browser(carol, world):
    item = active(world, "The social team posts every Tuesday.")
    r = carol.post(f"/console/knowledge/{item.pk}/edit/",
                   {"statement": "The social team posts every Friday."}, **HX)
    assert r.status_code == 200
    new = _newest(world, supersedes=item)
    assert r["HX-Redirect"] == f"/console/knowledge/{new.pk}/"


def test_a_refused_edit_is_explained_on_the_page_with_the_text_kept(carol, world):
    item = active(world, "The social team posts every Tuesday.")
    r = carol.post(f"/console/knowledge/{item.pk}/edit/",
                   {"statement": "  The social team posts every Tuesday. ", "note": "n"})
    html = r.content.decode()
    assert r.status_code == 400 and "the statement is unchanged" in html
    assert 'role="alert"' in html and 'id="edit-statement"' in html
    r = carol.post(f"/console/knowledge/{item.pk}/edit/", {"statement": ""})
    assert r.status_code == 400 and "Corrected statement: This field is required." in (
        r.content.decode())
    r = carol.post(f"/console/knowledge/{item.pk}/edit/", {"statement": "x" * 2001})
    assert r.status_code == 400 and "at most 2000 characters" in r.content.decode()
    assert reread(world, item).state == "active"
    assert not Knowledge.objects.filter(supersedes=item).exists()


def test_a_superseded_statement_cannot_be_edited_again(carol, world):
    item = active(world, "The social team posts every Tuesday.")
    gov_services.knowledge_edit(item=item, actor=world.curator,
                                statement="The social team posts every Monday.")
    html = carol.get(f"/console/knowledge/{item.pk}/").content.decode()
    assert 'id="edit-title"' not in html  # no form on history
    r = carol.post(f"/console/knowledge/{item.pk}/edit/", {"statement": "Another day."})
    assert r.status_code == 409 and "a superseded statement cannot be corrected" in (
        r.content.decode())


@pytest.mark.parametrize("persona", ["alice", "bob"])
def test_non_curators_cannot_edit(request, persona, world):
    client = request.getfixturevalue(persona)
    item = active(world, "Alice leads the design team.", subject=world.subject)
    r = client.post(f"/console/knowledge/{item.pk}/edit/", {"statement": "Alice left."})
    assert r.status_code == 403 and "Only curators may edit a statement" in r.content.decode()
    assert reread(world, item).state == "active"


def test_curators_never_edit_another_subjects_provisional_row(carol, world):
    item = provisional(world, "Bob might move to Oslo.", subject=world.member)
    r = carol.post(f"/console/knowledge/{item.pk}/edit/", {"statement": "Bob moved."})
    assert r.status_code == 404
    assert reread(world, item).state == "provisional"


def test_an_outsider_curator_cannot_edit_across_accounts(world, outsider_curator):
    rebind_account_for_tests(world.account.id)
    item = active(world, "The social team posts every Tuesday.")
    rebind_account_for_tests(None)
    r = outsider_curator.post(f"/console/knowledge/{item.pk}/edit/", {"statement": "Nope."})
    assert r.status_code == 404
    assert reread(world, item).state == "active"


def test_the_csrf_token_is_required(world):
    from tests.console.builders import client_for

    item = active(world, "The social team posts every Tuesday.")
    client = client_for(world.curator, enforce_csrf_checks=True)
    r = client.post(f"/console/knowledge/{item.pk}/edit/", {"statement": "Changed."})
    assert r.status_code == 403
    assert reread(world, item).state == "active"


# --- curator merge --------------------------------------------------------------------------

@pytest.fixture
def pair(world):
    return (active(world, "Alice likes green tea.", subject=world.subject,
                   excerpt="scribe: Alice ordered green tea"),
            active(world, "Alice enjoys green tea in the morning.", subject=world.subject,
                   excerpt="scribe: Alice has tea every morning"))


def test_the_browser_offers_merge_checkboxes_to_curators(carol, bob, world, pair):
    html = carol.get("/console/scopes/marketing/social/").content.decode()
    assert 'id="merge-form"' in html and f'id="merge-{pair[0].pk}"' in html
    html = bob.get("/console/scopes/marketing/social/").content.decode()
    assert 'id="merge-form"' not in html and f'id="merge-{pair[0].pk}"' not in html


def test_merge_asks_for_confirmation_then_merges(carol, world, pair):
    ids = [str(pair[0].pk), str(pair[1].pk)]
    r = carol.post("/console/knowledge/merge/", {"ids": ids,
                                                 "next": "/console/scopes/marketing/social/"})
    html = r.content.decode()
    assert r.status_code == 200 and "Merge 2 statements about Alice into one?" in html
    assert 'name="confirmed" value="yes"' in html and pair[1].statement in html
    assert reread(world, pair[0]).state == "active"  # nothing merged yet
    r = carol.post("/console/knowledge/merge/", {
        "ids": ids, "confirmed": "yes", "statement": "Alice drinks green tea every morning.",
        "note": "duplicates"})
    assert r.status_code == 303
    new = _newest(world, supersedes=pair[0])
    assert r["Location"] == f"/console/knowledge/{new.pk}/"
    assert (new.statement, new.state) == ("Alice drinks green tea every morning.", "active")
    assert sorted(s.excerpt for s in new.sources.all()) == [
        "scribe: Alice has tea every morning", "scribe: Alice ordered green tea"]
    for original in pair:
        old = reread(world, original)
        assert (old.state, old.state_reason) == ("superseded", "f4_curator_merge")
    page = carol.get(r["Location"]).content.decode()
    assert "Merged 2 statements into one" in page
    assert pair[0].statement in page and pair[1].statement in page  # both in the chain


def test_merge_refusals_in_words(carol, world, pair):
    r = carol.post("/console/knowledge/merge/", {"ids": [str(pair[0].pk)],
                                                 "next": "/console/scopes/"})
    assert r.status_code == 303 and r["Location"] == "/console/scopes/"
    assert "Choose 2 to 20 statements to merge." in carol.get("/console/scopes/",
                                                             follow=True).content.decode()
    rebind_account_for_tests(world.account.id)
    bobs = active(world, "Bob likes green tea.", subject=world.member)
    r = carol.post("/console/knowledge/merge/", {"ids": [str(pair[0].pk), str(bobs.pk)],
                                                 "confirmed": "yes"})
    assert r.status_code == 400
    assert "merged statements must share one subject and one scope" in r.content.decode()
    assert reread(world, pair[0]).state == "active" and reread(world, bobs).state == "active"


def test_non_curators_cannot_merge_and_hidden_rows_are_not_found(alice, carol, world, pair):
    ids = [str(pair[0].pk), str(pair[1].pk)]
    r = alice.post("/console/knowledge/merge/", {"ids": ids, "confirmed": "yes"})
    assert r.status_code == 403
    rebind_account_for_tests(world.account.id)
    hidden = provisional(world, "Alice is moving to Lisbon.", subject=world.subject)
    r = carol.post("/console/knowledge/merge/", {"ids": [str(pair[0].pk), str(hidden.pk)],
                                                 "confirmed": "yes"})
    assert r.status_code == 404
    assert reread(world, pair[0]).state == "active"
    assert reread(world, hidden).state == "provisional"


# --- contradiction reviews ------------------------------------------------------------------

def test_the_queue_shows_a_visible_contradicting_claim(carol, world):
    newer = active(world, "The social team now posts on Fridays.")
    old = contradicted(world, "The social team posts on Tuesdays.", newer)
    html = carol.get("/console/queue/").content.decode()
    assert old.statement in html and "Contradicted by a newer claim" in html
    assert "A newer claim from someone else contradicts it." in html  # the reason, in words
    assert "f4_update_contradicted</" not in html
    assert newer.statement in html
    assert f'formaction="/console/queue/{old.pk}/contradiction/"' in html
    assert ">Keep</button>" in html and ">Retire</button>" in html
    assert 'id="queue-count"' in html and ">1<" in html
    html = carol.get("/console/queue/?state=contradiction").content.decode()
    assert old.statement in html


def test_a_provisional_contradicting_claim_stays_hidden_from_curators(carol, world):
    newer = provisional(world, "Alice moved to Porto.", subject=world.subject)
    old = contradicted(world, "Alice lives in Lisbon.", newer)
    html = carol.get("/console/queue/").content.decode()
    assert old.statement in html
    assert newer.statement not in html
    assert "contradicted by a newer claim awaiting its subject's confirmation" in html
    assert str(newer.pk) not in html  # not even its id (the review's note names it)


def test_the_subject_sees_their_own_contradicting_claim_on_the_item_page(alice, carol, world):
    newer = provisional(world, "Alice moved to Porto.", subject=world.subject)
    old = contradicted(world, "Alice lives in Lisbon.", newer)
    assert newer.statement in alice.get(f"/console/knowledge/{old.pk}/").content.decode()
    html = carol.get(f"/console/knowledge/{old.pk}/").content.decode()
    assert newer.statement not in html and "Decide in the curator queue" in html


@pytest.mark.parametrize(("outcome", "state", "resolution"), [
    ("keep", "active", "contradiction_keep"),
    ("retire", "superseded", "contradiction_retire"),
])
def test_settling_a_contradiction(carol, world, outcome, state, resolution):
    newer = active(world, "The social team now posts on Fridays.")
    old = contradicted(world, "The social team posts on Tuesdays.", newer)
    r = carol.post(f"/console/queue/{old.pk}/contradiction/",
                   {"outcome": outcome, "note": "asked the team"}, **HX)
    html = r.content.decode()
    assert r.status_code == 200 and html.lstrip().startswith(f'<li id="q-{old.pk}"')
    assert ("Kept" if outcome == "keep" else "Retired") in html
    assert 'id="queue-count" class="count" hx-swap-oob="true"' in html
    detail = json.loads(r["HX-Trigger"])["queue-changed"]
    assert detail["decision"] == f"contradiction_{'kept' if outcome == 'keep' else 'retired'}"
    old = reread(world, old)
    assert old.state == state
    review = Validation.objects.get(knowledge=old, kind="contradiction")
    assert (review.status, review.resolution) == ("resolved", resolution)


def test_settling_needs_an_outcome_and_an_open_review(carol, world):
    newer = active(world, "The social team now posts on Fridays.")
    old = contradicted(world, "The social team posts on Tuesdays.", newer)
    r = carol.post(f"/console/queue/{old.pk}/contradiction/", {}, **HX)
    assert r.status_code == 400 and "Outcome: This field is required." in r.content.decode()
    r = carol.post(f"/console/queue/{newer.pk}/contradiction/", {"outcome": "keep"}, **HX)
    assert r.status_code == 409
    assert "this statement has no open contradiction review" in r.content.decode()


@pytest.mark.parametrize("persona", ["alice", "bob"])
def test_non_curators_cannot_settle_a_contradiction(request, persona, world):
    client = request.getfixturevalue(persona)
    newer = active(world, "The social team now posts on Fridays.")
    old = contradicted(world, "The social team posts on Tuesdays.", newer)
    r = client.post(f"/console/queue/{old.pk}/contradiction/", {"outcome": "retire"})
    assert r.status_code == 403
    assert reread(world, old).state == "active"


# --- subject correction ---------------------------------------------------------------------

def test_my_statements_offer_a_correction(alice, world):
    item = active(world, "Alice lives in Lisbon.", subject=world.subject)
    html = alice.get("/console/me/").content.decode()
    assert f'action="/console/me/knowledge/{item.pk}/correct/"' in html
    assert "What is true now" in html


def test_a_subject_corrects_their_statement(alice, world):
    item = active(world, "Alice lives in Lisbon.", subject=world.subject)
    r = alice.post(f"/console/me/knowledge/{item.pk}/correct/",
                   {"statement": "Alice lives in Porto.", "reason": "I moved in May."}, **HX)
    html = r.content.decode()
    assert r.status_code == 200
    new = _newest(world, supersedes=item)
    # The new row replaces mine in place, followed by the superseded one.
    assert html.lstrip().startswith(f'<li id="me-{new.pk}"') and f'id="me-{item.pk}"' in html
    assert "Corrected: the new statement is in use" in html
    assert json.loads(r["HX-Trigger"])["me-changed"]["new"] == str(new.pk)
    assert (new.statement, new.state, new.state_reason) == (
        "Alice lives in Porto.", "active", "f4_subject_corrected")
    old = reread(world, item)
    assert (old.state, old.state_reason) == ("superseded", "f4_subject_correction")
    event = LifecycleEvent.objects.filter(knowledge=old).latest("created_at")
    assert event.actor == "peer:alice" and event.evidence["note"] == "I moved in May."


def test_a_correction_without_js_redirects(alice, world):
    item = active(world, "Alice lives in Lisbon.", subject=world.subject)
    r = alice.post(f"/console/me/knowledge/{item.pk}/correct/",
                   {"statement": "Alice lives in Faro."})
    assert r.status_code == 303 and r["Location"] == "/console/me/"
    assert reread(world, item).state == "superseded"
    assert "Corrected: the new statement is in use" in alice.get("/console/me/").content.decode()


def test_a_refused_correction_keeps_the_text(alice, world):
    item = active(world, "Alice lives in Lisbon.", subject=world.subject)
    r = alice.post(f"/console/me/knowledge/{item.pk}/correct/",
                   {"statement": "Alice lives in Lisbon.", "reason": "typo"}, **HX)
    html = r.content.decode()
    assert r.status_code == 400 and "the statement is unchanged" in html
    assert "<details class=\"correct\" open>" in html and ">typo</textarea>" in html
    assert reread(world, item).state == "active"


@pytest.mark.parametrize("persona", ["bob", "carol"])
def test_another_person_cannot_correct_my_statement(request, persona, world):
    client = request.getfixturevalue(persona)  # another member, and even a curator
    item = active(world, "Alice lives in Lisbon.", subject=world.subject)
    r = client.post(f"/console/me/knowledge/{item.pk}/correct/", {"statement": "Alice left."})
    assert r.status_code == 404
    assert reread(world, item).state == "active"
    assert not Knowledge.objects.filter(supersedes=item).exists()


def test_an_outsider_cannot_correct_across_accounts(world, mallory):
    rebind_account_for_tests(world.account.id)
    item = active(world, "Alice lives in Lisbon.", subject=world.subject)
    rebind_account_for_tests(None)
    r = mallory.post(f"/console/me/knowledge/{item.pk}/correct/", {"statement": "No."})
    assert r.status_code == 404
    assert reread(world, item).state == "active"


# --- the supersession chain -----------------------------------------------------------------

def test_the_item_page_walks_the_chain_both_ways(carol, world):
    first = active(world, "The social team posts on Mondays.")
    second = gov_services.knowledge_edit(item=first, actor=world.curator,
                                         statement="The social team posts on Tuesdays.")
    third = gov_services.knowledge_edit(item=second, actor=world.curator,
                                        statement="The social team posts on Wednesdays.")
    html = carol.get(f"/console/knowledge/{second.pk}/").content.decode()
    assert 'id="supersedes"' in html and 'id="superseded-by"' in html
    older = html.split('id="supersedes"')[1]
    newer = html.split('id="superseded-by"')[1].split('id="supersedes"')[0]
    assert first.statement in older and "f4_curator_edit" in older
    assert third.statement in newer and "f4_curator_edited" in newer
    html = carol.get(f"/console/knowledge/{third.pk}/").content.decode()
    older = html.split('id="supersedes"')[1]
    assert second.statement in older and first.statement in older and "2 steps:" in older
    assert 'id="superseded-by"' not in html


def test_the_chain_respects_visibility(bob, alice, world):
    mine = active(world, "Alice has asthma.", subject=world.subject, sensitivity="personal")
    new = gov_services.knowledge_correct(item=mine, actor=world.subject,
                                         statement="Alice had asthma as a child.")
    # Bob may not see personal statements about Alice at all.
    assert bob.get(f"/console/knowledge/{new.pk}/").status_code == 404
    html = alice.get(f"/console/knowledge/{new.pk}/").content.decode()
    assert mine.statement in html.split('id="supersedes"')[1]


def test_a_hidden_link_is_a_placeholder_and_the_walk_stops(carol, world):
    hidden = provisional(world, "Alice might move to Lisbon.", subject=world.subject)
    middle = active(world, "Alice moved to Lisbon.", subject=world.subject)
    top = gov_services.knowledge_edit(item=middle, actor=world.curator,
                                      statement="Alice moved to Lisbon in May.")
    Relation.objects.create(account_id=world.account.id, source=middle, target=hidden,
                            type="supersedes")
    html = carol.get(f"/console/knowledge/{top.pk}/").content.decode()
    older = html.split('id="supersedes"')[1]
    assert middle.statement in older and "a statement you may not see" in older
    assert hidden.statement not in html


def test_the_chain_is_bounded(carol, world, monkeypatch):
    monkeypatch.setattr("console.selectors.CHAIN_HOPS", 2)
    item = active(world, "Version 0 of the posting plan.")
    versions = [item]
    for n in range(1, 5):
        versions.append(gov_services.knowledge_edit(
            item=versions[-1], actor=world.curator, statement=f"Version {n} of the posting plan."))
    html = carol.get(f"/console/knowledge/{versions[-1].pk}/").content.decode()
    older = html.split('id="supersedes"')[1]
    assert "Version 3" in older and "Version 2" in older and "Version 1" not in older
    assert "older statements beyond 2 steps" in older
