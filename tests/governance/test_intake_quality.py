"""Knowledge that stays true, through the real HTTP API and the real pipeline: junk is
refused with a reason, an update supersedes the row it replaces (same speaker or the
subject; a late older message retires itself; someone else only opens a review), and the
belief-time policy stamps every new row so the workers move real rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from governance.models import PeerQuestion, Validation
from knowledge.models import AuditEntry, Knowledge, KnowledgeSource, LifecycleEvent, Relation
from memhouse.core.tenancy import account_context
from tests.fake_llm import ok
from tests.governance.helpers import api

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "/marketing/social"
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def post(live_server: Any, key: str, *texts: str, at: datetime = T0, peer_key: str | None = None,
         step: timedelta = timedelta(minutes=1)) -> None:
    messages = []
    for i, text in enumerate(texts):
        msg: dict[str, Any] = {"text": text, "occurred_at": (at + i * step).isoformat()}
        if peer_key:
            msg["peer_key"] = peer_key
        messages.append(msg)
    r = api(live_server, key, "POST", "messages", {"scope": SCOPE, "messages": messages})
    assert r.status_code in (200, 201, 202), r.text


def rows(world: Any, contains: str) -> list[Knowledge]:
    with account_context(world.account.id):
        return list(Knowledge.objects.filter(statement__icontains=contains)
                    .order_by("inserted_at"))


def search(live_server: Any, key: str, query: str) -> list[str]:
    r = api(live_server, key, "POST", "search", {"query": query, "scope": SCOPE, "limit": 10})
    assert r.status_code == 200, r.text
    return [c["statement"] for c in r.json()["candidates"]]


JUNK = {
    "disk 81% full, load 0.4": "f4_gate_a_machine_output",
    "session restored, 6 plugins registered": "f4_gate_a_machine_output",
    "2026-11-02 09:14:03,118 INFO scheduler.py:212 job sync_contacts finished in 2.4s":
        "f4_gate_a_machine_output",
    '{"error": {"code": 502, "message": "upstream connect error"}}': "f4_gate_a_machine_output",
    "Calling tool lookup_order with {\"order_id\": 1182}": "f4_gate_a_machine_output",
    "Server listening on port 8080": "f4_gate_a_machine_output",
}
KEEP = ["I'm allergic to penicillin.", "I work on the logging team at Stripe.",
        "My server at home runs Debian."]


def test_junk_is_rejected_with_its_reason_and_real_facts_stay(live_server: Any, keys: Any,
                                                             committed_world: Any) -> None:
    post(live_server, keys.alice, *JUNK, *KEEP)
    with account_context(committed_world.account.id):
        by_state: dict[str, list[Knowledge]] = {}
        for k in Knowledge.objects.all():
            by_state.setdefault(k.state, []).append(k)
        rejected_reasons = {k.sources.first().message.text: k.state_reason  # type: ignore[union-attr]
                            for k in by_state.get("rejected", [])}
        active = [k.statement for k in by_state.get("active", [])]
        # Rejected rows keep their provenance (decision evidence).
        assert all(k.source_count == 1 for k in by_state.get("rejected", []))
    for text, reason in JUNK.items():
        assert rejected_reasons.get(text) == reason, (text, rejected_reasons)
    assert len(active) == len(KEEP), active
    assert any("penicillin" in s for s in active)


def test_an_update_by_the_same_speaker_supersedes_in_the_same_transaction(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "My dentist appointment is on Tuesday at 10.")
    post(live_server, keys.alice, "The dentist moved my appointment to Thursday at 4.",
         at=T0 + timedelta(days=7))
    old, new = rows(committed_world, "appointment")
    assert (old.state, old.state_reason) == ("superseded", "f4_updated_by_source")
    assert new.state == "active" and new.supersedes_id == old.pk
    with account_context(committed_world.account.id):
        event = LifecycleEvent.objects.get(knowledge=old, to_state="superseded")
        assert event.evidence["superseded_by"] == str(new.pk)
        assert Relation.objects.filter(source=new, target=old, type="supersedes").exists()
    found = search(live_server, keys.alice, "When is my dentist appointment?")
    assert found and "Thursday" in found[0]
    assert not any("Tuesday" in s for s in found)
    lineage = api(live_server, keys.alice, "POST", "lineage", {"knowledge_id": str(new.pk)})
    assert lineage.status_code == 200
    assert str(old.pk) in lineage.text  # the chain is visible


def test_an_older_message_arriving_late_never_retires_the_newer_fact(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "I live in Austin.", at=T0 + timedelta(days=30))
    post(live_server, keys.alice, "I live in Denver.", at=T0)  # said earlier, arrives later
    austin = rows(committed_world, "Austin")[0]
    denver = rows(committed_world, "Denver")[0]
    assert austin.state == "active"
    assert (denver.state, denver.state_reason) == ("superseded", "f4_late_arrival")
    assert austin.supersedes_id == denver.pk
    found = search(live_server, keys.alice, "Where does Alice live?")
    assert not any("Denver" in s for s in found)


def test_someone_elses_update_retires_nothing_and_goes_to_review(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "I live in Denver.")
    post(live_server, keys.bob, "Alice lives in Austin.", at=T0 + timedelta(days=3))
    denver = rows(committed_world, "Denver")[0]
    austin = rows(committed_world, "Austin")[0]
    assert denver.state == "active"  # nothing retired silently
    assert austin.state == "provisional" and austin.subject_peer_id == denver.subject_peer_id
    with account_context(committed_world.account.id):
        assert Relation.objects.filter(source=austin, target=denver, type="contradicts").exists()
        review = Validation.objects.get(knowledge=denver, kind="contradiction")
        assert review.status == "open" and str(austin.pk) in review.note
    # The subject confirms the newer claim: now it is their word, and Denver is retired.
    r = api(live_server, keys.alice, "POST", f"me/knowledge/{austin.pk}/confirm", {})
    assert r.status_code == 200, r.text
    with account_context(committed_world.account.id):
        denver.refresh_from_db()
        review.refresh_from_db()
    assert (denver.state, denver.state_reason) == ("superseded", "f4_subject_confirmed_update")
    assert review.status == "resolved"


def test_different_things_of_a_kind_coexist(live_server: Any, keys: Any,
                                            committed_world: Any) -> None:
    post(live_server, keys.alice, "I like hiking.", "I have a meeting with Bob on Tuesday.")
    post(live_server, keys.alice, "I like painting.", "I have a meeting with Dana on Friday.",
         at=T0 + timedelta(days=1))
    with account_context(committed_world.account.id):
        assert not Knowledge.objects.filter(state="superseded").exists()
        assert Knowledge.objects.filter(state="active").count() == 4


def test_belief_time_is_stamped_and_the_workers_move_real_rows(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    from governance import workers

    post(live_server, keys.alice, "I prefer window seats on long flights.")
    post(live_server, keys.bob, "Alice is great at negotiating contracts.")
    account = committed_world.account.id
    pref = rows(committed_world, "window seats")[0]
    assert pref.state == "active" and pref.kind == "preference"
    assert pref.revalidate_after is not None and pref.expires_at is None
    assert timedelta(days=80) < pref.revalidate_after - pref.inserted_at < timedelta(days=100)
    provisional = rows(committed_world, "negotiating")[0]
    assert provisional.state == "provisional"

    # Past revalidate_after: needs_revalidation, with a question to the subject.
    later = pref.revalidate_after + timedelta(hours=1)
    assert workers.revalidate_due(account, now=later) >= 1
    with account_context(account):
        pref.refresh_from_db()
    assert (pref.state, pref.state_reason) == ("needs_revalidation", "f4_revalidation_due")
    with account_context(account):
        question = PeerQuestion.objects.get(validation__knowledge=pref, status="open")
    # The question is never answered: the row goes stale when it expires.
    workers.decay_unanswered_questions(account, now=question.deadline + timedelta(hours=1))
    with account_context(account):
        pref.refresh_from_db()
    assert (pref.state, pref.state_reason) == ("stale", "f4_revalidation_confidence_decay")
    with account_context(account):
        transitions = [e.payload["to"] for e in AuditEntry.objects.filter(
            target_id=str(pref.pk), event_type="knowledge.transition").order_by("seq")]
    assert transitions[-2:] == ["needs_revalidation", "stale"]


def test_a_scheduled_claim_expires_after_its_valid_time_and_grace(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    from governance import workers

    post(live_server, keys.alice, "I have a flight to Berlin tomorrow.",
         "I am in Lisbon next week for the offsite.")
    lisbon = next(k for k in rows(committed_world, "Lisbon") if k.state == "active")
    assert lisbon.relevant_until is not None and lisbon.expires_at is None  # history later
    item = next(k for k in rows(committed_world, "Berlin") if k.state == "active")
    assert item.relevant_until is not None
    assert item.expires_at == item.relevant_until + timedelta(days=7)
    assert workers.expire_due(committed_world.account.id,
                              now=item.expires_at - timedelta(minutes=1)) == 0
    assert workers.expire_due(committed_world.account.id,
                              now=item.expires_at + timedelta(minutes=1)) == 1
    with account_context(committed_world.account.id):
        item.refresh_from_db()
    assert (item.state, item.state_reason) == ("expired", "f4_expiry_due")


def test_curators_edit_and_merge_and_subjects_correct_through_the_lifecycle(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "I'm allergic to penicillin.", "I like green tea.")
    post(live_server, keys.alice, "I like jasmine tea.", at=T0 + timedelta(hours=1))
    allergy = rows(committed_world, "penicillin")[0]
    green, jasmine = rows(committed_world, "green tea")[0], rows(committed_world, "jasmine")[0]
    # A member is no curator.
    r = api(live_server, keys.bob, "POST", f"curator/knowledge/{allergy.pk}/edit",
            {"statement": "Alice is allergic to amoxicillin."})
    assert r.status_code == 403
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{allergy.pk}/edit",
            {"statement": "Alice is allergic to penicillin and amoxicillin.", "note": "chart"})
    assert r.status_code == 201, r.text
    edited = r.json()["knowledge"]
    assert edited["state"] == "active" and edited["supersedes"] == str(allergy.pk)
    assert edited["source_count"] == 1  # provenance copied
    r = api(live_server, keys.carol, "POST", "curator/knowledge/merge",
            {"ids": [str(green.pk), str(jasmine.pk)], "statement": "Alice likes green and "
             "jasmine tea."})
    assert r.status_code == 201, r.text
    merged = r.json()["knowledge"]
    with account_context(committed_world.account.id):  # provenance union: both messages
        assert KnowledgeSource.objects.filter(knowledge_id=merged["id"]).count() == 2
    with account_context(committed_world.account.id):
        states = {k.pk: (k.state, k.state_reason) for k in Knowledge.objects.filter(
            pk__in=[allergy.pk, green.pk, jasmine.pk])}
    assert states[allergy.pk] == ("superseded", "f4_curator_edit")
    assert states[green.pk] == states[jasmine.pk] == ("superseded", "f4_curator_merge")
    # The subject marks the edited row outdated and says what is true now.
    r = api(live_server, keys.alice, "POST", f"me/knowledge/{edited['id']}/correct",
            {"statement": "Alice is allergic to amoxicillin only.", "reason": "retested"})
    assert r.status_code == 201, r.text
    assert r.json()["knowledge"]["state_reason"] == "f4_subject_corrected"
    # Someone else cannot correct Alice's statement.
    r = api(live_server, keys.bob, "POST", f"me/knowledge/{r.json()['knowledge']['id']}/correct",
            {"statement": "Alice is not allergic."})
    assert r.status_code == 404
    found = search(live_server, keys.alice, "What is Alice allergic to?")
    assert found and "amoxicillin only" in found[0]
    assert not any("penicillin" in s for s in found)


def test_a_contradiction_review_is_in_the_curator_queue_and_can_retire_the_row(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "I live in Denver.")
    post(live_server, keys.bob, "Alice lives in Austin.", at=T0 + timedelta(days=3))
    denver = rows(committed_world, "Denver")[0]
    queue = api(live_server, keys.carol, "GET", "curator/queue", state="contradiction")
    assert queue.status_code == 200
    assert [i["id"] for i in queue.json()["items"]] == [str(denver.pk)]
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{denver.pk}/contradiction",
            {"outcome": "retire", "note": "moved"})
    assert r.status_code == 200, r.text
    assert r.json()["knowledge"]["state"] == "superseded"


def test_a_scope_overrides_belief_time_nearest_wins_and_backfill_stamps_old_rows(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    from django.core.management import call_command

    r = api(live_server, keys.alice, "PUT", "scopes/settings/belief-time",
            {"scope": "/marketing", "belief_time": {"revalidate_days": {"preference": 30}}})
    assert r.status_code == 403  # administrators only
    r = api(live_server, keys.dave, "PUT", "scopes/settings/belief-time",
            {"scope": "/marketing", "belief_time": {"revalidate_days": {"preference": 0}}})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_belief_time"
    r = api(live_server, keys.dave, "PUT", "scopes/settings/belief-time",
            {"scope": "/marketing", "belief_time": {"revalidate_days": {"preference": 30},
                                                    "expiry_grace_days": 1}})
    assert r.status_code == 200, r.text
    r = api(live_server, keys.dave, "PUT", "scopes/settings/belief-time",
            {"scope": SCOPE, "belief_time": {"revalidate_days": {"preference": 10}}})
    effective = r.json()["effective"]
    assert effective["revalidate_days"]["preference"] == 10  # nearest wins
    assert effective["expiry_grace_days"] == 1  # inherited from /marketing
    post(live_server, keys.alice, "I prefer aisle seats.")
    pref = rows(committed_world, "aisle seats")[0]
    assert pref.revalidate_after is not None
    assert abs((pref.revalidate_after - pref.inserted_at) - timedelta(days=10)) < timedelta(
        minutes=1)
    # A row from before the policy: no dates until the backfill stamps it.
    with account_context(committed_world.account.id):
        Knowledge.objects.filter(pk=pref.pk).update(revalidate_after=None)
    call_command("belief_time_backfill", "--account", "acme")
    with account_context(committed_world.account.id):
        pref.refresh_from_db()
    assert pref.revalidate_after is not None


def _model_claim(statement: str, evidence: str, replaces: str | None = None) -> dict[str, Any]:
    return {"claims": [{"statement": statement, "subject": "speaker", "kind": "fact",
                        "confidence": 0.8, "sensitivity": "internal", "relative_date": None,
                        "absolute_from": None, "absolute_until": None, "evidence": evidence,
                        "replaces": replaces}]}


def test_with_a_provider_the_model_names_what_a_claim_replaces_from_what_it_was_shown(
        live_server: Any, keys: Any, committed_world: Any, fake_llm: Any) -> None:
    fake_llm.script.append(ok(_model_claim("Alice rides the 38 bus to work.",
                                          "I take the 38 bus to work")))
    post(live_server, keys.alice, "I take the 38 bus to work.")
    bus = rows(committed_world, "bus")[0]
    assert bus.state == "active" and bus.extractor == "llm/llm-v3"
    # An id the model was not shown is ignored: nothing is retired.
    fake_llm.script.append(ok(_model_claim("Alice cycles to work on Fridays.",
                                          "I cycle on Fridays",
                                          replaces="00000000-0000-4000-8000-000000000000")))
    post(live_server, keys.alice, "I cycle on Fridays.", at=T0 + timedelta(days=1))
    fake_llm.script.append(ok(_model_claim("Alice cycles to work every day.",
                                          "I cycle to work every day now",
                                          replaces=str(bus.pk))))
    post(live_server, keys.alice, "I cycle to work every day now.", at=T0 + timedelta(days=2))
    shown = fake_llm.requests[-1]["json"]["messages"][-1]["content"]
    assert str(bus.pk) in shown and "current_statements" in shown
    with account_context(committed_world.account.id):
        bus.refresh_from_db()
        daily = Knowledge.objects.get(statement="Alice cycles to work every day.")
        fridays = Knowledge.objects.get(statement="Alice cycles to work on Fridays.")
    assert (bus.state, bus.state_reason) == ("superseded", "f4_updated_by_source")
    assert daily.supersedes_id == bus.pk and fridays.state == "active"


def test_a_date_that_is_the_claim_still_ends_an_appointment() -> None:
    from governance.belief_time import DEFAULT, stated_day_end

    said = datetime(2026, 11, 2, 9, tzinfo=UTC)
    statement = "Alice's dentist appointment is on 3 November 2026."
    assert stated_day_end(statement) == datetime(2026, 11, 4, tzinfo=UTC)
    stamps = DEFAULT.stamps(kind="fact", sensitivity="internal", inserted_at=said,
                            relevant_until=None, said_at=said, statement=statement)
    assert stamps["expires_at"] == datetime(2026, 11, 11, tzinfo=UTC)
    history = DEFAULT.stamps(kind="event", sensitivity="internal", inserted_at=said,
                             relevant_until=datetime(2026, 11, 1, tzinfo=UTC), said_at=said,
                             statement="Alice went to a support group.")
    assert history["expires_at"] is None and history["revalidate_after"] is None


def test_document_claims_split_no_sentence_at_an_abbreviation_and_carry_valid_time() -> None:
    from datetime import UTC, datetime

    from governance.intake.pipeline import document_claims

    text = ("Tom Becker works at St. Mary's Hospital on weekends.\n"
            "The office will be closed tomorrow for maintenance.\nTable of contents")
    claims = document_claims(text, names={"tom": "tom"},
                             occurred_at=datetime(2026, 3, 2, 8, tzinfo=UTC))
    assert [(c.statement, c.subject_peer_key) for c, _ in claims] == [
        ("Tom Becker works at St. Mary's Hospital on weekends.", "tom"),
        ("The office will be closed for maintenance.", None)]
    closed = claims[1][0]
    assert (closed.relevant_from, closed.relevant_until) == (
        datetime(2026, 3, 3, tzinfo=UTC), datetime(2026, 3, 4, tzinfo=UTC))
    assert claims[0][0].sensitivity == "internal"  # an employer that is a hospital
    assert text[slice(*claims[1][0].evidence_span)].strip() == claims[1][1]
