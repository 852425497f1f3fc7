"""Ingest over real HTTP through the whole pipeline (eager Celery; queuing is tested in
test_queue.py against real Redis)."""

from __future__ import annotations

import httpx
import pytest

from governance.intake.pipeline import process_message
from governance.models import PeerQuestion, Validation
from knowledge import services
from knowledge.models import Knowledge, KnowledgeSource, Message
from memhouse.core.tenancy import account_context
from retrieval.models import KnowledgeVector

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def chat(committed_world):
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
        services.peer_create(account_id=w.account.id, key="melanie", kind="human",
                             display_name="Melanie", aliases=["Mel"])
    return w


def _post(live_server, key: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{live_server.url}/api/v1/{path}", json=body,
                      headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _batch(*turns, scope="/marketing/social"):
    return {"scope": scope, "session": "s1", "messages": [
        {"id": cid, "peer_key": peer, "text": text, "occurred_at": "2023-05-08T13:56:00Z"}
        for cid, peer, text in turns]}


def _knowledge(w):
    with account_context(w.account.id):
        return {k.statement: k for k in Knowledge.objects.select_related(
            "subject_peer", "proposed_by", "held_scope")}


def test_messages_become_governed_knowledge(live_server, chat):
    r = _post(live_server, chat.agent_key, "messages", _batch(
        ("t1", "caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
        ("t2", "caroline", "Melanie painted a lake last week."),
        ("t3", "melanie", "Hey Caroline! Thanks!")))
    assert r.status_code == 202, r.text
    assert [m["status"] for m in r.json()["messages"]] == ["created"] * 3
    rows = _knowledge(chat)
    own = rows["Caroline went to a LGBTQ support group."]
    assert (own.state, own.state_reason, own.verification) == (
        "active", "f4_gate_a_b_accepted", "gate_keep")
    assert own.subject_peer.key == "caroline" and own.proposed_by.key == "caroline"
    assert own.kind == "event" and own.relevant_from.isoformat() == "2023-05-07T00:00:00+00:00"
    third = rows["Melanie painted a lake."]
    assert (third.state, third.state_reason) == ("provisional", "f4_gate_a_b_deferred")
    assert third.subject_peer.key == "melanie"  # subject is not source
    with account_context(chat.account.id):
        assert Validation.objects.get(knowledge=third).kind == "confirmation"
        q = PeerQuestion.objects.get(knowledge=third)
        assert q.peer.key == "melanie" and q.status == "open"
        src = KnowledgeSource.objects.get(knowledge=own)
        assert src.message.client_message_id == "t1" and "support group" in src.excerpt
        assert own.source_count == 1
        assert set(KnowledgeVector.objects.values_list("knowledge_id", flat=True)) == {
            own.id, third.id}
        assert Message.objects.filter(extracted_at__isnull=True).count() == 0
    assert len(rows) == 2  # the greeting produced nothing


def test_resending_a_batch_is_idempotent(live_server, chat):
    body = _batch(("t1", "caroline", "I love hiking in the Alps."))
    assert _post(live_server, chat.agent_key, "messages", body).status_code == 202
    again = _post(live_server, chat.agent_key, "messages", body)
    assert again.status_code == 202 and again.json()["messages"][0]["status"] == "duplicate"
    with account_context(chat.account.id):
        assert Message.objects.count() == 1 and Knowledge.objects.count() == 1


def test_a_reused_client_id_with_other_text_refuses_the_whole_batch(live_server, chat):
    _post(live_server, chat.agent_key, "messages", _batch(("t1", "caroline", "I love tea.")))
    r = _post(live_server, chat.agent_key, "messages", _batch(
        ("t2", "caroline", "I love coffee."), ("t1", "caroline", "I hate tea.")))
    assert r.status_code == 409 and r.json()["error"]["code"] == "client_id_conflict"
    with account_context(chat.account.id):
        assert Message.objects.count() == 1  # t2 was not half-written


@pytest.mark.parametrize(("body_change", "status", "code"), [
    ({"scope": "/nowhere"}, 400, "unknown_scope"),
    ({"scope": "relative"}, 400, "invalid_scope_path"),
    ({"messages": []}, 400, "invalid_input"),
    ({"messages": [{"peer_key": "caroline", "text": "I like tea", "occurred_at": "yesterday"}]},
     400, "invalid_input"),
    ({"messages": [{"peer_key": "caroline", "text": "ok"},
                   {"peer_key": "ghost", "text": "I like tea"}]}, 400, "unknown_peer_key"),
    ({"messages": [{"peer_key": "caroline", "text": "x" * 20001}]}, 413, "message_too_long"),
    ({"messages": [{"peer_key": "caroline", "text": "   "}]}, 400, "empty_text"),
    ({"messages": "nope"}, 400, "invalid_input"),
])
def test_bad_input_gets_a_clear_4xx_and_writes_nothing(live_server, chat, body_change,
                                                        status, code):
    body = {**_batch(("t1", "caroline", "I love tea.")), **body_change}
    r = _post(live_server, chat.agent_key, "messages", body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code and r.json()["error"]["message"]
    with account_context(chat.account.id):
        assert Message.objects.count() == 0


def test_other_accounts_scopes_and_peers_do_not_exist_for_me(live_server, chat):
    r = _post(live_server, chat.outsider_key, "messages",
              _batch(("t1", "caroline", "I love tea."), scope="/marketing/social"))
    assert r.status_code == 400 and r.json()["error"]["code"] in {"unknown_scope",
                                                                   "unknown_peer_key"}
    # Account B's human names a peer: refused as acting for someone else, exactly as for
    # a peer key that exists nowhere (no oracle across Accounts).
    r = _post(live_server, chat.outsider_key, "messages",
              _batch(("t1", "caroline", "I love tea."), scope="/marketing"))
    ghost = _post(live_server, chat.outsider_key, "messages",
                  _batch(("t1", "ghost-peer", "I love tea."), scope="/marketing"))
    assert r.status_code == ghost.status_code == 403
    assert r.json()["error"]["code"] == ghost.json()["error"]["code"] == "act_for_denied"


def test_peerless_credential_must_name_the_speaker(live_server, chat):
    with account_context(chat.account.id):
        _, key = services.credential_create(account_id=chat.account.id, peer=None)
    r = _post(live_server, key, "messages", {"scope": "/", "messages": [{"text": "I like tea"}]})
    assert r.status_code == 400 and r.json()["error"]["code"] == "peer_required"


def test_repeats_merge_into_one_statement_and_redelivery_is_a_no_op(chat):
    w = chat
    with account_context(w.account.id):
        from knowledge.ingest.services import IncomingMessage, messages_ingest
        from memhouse.core.principal import Principal

        p = Principal(account_id=w.account.id, peer=w.agent, via="api_key",
                      act_for_all=True)
        from django.utils import timezone

        now = timezone.now()
        results = messages_ingest(principal=p, scope_path="/", messages=[
            IncomingMessage(text="I love hiking in the Alps.", occurred_at=now,
                            peer_key="caroline"),
            IncomingMessage(text="I love hiking in the Alps!", occurred_at=now,
                            peer_key="caroline")])
    assert process_message(w.account.id, results[0]["id"]).proposed == 0  # already done
    with account_context(w.account.id):
        states = sorted(Knowledge.objects.values_list("state", "state_reason"))
        assert states == [("active", "f4_gate_a_b_accepted"), ("rejected", "f4_gate_a_duplicate")]
        kept = Knowledge.objects.get(state="active")
        assert kept.sources.count() == 2
        assert Knowledge.objects.get(pk=kept.pk).source_count == 1  # one independent speaker


def test_restricted_claims_are_withheld_when_unattended(live_server, chat):
    _post(live_server, chat.agent_key, "messages",
          _batch(("t1", "caroline", "My bank account number is 12345678.")))
    rows = _knowledge(chat)
    assert rows and all(k.state == "rejected" and k.state_reason ==
                        "f4_gate_b_restricted_unattended" for k in rows.values())


def test_documents_are_held_revised_and_retracted(live_server, chat):
    w = chat
    text = "Dana leads the copy team.\n\nThe spring launch is planned for March."
    r = _post(live_server, w.agent_key, "documents",
              {"scope": "/marketing", "title": "Plan", "text": text})
    assert r.status_code == 201, r.text
    doc_id = r.json()["document_id"]
    rows = _knowledge(w)
    assert {k.state for k in rows.values()} == {"held"}
    with account_context(w.account.id):
        assert Validation.objects.filter(kind="review").count() == 2
        assert all(k.held_scope.path == "/marketing"
                   for k in Knowledge.objects.select_related("held_scope"))
    r = _post(live_server, w.agent_key, f"documents/{doc_id}/versions",
              {"text": "Dana leads the copy team.\n\nThe launch moved to April."})
    assert r.status_code == 201 and r.json()["version"] == 2
    rows = _knowledge(w)
    assert rows["The spring launch is planned for March."].state == "superseded"
    assert rows["The spring launch is planned for March."].state_reason == "f4_document_revision"
    assert rows["Dana leads the copy team."].state == "held"
    with account_context(w.account.id):
        assert KnowledgeSource.objects.filter(
            knowledge=rows["Dana leads the copy team."]).count() == 2
    gone = httpx.delete(f"{live_server.url}/api/v1/documents/{doc_id}",
                        headers={"Authorization": f"Bearer {w.agent_key}"}, timeout=30)
    assert gone.status_code == 200 and gone.json()["retracted_knowledge"] == 3
    rows = _knowledge(w)
    assert {(k.state, k.state_reason) for k in rows.values()} == {
        ("retracted", "f4_source_tombstoned")}
    again = httpx.get(f"{live_server.url}/api/v1/documents/{doc_id}",
                      headers={"Authorization": f"Bearer {w.agent_key}"}, timeout=30)
    assert again.status_code == 404


def test_document_input_errors(live_server, chat):
    key = chat.agent_key
    r = _post(live_server, key, "documents", {"scope": "/", "title": "T"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_input"
    r = _post(live_server, key, "documents", {"scope": "/", "title": "T",
                                              "content_base64": "%%%"})
    assert r.status_code == 400
    r = _post(live_server, key, "documents", {"scope": "/", "title": "T",
                                              "content_base64": "AAEC", "media_type": "image/png"})
    assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"
    r = _post(live_server, chat.outsider_key, "documents/00000000-0000-0000-0000-000000000000/"
              "versions", {"text": "x"})
    assert r.status_code == 404


def test_a_name_shared_by_two_peers_resolves_only_within_the_scope(chat):
    from django.utils import timezone

    from knowledge.ingest.services import IncomingMessage, messages_ingest
    from memhouse.core.principal import Principal

    w = chat
    now = timezone.now()
    with account_context(w.account.id):
        for key in ("john-a", "john-b"):
            services.peer_create(account_id=w.account.id, key=key, kind="human",
                                 display_name="John")
        services.scope_ensure(account_id=w.account.id, path="/x")
        services.scope_ensure(account_id=w.account.id, path="/y")
        p = Principal(account_id=w.account.id, peer=w.agent, via="api_key",
                      act_for_all=True)
        messages_ingest(principal=p, scope_path="/x", messages=[
            IncomingMessage(text="I keep bees on my roof.", occurred_at=now, peer_key="john-a")])
        messages_ingest(principal=p, scope_path="/x", messages=[
            IncomingMessage(text="John painted a lake.", occurred_at=now, peer_key="caroline")])
        messages_ingest(principal=p, scope_path="/y", messages=[
            IncomingMessage(text="John bought a canoe.", occurred_at=now, peer_key="caroline")])
    rows = _knowledge(w)
    assert rows["John painted a lake."].subject_peer.key == "john-a"
    # ambiguous in /y: no John is guessed; what stays is Caroline's report of her words
    canoe = rows["Caroline said John bought a canoe."]
    assert canoe.subject_peer.key == "caroline"
    assert not any("canoe" in s and rows[s].subject_peer.key.startswith("john") for s in rows)


def test_you_is_the_other_speaker_of_a_two_party_session(live_server, chat):
    r = _post(live_server, chat.agent_key, "messages", _batch(
        ("t1", "caroline", "I got this new pup for you!"),
        ("t2", "melanie", "Make sure you feed him twice a day and walk him every morning.")))
    assert r.status_code == 202, r.text
    rows = _knowledge(chat)
    gift = rows["Caroline got this new pup for Melanie."]
    assert (gift.subject_peer.key, gift.state) == ("caroline", "active")
    # advice is no claim about anyone
    assert not any("twice a day" in s for s in rows)


def test_a_group_session_or_no_session_leaves_you_unresolved(live_server, chat):
    from governance.intake.pipeline import conversation_addressee

    with account_context(chat.account.id):
        services.peer_create(account_id=chat.account.id, key="dana", kind="human",
                             display_name="Dana")
    group = _batch(("g1", "caroline", "I got this new pup for you!"),
                   ("g2", "melanie", "Wow!"), ("g3", "dana", "So cute!"))
    group["session"] = "group"
    assert _post(live_server, chat.agent_key, "messages", group).status_code == 202
    alone = _batch(("a1", "caroline", "I baked a cake for you!"))
    del alone["session"]
    assert _post(live_server, chat.agent_key, "messages", alone).status_code == 202
    assert not any("pup" in s or "cake" in s for s in _knowledge(chat))
    with account_context(chat.account.id):
        by_id = {m.client_message_id: m for m in Message.objects.select_related("peer")}
        assert {conversation_addressee(by_id[i]) for i in ("g1", "g2", "g3", "a1")} == {None}


def test_in_a_user_and_agent_session_you_is_the_agent(live_server, chat):
    # an assistant is a peer like any other: the user's "you" is the agent that listens
    r = _post(live_server, chat.agent_key, "messages", _batch(
        ("u1", "caroline", "I baked a lemon cake for you and the whole team."),
        ("u2", "scribe", "Thank you, Caroline!")))
    assert r.status_code == 202, r.text
    rows = _knowledge(chat)
    cake = rows["Caroline baked a lemon cake for Scribe and the whole team."]
    assert (cake.subject_peer.key, cake.state) == ("caroline", "active")
