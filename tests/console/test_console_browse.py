"""Knowledge browser, item page (lineage and lifecycle history) and the audit log."""

from __future__ import annotations

import pytest

from knowledge import audit, lifecycle, services
from knowledge.models import Relation
from memhouse.core.tenancy import rebind_account_for_tests
from tests.console.builders import HX, active, held, provisional

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus(world):
    marketing = services.scope_ensure(account_id=world.account.id, path="/marketing")
    paid = services.scope_ensure(account_id=world.account.id, path="/marketing/paid")
    return {
        "team": active(world, "The marketing team ships a newsletter every Friday.",
                       scope=marketing),
        "paid": active(world, "The paid ads budget is ten thousand euros.", scope=paid),
        "alice": active(world, "Alice leads the design team.", subject=world.subject),
        "alice_personal": active(world, "Alice has asthma.", subject=world.subject,
                                 sensitivity="personal"),
        "alice_provisional": provisional(world, "Alice is moving to Lisbon.",
                                         subject=world.subject),
        "held": held(world, "The social team posts every Tuesday."),
    }


def test_a_member_browses_what_a_read_at_the_scope_sees(bob, corpus):
    r = bob.get("/console/scopes/marketing/social/")
    html = r.content.decode()
    assert r.status_code == 200
    assert corpus["team"].statement in html  # an ancestor's knowledge flows down
    assert corpus["alice"].statement in html
    assert corpus["paid"].statement not in html  # never a sibling
    assert corpus["alice_personal"].statement not in html  # personal, about someone else
    assert corpus["alice_provisional"].statement not in html
    assert corpus["held"].statement not in html  # held is not member-visible
    assert 'href="/console/lifecycle/#active"' in html
    assert '<label for="id_q">' in html and "balanced retrieval profile" in html


def test_the_subject_and_the_curator_see_more(alice, carol, corpus):
    html = alice.get("/console/scopes/marketing/social/").content.decode()
    assert corpus["alice_personal"].statement in html
    assert corpus["alice_provisional"].statement in html  # her own provisional row
    html = carol.get("/console/scopes/marketing/social/").content.decode()
    assert corpus["held"].statement in html
    assert corpus["alice_provisional"].statement not in html  # never for a curator


def test_state_filters(carol, corpus):
    html = carol.get("/console/scopes/marketing/social/?state=held").content.decode()
    assert corpus["held"].statement in html and corpus["alice"].statement not in html
    html = carol.get("/console/scopes/marketing/social/?state=held&state=active"
                     ).content.decode()
    assert corpus["held"].statement in html and corpus["alice"].statement in html
    r = carol.get("/console/scopes/marketing/social/?state=bogus")
    assert r.status_code == 400 and "bogus is not one of the available choices" in (
        r.content.decode())


def test_search_uses_the_balanced_profile(bob, corpus):
    # Strategies run on their own connections, so this test's uncommitted rows are not
    # found (the end-to-end test searches committed data); the page reports the profile.
    r = bob.get("/console/scopes/marketing/social/?q=newsletter", **HX)
    html = r.content.decode()
    assert r.status_code == 200 and "<html" not in html
    assert "Search results for “newsletter”" in html and "Profile balanced (balanced-v5" in html


def test_the_knowledge_page_opens_where_the_statements_are(bob, world, corpus):
    # Nothing is anchored at "/": the page opens on the scope where a read sees the most
    # statements bob may see (/marketing/social: two of its own and /marketing's; paid:
    # one and /marketing's) instead of an empty "/ (0)".
    active(world, "The social team answers comments within a day.")
    r = bob.get("/console/scopes/")
    assert r.status_code == 302 and r["Location"] == "/console/scopes/marketing/social/"
    html = bob.get(r["Location"]).content.decode()
    assert "Knowledge at <code>/marketing/social</code>" in html
    assert corpus["alice"].statement in html
    # The scope tree says how many statements each scope holds for this reader.
    assert 'href="/console/scopes/marketing/paid/">paid</a> <span class="count-inline"' in html
    assert 'href="/console/scopes/marketing/social/" aria-current="page">social</a> ' \
           '<span class="count-inline" title="statements anchored here that you may see">2' in html
    # A filtered or searched root is shown as asked.
    root = bob.get("/console/scopes/?state=active").content.decode()
    assert "Knowledge at <code>/</code>" in root
    r = bob.get("/console/scopes/marketing/social")
    assert r.status_code == 200  # the trailing slash is optional


def test_the_root_opens_as_itself_when_it_holds_statements(bob, world, corpus):
    root = services.scope_ensure(account_id=world.account.id, path="/")
    active(world, "Everyone in the company gets Fridays off in August.", scope=root)
    html = bob.get("/console/scopes/").content.decode()
    assert "Knowledge at <code>/</code>" in html
    assert "Everyone in the company gets Fridays off in August." in html


def test_unknown_and_foreign_scopes_are_404(bob, world, mallory):
    rebind_account_for_tests(world.account.id)
    r = bob.get("/console/scopes/engineering/")
    assert r.status_code == 404 and "scope not found" in r.content.decode().lower()
    rebind_account_for_tests(None)
    # mallory's Account has /marketing but not /marketing/social.
    assert mallory.get("/console/scopes/marketing/").status_code == 200
    rebind_account_for_tests(None)
    assert mallory.get("/console/scopes/marketing/social/").status_code == 404


def test_the_item_page_shows_lineage_and_history(carol, world, corpus):
    item = corpus["team"]
    Relation.objects.create(account_id=world.account.id, source=item, target=corpus["alice"],
                            type="related", confidence=0.8)
    Relation.objects.create(account_id=world.account.id, source=corpus["alice_provisional"],
                            target=item, type="contradicts")
    r = carol.get(f"/console/knowledge/{item.pk}/")
    html = r.content.decode()
    assert r.status_code == 200
    assert "<h1" in html and item.statement in html
    assert "message from Scribe" in html and "Lineage" in html and "Lifecycle history" in html
    # Reason codes read as the lifecycle module's sentences, linked to the contract.
    assert ('<a class="reason" href="/console/lifecycle/#f4_pipeline_proposed">Extracted '
            'from a source and waiting for its first gate decision.</a>') in html
    assert lifecycle.reason_sentence("f4_gate_a_b_accepted") in html
    assert ">f4_gate_a_b_accepted<" not in html and "<code>f4_" not in html
    assert corpus["alice"].statement in html  # a visible related statement
    assert "a statement you may not see" in html  # the provisional end stays hidden
    assert corpus["alice_provisional"].statement not in html


def test_who_may_open_an_item(alice, bob, carol, corpus):
    prov = corpus["alice_provisional"].pk
    assert alice.get(f"/console/knowledge/{prov}/").status_code == 200
    assert bob.get(f"/console/knowledge/{prov}/").status_code == 404
    assert carol.get(f"/console/knowledge/{prov}/").status_code == 404
    personal = corpus["alice_personal"].pk
    assert bob.get(f"/console/knowledge/{personal}/").status_code == 404
    held_id = corpus["held"].pk
    assert bob.get(f"/console/knowledge/{held_id}/").status_code == 404
    r = carol.get(f"/console/knowledge/{held_id}/")
    assert r.status_code == 200 and "Decide in the curator queue" in r.content.decode()
    r = alice.get(f"/console/knowledge/{prov}/")
    assert "Confirm, contest, correct or redact" in r.content.decode()


def test_an_outsider_gets_404_for_another_accounts_item(corpus, mallory):
    r = mallory.get(f"/console/knowledge/{corpus['team'].pk}/")
    assert r.status_code == 404
    html = r.content.decode()
    assert "Knowledge not found." in html and "It does not exist, or it is not visible" in html


def test_the_audit_log_shows_entries_and_chain_verification(carol, world, corpus,
                                                            monkeypatch):
    monkeypatch.setattr("console.selectors.AUDIT_PAGE_SIZE", 10)
    r = carol.get("/console/audit/")
    html = r.content.decode()
    assert r.status_code == 200 and "Chain verified." in html
    assert "knowledge.transition" in html
    result = audit.verify(world.account.id)
    assert f"All {result.entries} entries" in html
    assert "Page 1 of" in html and 'href="?page=2"' in html
    second = carol.get("/console/audit/?page=2").content.decode()
    assert "Page 2 of" in second and "Chain verified." in second
    last = -(-result.entries // 10)
    oldest = carol.get(f"/console/audit/?page={last}").content.decode()
    assert "account.created" in oldest and ">1</td>" in oldest  # seq 1 is on the last page


def test_a_broken_chain_is_reported(carol, world, corpus, monkeypatch):
    from knowledge.audit import VerifyResult

    def broken(account_id, **kw):
        return VerifyResult(account_id, False, 3, 2, "x" * 64, 3,
                            "entry content does not match its hash")

    monkeypatch.setattr("knowledge.audit.verify", broken)
    html = carol.get("/console/audit/").content.decode()
    assert "Chain broken at entry #3:" in html and "does not match its hash" in html
    assert 'role="alert"' in html


def test_the_audit_page_shows_the_recorded_check_until_it_is_verified_again(carol, world,
                                                                            corpus):
    from django.db import connection

    from knowledge.models import AuditVerification

    first = carol.get("/console/audit/").content.decode()
    assert "Chain verified." in first and "(on demand)" in first
    assert AuditVerification.objects.filter(account=world.account).count() == 1
    # Later views read the record: they neither re-hash the chain nor add records.
    carol.get("/console/audit/")
    assert AuditVerification.objects.filter(account=world.account).count() == 1
    # New entries are reported as not yet covered by the recorded check.
    audit.append(account_id=world.account.id, event_type="test.event", actor="system:test")
    assert "1 entry was appended since" in carol.get("/console/audit/").content.decode()
    # Tampering is invisible until the chain is recomputed, then it is reported.
    with connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cur.execute("ALTER TABLE memhouse_audit_entry DISABLE TRIGGER audit_append_only")
        cur.execute("UPDATE memhouse_audit_entry SET actor = 'system:forged' "
                    "WHERE account_id = %s AND seq = 2", [world.account.id])
        cur.execute("ALTER TABLE memhouse_audit_entry ENABLE TRIGGER audit_append_only")
    assert "Chain verified." in carol.get("/console/audit/").content.decode()
    r = carol.post("/console/audit/verify/")
    assert r.status_code == 303 and r["Location"].endswith("/console/audit/")
    after = carol.get("/console/audit/").content.decode()
    assert "Chain broken at entry #2:" in after and "does not match its hash" in after
    assert AuditVerification.objects.filter(account=world.account, ok=False).count() == 1


@pytest.mark.parametrize("persona", ["alice", "bob", "mallory"])
def test_only_curators_and_admins_may_verify_the_audit_chain(request, persona, corpus):
    r = request.getfixturevalue(persona).post("/console/audit/verify/")
    assert r.status_code == 403


@pytest.mark.parametrize("persona", ["alice", "bob", "mallory"])
def test_only_curators_and_admins_see_the_audit_log(request, persona, corpus):
    r = request.getfixturevalue(persona).get("/console/audit/")
    assert r.status_code == 403 and "Only curators and administrators" in r.content.decode()


def test_an_admin_reads_like_a_curator_but_does_not_decide(world, corpus):
    from tests.console.builders import client_for

    admin = services.peer_create(account_id=world.account.id, key="ada", kind="human",
                                 password="ada-pass-1234", is_admin=True)
    client = client_for(admin)
    assert client.get("/console/audit/").status_code == 200
    assert client.get(f"/console/knowledge/{corpus['held'].pk}/").status_code == 200
    assert client.get(f"/console/knowledge/{corpus['alice_provisional'].pk}/").status_code == 404
    assert client.get("/console/queue/").status_code == 403
    assert client.post(f"/console/queue/{corpus['held'].pk}/approve/").status_code == 403
