"""Governance over real HTTP (live_server + httpx): curator decisions, promotion with
consent, subject self-governance, peer questions and erasure, with their permission
rules: agents and non-curators get 403, other Accounts and other subjects get 404."""

from __future__ import annotations

import uuid

import pytest

from governance.models import ErasureRecord, PeerQuestion, Validation
from knowledge.models import Knowledge, Message, Peer
from memhouse.core.tenancy import account_context
from tests.governance.helpers import (
    active_about,
    api,
    held_scope_claim,
    message,
    propose,
    provisional_about,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _in(world, fn, *args, **kwargs):
    with account_context(world.account.id):
        return fn(world, *args, **kwargs)


def _get(world, pk) -> Knowledge:
    with account_context(world.account.id):
        return Knowledge.objects.select_related("scope").get(pk=pk)


CURATOR_CALLS = [
    ("GET", "curator/queue", None),
    ("POST", "curator/knowledge/{id}/approve", {}),
    ("POST", "curator/knowledge/{id}/reject", {}),
    ("POST", "curator/knowledge/{id}/resolve", {"outcome": "for"}),
    ("POST", "curator/knowledge/{id}/promote", {"level": "scope"}),
]


def test_agents_and_non_curators_get_403_on_every_curator_endpoint(live_server,
                                                                    committed_world, keys):
    w = committed_world
    held = _in(w, held_scope_claim, "The social team posts on Tuesdays.")
    for key in (keys.scribe, keys.bob, keys.alice):
        for method, path, body in CURATOR_CALLS:
            r = api(live_server, key, method, path.format(id=held.pk), body)
            assert r.status_code == 403, (key, path, r.text)
            assert r.json()["error"]["code"] == "permission_denied"
    assert _get(w, held.pk).state == "held"
    r = api(live_server, "mh_nope_nope", "GET", "curator/queue")
    assert r.status_code == 401


def test_outsiders_get_404_for_everything_in_another_account(live_server, committed_world,
                                                            keys):
    w = committed_world
    held = _in(w, held_scope_claim, "The social team posts on Tuesdays.")
    mine = _in(w, provisional_about, "Alice prefers aisle seats.")
    with account_context(w.account.id):
        question = PeerQuestion.objects.get(knowledge=mine)
    with account_context(w.other_account.id):  # mallory curates her own Account
        Peer.objects.filter(pk=w.outsider.pk).update(is_curator=True, is_admin=True)
    for method, path, body in CURATOR_CALLS[1:]:
        r = api(live_server, keys.mallory, method, path.format(id=held.pk), body)
        assert r.status_code == 404, (path, r.text)
        assert r.json()["error"]["code"] == "not_found"
    assert api(live_server, keys.mallory, "GET", "curator/queue").json()["items"] == []
    for action in ("confirm", "contest", "redact"):
        r = api(live_server, keys.mallory, "POST", f"me/knowledge/{mine.pk}/{action}",
                {"reason": "x"})
        assert r.status_code == 404
    r = api(live_server, keys.mallory, "POST", f"questions/{question.pk}/answer",
            {"answer": "yes"})
    assert r.status_code == 404
    with account_context(w.account.id):
        msg = Message.objects.first()
    r = api(live_server, keys.mallory, "POST", "erasure", {"message_id": str(msg.pk)})
    assert r.status_code == 404
    r = api(live_server, keys.mallory, "POST", "erasure", {"peer_key": "alice"})
    assert r.status_code == 404
    assert _get(w, held.pk).state == "held" and _get(w, mine.pk).state == "provisional"


def test_curator_queue_lists_held_and_contested_but_never_a_provisional_row(
        live_server, committed_world, keys):
    w = committed_world
    held = _in(w, held_scope_claim, "The social team posts on Tuesdays.")
    provisional = _in(w, provisional_about, "Alice prefers aisle seats.")
    contested = _in(w, active_about, "Alice dislikes cats.")
    r = api(live_server, keys.alice, "POST", f"me/knowledge/{contested.pk}/contest",
            {"reason": "I love cats"})
    assert r.status_code == 200 and r.json()["knowledge"]["state"] == "contested"
    r = api(live_server, keys.carol, "GET", "curator/queue")
    assert r.status_code == 200
    items = {i["id"]: i for i in r.json()["items"]}
    assert set(items) == {str(held.pk), str(contested.pk)}
    assert [v["kind"] for v in items[str(contested.pk)]["validations"]] == ["dispute"]
    assert items[str(held.pk)]["validations"][0]["kind"] == "review"
    # The provisional row is hidden from the curator as if it did not exist.
    for path in ("approve", "reject", "promote"):
        r = api(live_server, keys.carol, "POST", f"curator/knowledge/{provisional.pk}/{path}",
                {"level": "scope"})
        assert r.status_code == 404, r.text
    r = api(live_server, keys.carol, "GET", "curator/queue", state="contested")
    assert [i["id"] for i in r.json()["items"]] == [str(contested.pk)]
    assert api(live_server, keys.carol, "GET", "curator/queue", state="provisional"
               ).status_code == 400
    # Decisions.
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{held.pk}/approve",
            {"note": "ok"})
    assert r.status_code == 200, r.text
    assert (r.json()["knowledge"]["state"], r.json()["knowledge"]["verification"]) == (
        "active", "curator_approved")
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{held.pk}/approve")
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_held"
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{contested.pk}/resolve",
            {"outcome": "maybe"})
    assert r.status_code == 400
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{contested.pk}/resolve",
            {"outcome": "against", "note": "subject is right"})
    assert r.status_code == 200
    assert r.json()["knowledge"]["state_reason"] == "f4_contest_resolved_against"
    assert api(live_server, keys.carol, "GET", "curator/queue").json()["items"] == []
    with account_context(w.account.id):
        assert not Validation.objects.filter(status="open").exclude(knowledge=provisional).exists()


def test_promotion_needs_the_subjects_consent_before_approval(live_server, committed_world,
                                                             keys):
    w = committed_world
    item = _in(w, active_about, "Alice leads the social media rota.")
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{item.pk}/promote",
            {"level": "scope", "scope": "/marketing"})
    assert r.status_code == 202, r.text
    body = r.json()["knowledge"]
    assert (body["state"], body["state_reason"], body["level"], body["scope"]) == (
        "held", "f4_promotion_requested", "peer", "/marketing/social")
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{item.pk}/approve")
    assert r.status_code == 409 and r.json()["error"]["code"] == "consent_pending"
    # Only the subject is asked; bob sees no question.
    assert api(live_server, keys.bob, "GET", "me/questions").json()["items"] == []
    questions = api(live_server, keys.alice, "GET", "me/questions").json()["items"]
    assert [(q["kind"], q["answers"]) for q in questions] == [("consent", ["consent", "decline"])]
    qid = questions[0]["id"]
    r = api(live_server, keys.bob, "POST", f"questions/{qid}/answer", {"answer": "consent"})
    assert r.status_code == 404
    r = api(live_server, keys.alice, "POST", f"questions/{qid}/answer", {"answer": "yes"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_answer"
    r = api(live_server, keys.alice, "POST", f"questions/{qid}/answer", {"answer": "consent"})
    assert r.status_code == 200 and r.json()["question"]["status"] == "answered"
    assert _get(w, item.pk).state == "held"  # consent alone places nothing
    r = api(live_server, keys.alice, "POST", f"questions/{qid}/answer", {"answer": "consent"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "question_closed"
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{item.pk}/approve")
    assert r.status_code == 200, r.text
    body = r.json()["knowledge"]
    assert (body["state"], body["state_reason"], body["level"], body["scope"],
            body["held_scope"]) == ("active", "f4_curator_approved", "scope", "/marketing", None)
    with account_context(w.account.id):
        kinds = dict(Validation.objects.filter(knowledge=item).values_list("kind", "resolution"))
        assert kinds == {"review": "approved", "consent": "consented"}
        # Every scope-level statement about a person has been consented.
        for k in Knowledge.objects.filter(level__in=["scope", "account"],
                                          subject_peer__kind="human"):
            assert Validation.objects.filter(knowledge=k, kind="consent",
                                             resolution="consented").exists()


def test_declined_or_rejected_promotion_returns_the_statement_to_peer_level(
        live_server, committed_world, keys):
    w = committed_world
    declined = _in(w, active_about, "Alice mentors new hires.")
    refused = _in(w, active_about, "Alice organises the book club.")
    for item in (declined, refused):
        r = api(live_server, keys.carol, "POST", f"curator/knowledge/{item.pk}/promote",
                {"level": "account"})
        assert r.status_code == 202
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{declined.pk}/promote",
            {"level": "account"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_active"
    questions = {q["knowledge"]["id"]: q["id"] for q in
                 api(live_server, keys.alice, "GET", "me/questions").json()["items"]}
    r = api(live_server, keys.alice, "POST", f"questions/{questions[str(declined.pk)]}/answer",
            {"answer": "decline"})
    assert r.status_code == 200
    k = _get(w, declined.pk)
    assert (k.state, k.state_reason, k.level, k.scope.path) == (
        "active", "f4_promotion_declined", "peer", "/marketing/social")
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{refused.pk}/reject")
    assert r.status_code == 200
    k = _get(w, refused.pk)
    assert (k.state, k.state_reason, k.level) == ("active", "f4_promotion_declined", "peer")
    with account_context(w.account.id):
        assert PeerQuestion.objects.get(knowledge=refused).status == "expired"
        assert not Validation.objects.filter(status="open").exists()
    # Promotion only widens placement.
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{refused.pk}/promote",
            {"level": "scope", "scope": "/engineering"})
    assert r.status_code == 404
    with account_context(w.account.id):
        from knowledge import services as ks

        ks.scope_ensure(account_id=w.account.id, path="/marketing/social/deep")
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{refused.pk}/promote",
            {"level": "scope", "scope": "/marketing/social/deep"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_promotion_scope"


def test_subject_lists_everything_about_them_with_cursor_pagination(live_server,
                                                                    committed_world, keys):
    w = committed_world
    with account_context(w.account.id):
        from knowledge import services as ks

        eng = ks.scope_ensure(account_id=w.account.id, path="/engineering")
        ids = {active_about(w, "Alice likes jazz.").pk,
               provisional_about(w, "Alice prefers tea.").pk,
               propose(w, "Alice is on call this week.", subject=w.subject, scope=eng).pk,
               held_scope_claim(w, "The social team meets Mondays.").pk}  # not about her
        rejected = propose(w, "Alice owns a boat.", subject=w.subject)
        from knowledge.lifecycle import transition

        transition(rejected, "rejected", actor="system:test", reason="f4_gate_a_noise")
        ids.add(rejected.pk)
    # alice's own key is limited to /marketing: the subject still sees every scope.
    with account_context(w.account.id):
        from knowledge import services as ks

        _, narrow = ks.credential_create(account_id=w.account.id, peer=w.subject,
                                         scope_paths=["/marketing"])
    seen, cursor = [], None
    for _ in range(5):
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        r = api(live_server, narrow, "GET", "me/knowledge", **params)
        assert r.status_code == 200, r.text
        seen += r.json()["items"]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 4 and len({i["id"] for i in seen}) == 4
    assert {i["state"] for i in seen} == {"active", "provisional", "proposed", "rejected"}
    assert {i["scope"] for i in seen} == {"/marketing/social", "/engineering"}
    assert all(i["subject"] == "alice" for i in seen)
    assert api(live_server, keys.alice, "GET", "me/knowledge", cursor="garbage!"
               ).status_code == 400
    assert api(live_server, keys.alice, "GET", "me/knowledge", limit=0).status_code == 400
    # Agents are not subjects who govern: the /me endpoints say they are for people.
    for path in ("me/knowledge", "me/questions"):
        r = api(live_server, keys.scribe, "GET", path)
        assert r.status_code == 403 and r.json()["error"]["code"] == "human_only"
    assert api(live_server, keys.bob, "GET", "me/knowledge").json()["items"] == []


def test_confirm_contest_and_redact_over_http(live_server, committed_world, keys):
    w = committed_world
    deferred = _in(w, provisional_about, "Alice prefers tea.")
    wrong = _in(w, active_about, "Alice dislikes cats.")
    private = _in(w, active_about, "Alice has a dentist appointment.")
    for key in (keys.bob, keys.carol, keys.scribe):  # not the subject: as if missing
        for action in ("confirm", "contest", "redact"):
            r = api(live_server, key, "POST", f"me/knowledge/{deferred.pk}/{action}",
                    {"reason": "x"})
            # An agent's key is told the route is for people; a person that it is missing.
            expected = 403 if key == keys.scribe else 404
            assert r.status_code == expected, (key, action)
    r = api(live_server, keys.alice, "POST", f"me/knowledge/{uuid.uuid4()}/confirm")
    assert r.status_code == 404
    r = api(live_server, keys.alice, "POST", f"me/knowledge/{deferred.pk}/confirm")
    assert r.status_code == 200
    assert (r.json()["knowledge"]["state"], r.json()["knowledge"]["verification"]) == (
        "active", "subject_confirmed")
    with account_context(w.account.id):
        assert PeerQuestion.objects.get(knowledge=deferred).status == "expired"
        assert Validation.objects.get(knowledge=deferred).resolution == "confirmed"
    r = api(live_server, keys.alice, "POST", f"me/knowledge/{deferred.pk}/confirm")
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_confirmable"
    r = api(live_server, keys.alice, "POST", f"me/knowledge/{wrong.pk}/contest", {})
    assert r.status_code == 400 and r.json()["error"]["code"] == "reason_required"
    r = api(live_server, keys.alice, "POST", f"me/knowledge/{wrong.pk}/contest",
            {"reason": "I love cats"})
    assert r.status_code == 200 and r.json()["knowledge"]["state"] == "contested"
    r = api(live_server, keys.alice, "POST", f"me/knowledge/{wrong.pk}/contest",
            {"reason": "again"})
    assert r.status_code == 409
    r = api(live_server, keys.alice, "POST", f"me/knowledge/{private.pk}/redact",
            {"reason": "my business"})
    assert r.status_code == 200 and r.json()["knowledge"]["state"] == "redacted"
    r = api(live_server, keys.alice, "POST", f"me/knowledge/{private.pk}/redact")
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_redactable"
    with account_context(w.account.id):
        from knowledge.models import LifecycleEvent

        ev = LifecycleEvent.objects.get(knowledge=private, to_state="redacted")
        assert ev.evidence == {"reason": "my business"} and ev.actor == "peer:alice"


def test_confirmation_questions_yes_and_no(live_server, committed_world, keys):
    w = committed_world
    yes = _in(w, provisional_about, "Alice prefers tea.")
    no = _in(w, provisional_about, "Alice owns three cats.")
    items = api(live_server, keys.alice, "GET", "me/questions").json()["items"]
    by_item = {q["knowledge"]["id"]: q for q in items}
    assert {q["kind"] for q in items} == {"confirmation"}
    assert by_item[str(yes.pk)]["answers"] == ["yes", "no"]
    r = api(live_server, keys.alice, "POST", f"questions/{by_item[str(yes.pk)]['id']}/answer",
            {"answer": "yes"})
    assert r.status_code == 200, r.text
    assert r.json()["question"]["knowledge"]["state"] == "active"
    r = api(live_server, keys.alice, "POST", f"questions/{by_item[str(no.pk)]['id']}/answer",
            {"answer": "no"})
    assert r.status_code == 200
    k = _get(w, no.pk)
    assert (k.state, k.state_reason, k.verification) == (
        "retracted", "f4_subject_denied", "subject_denied")
    assert api(live_server, keys.alice, "GET", "me/questions").json()["items"] == []
    answered = api(live_server, keys.alice, "GET", "me/questions", status="answered"
                   ).json()["items"]
    assert sorted(q["answer"] for q in answered) == ["no", "yes"]


def test_erasure_endpoint_is_for_account_admins(live_server, committed_world, keys):
    w = committed_world
    with account_context(w.account.id):
        msg = message(w, "Alice mentioned her new flat.")
        item = propose(w, "Alice has a new flat.", subject=w.subject, source=msg)
    for key in (keys.carol, keys.scribe, keys.alice):
        r = api(live_server, key, "POST", "erasure", {"message_id": str(msg.pk)})
        assert r.status_code == 403 and r.json()["error"]["code"] == "permission_denied"
    r = api(live_server, keys.dave, "POST", "erasure", {})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_erasure"
    r = api(live_server, keys.dave, "POST", "erasure",
            {"message_id": str(msg.pk), "peer_key": "alice"})
    assert r.status_code == 400
    r = api(live_server, keys.dave, "POST", "erasure", {"message_id": str(msg.pk)})
    assert r.status_code == 200, r.text
    body = r.json()["erasure"]
    assert (body["kind"], body["target_id"], body["knowledge_retracted"]) == (
        "message", str(msg.pk), 1)
    import hashlib

    assert body["sha256"] == hashlib.sha256(b"Alice mentioned her new flat.").hexdigest()
    assert _get(w, item.pk).state == "retracted"
    r = api(live_server, keys.dave, "POST", "erasure", {"message_id": str(msg.pk)})
    assert r.status_code == 404
    r = api(live_server, keys.dave, "POST", "erasure", {"peer_key": "dave"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "cannot_erase_self"
    with account_context(w.account.id):
        assert ErasureRecord.objects.count() == 1
        assert not Message.objects.filter(pk=msg.pk).exists()
