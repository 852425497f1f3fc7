"""Conflicts settled at read time, through real HTTP and the real pipeline.

Two claims that say otherwise about one attribute, where the update rule is not sure the
newer one is an update, both stay current; a `contradicts` relation points from the newer
(by when it was said) to the older. Every read puts the newer first and marks the older
`possibly_outdated` with the newer one's id, in rendered text too; the subject (their own
facts) or a curator (shared facts) is asked, and settling supersedes the older or keeps
both (and reads stop marking it)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from governance.models import PeerQuestion, Validation
from knowledge.models import Knowledge, Relation
from memhouse.core.tenancy import account_context
from tests.governance.helpers import api
from tests.governance.test_intake_quality import SCOPE, T0, post, rows

pytestmark = pytest.mark.django_db(transaction=True)

OLD, NEW = "My manager is Helen Cho.", "Helen got reassigned. Tom Reyes is my boss from Monday."
QUERY = "Who is Alice's manager?"


def _pair(live_server: Any, keys: Any, world: Any) -> tuple[Knowledge, Knowledge]:
    post(live_server, keys.alice, OLD)
    post(live_server, keys.alice, NEW, at=T0 + timedelta(days=1))
    return rows(world, "Helen Cho")[0], rows(world, "Tom Reyes")[0]


def _search(live_server: Any, key: str, query: str = QUERY) -> list[dict[str, Any]]:
    r = api(live_server, key, "POST", "search", {"query": query, "scope": SCOPE, "limit": 10})
    assert r.status_code == 200, r.text
    return list(r.json()["candidates"])


def contradiction(world: Any, old_word: str, new_word: str) -> tuple[Knowledge, Knowledge]:
    """The older and newer rows (found by a word of each), asserting the one `contradicts`
    edge runs newer -> older."""
    old, new = rows(world, old_word)[0], rows(world, new_word)[0]
    with account_context(world.account.id):
        edge = Relation.objects.get(type="contradicts")
    assert (edge.source_id, edge.target_id) == (new.pk, old.pk)
    return old, new


def assert_newer_first(live_server: Any, key: str, query: str, old: Knowledge,
                       new: Knowledge) -> None:
    """A search puts the newer claim before the older, which is marked by it."""
    found = _search(live_server, key, query)
    ids = [str(c["id"]) for c in found]
    assert ids.index(str(new.pk)) < ids.index(str(old.pk))
    marked = {str(c["id"]): c.get("possibly_outdated") for c in found}
    assert marked[str(old.pk)] == str(new.pk) and marked[str(new.pk)] is None


def _ids(items: list[dict[str, Any]], key: str = "id") -> list[str]:
    return [str(i[key]) for i in items]


def test_an_uncertain_update_is_a_contradiction_both_current_newer_to_older(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    old, new = _pair(live_server, keys, committed_world)
    assert (old.state, new.state) == ("active", "active")  # the rule was not sure
    with account_context(committed_world.account.id):
        edge = Relation.objects.get(type="contradicts")
        assert (edge.source_id, edge.target_id, edge.settled_at) == (new.pk, old.pk, None)
        # Alice's own fact: the question goes to her, not to the curator queue.
        review = Validation.objects.get(knowledge=old, kind="contradiction", status="open")
        question = PeerQuestion.objects.get(validation=review)
        assert question.peer_id == old.subject_peer_id and question.kind == "contradiction"
        assert "Tom Reyes" in question.text and "Helen Cho" in question.text
    queue = api(live_server, keys.carol, "GET", "curator/queue", state="contradiction")
    assert queue.status_code == 200 and queue.json()["items"] == []


def test_a_message_said_earlier_but_arriving_later_is_the_older_side(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, NEW, at=T0 + timedelta(days=1))
    post(live_server, keys.alice, OLD)  # said a day before, arrives after
    old = rows(committed_world, "Helen Cho")[0]
    new = rows(committed_world, "Tom Reyes")[0]
    with account_context(committed_world.account.id):
        edge = Relation.objects.get(type="contradicts")
    assert (edge.source_id, edge.target_id) == (new.pk, old.pk)
    found = _search(live_server, keys.alice)
    assert _ids(found).index(str(new.pk)) < _ids(found).index(str(old.pk))


def test_every_read_path_puts_the_newer_first_and_marks_the_older(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    old, new = _pair(live_server, keys, committed_world)
    old_id, new_id = str(old.pk), str(new.pk)

    # search (as Alice, and as a member of the scope)
    for key in (keys.alice, keys.bob):
        found = _search(live_server, key)
        by_id = {c["id"]: c for c in found}
        assert old_id in by_id and new_id in by_id, _ids(found)
        assert _ids(found).index(new_id) < _ids(found).index(old_id)
        assert by_id[old_id]["possibly_outdated"] == new_id
        assert by_id[new_id]["possibly_outdated"] is None
        assert [c["rank"] for c in found] == list(range(1, len(found) + 1))

    # context: structured and rendered
    r = api(live_server, keys.alice, "POST", "context", {"scope": SCOPE, "query": QUERY})
    assert r.status_code == 200, r.text
    body = r.json()
    head = body["knowledge"]
    assert _ids(head).index(new_id) < _ids(head).index(old_id)
    assert {e["id"]: e["possibly_outdated"] for e in head}[old_id] == new_id
    line = next(ln for ln in body["context"].splitlines() if "Helen Cho" in ln)
    assert line.endswith(f"(possibly outdated: see {new_id})")
    assert body["context"].index("Tom Reyes") < body["context"].index("Helen Cho")

    # ask (model-free): the newer claim answers; citations carry the mark
    r = api(live_server, keys.alice, "POST", "ask", {"scope": SCOPE, "query": QUERY})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["citations"] and answer["citations"][0]["id"] == new_id, answer["citations"]
    assert "Tom Reyes" in answer["answer"].splitlines()[0]
    marks = {c["id"]: c["possibly_outdated"] for c in answer["candidates"]}
    assert marks[old_id] == new_id and marks[new_id] is None
    if old_id in _ids(answer["citations"]):
        assert f"(possibly outdated: see {new_id})" in answer["answer"]

    # ask with a planner (deterministic without a model): tool evidence is marked too
    r = api(live_server, keys.alice, "POST", "ask", {"scope": SCOPE, "query": QUERY,
                                                      "effort": "high"})
    assert r.status_code == 200, r.text
    cited = {c["id"]: c["possibly_outdated"] for c in r.json()["citations"]}
    assert cited and cited.get(new_id) is None
    assert cited.get(old_id, new_id) == new_id

    # the knowledge listing and one statement
    r = api(live_server, keys.alice, "GET", "knowledge", scope=SCOPE)
    assert r.status_code == 200, r.text
    listed = {i["id"]: i["possibly_outdated"] for i in r.json()["items"]}
    assert listed[old_id] == new_id and listed[new_id] is None
    r = api(live_server, keys.bob, "GET", f"knowledge/{old_id}")
    assert r.status_code == 200 and r.json()["knowledge"]["possibly_outdated"] == new_id


def test_the_stable_profile_holds_the_pair_side_by_side_newer_first(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    old, new = _pair(live_server, keys, committed_world)
    r = api(live_server, keys.alice, "POST", "stable-profile", {"scope": SCOPE})
    assert r.status_code == 200, r.text
    entries = r.json()["entries"]
    ids = _ids(entries, "knowledge_id")
    assert str(old.pk) in ids and str(new.pk) in ids, [e["statement"] for e in entries]
    assert ids.index(str(new.pk)) < ids.index(str(old.pk))
    assert [str(new.pk), str(old.pk)] in r.json()["conflicts"]
    marks = {e["knowledge_id"]: e["possibly_outdated"] for e in entries}
    assert marks[str(old.pk)] == str(new.pk) and marks[str(new.pk)] is None


def test_a_reader_who_cannot_see_the_newer_claim_sees_no_mark(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    """Bob's claim about Alice is provisional: only Alice sees it, so only Alice's reads
    mark her own fact (and name Bob's claim)."""
    post(live_server, keys.alice, "I live in Denver.")
    post(live_server, keys.bob, "Alice lives in Austin.", at=T0 + timedelta(days=3))
    denver, austin = rows(committed_world, "Denver")[0], rows(committed_world, "Austin")[0]
    assert austin.state == "provisional"
    query = "Where does Alice live?"
    mine = {c["id"]: c for c in _search(live_server, keys.alice, query)}
    assert mine[str(denver.pk)]["possibly_outdated"] == str(austin.pk)
    assert _ids(list(mine.values())).index(str(austin.pk)) < _ids(
        list(mine.values())).index(str(denver.pk))
    theirs = {c["id"]: c for c in _search(live_server, keys.carol, query)}
    assert str(austin.pk) not in theirs
    assert theirs[str(denver.pk)]["possibly_outdated"] is None
    r = api(live_server, keys.carol, "GET", f"knowledge/{denver.pk}")
    assert r.status_code == 200 and r.json()["knowledge"]["possibly_outdated"] is None


def test_another_persons_claim_about_the_same_fact_takes_the_same_path(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "I work at Acme.")
    post(live_server, keys.bob, "Alice works at Globex now, not Acme.",
         at=T0 + timedelta(days=2))
    acme = next(k for k in rows(committed_world, "Acme") if "Globex" not in k.statement)
    globex = rows(committed_world, "Globex")[0]
    assert acme.state == "active" and globex.subject_peer_id == acme.subject_peer_id
    with account_context(committed_world.account.id):
        assert Relation.objects.filter(source=globex, target=acme, type="contradicts",
                                       settled_at__isnull=True).exists()
    found = {c["id"]: c for c in _search(live_server, keys.alice, "Where does Alice work?")}
    assert found[str(acme.pk)]["possibly_outdated"] == str(globex.pk)


def test_the_subject_settles_no_the_newer_supersedes_the_older(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    old, new = _pair(live_server, keys, committed_world)
    r = api(live_server, keys.alice, "GET", "me/questions")
    assert r.status_code == 200, r.text
    question = next(q for q in r.json()["items"] if q["kind"] == "contradiction")
    r = api(live_server, keys.alice, "POST", f"questions/{question['id']}/answer",
            {"answer": "no"})
    assert r.status_code == 200, r.text
    with account_context(committed_world.account.id):
        old.refresh_from_db()
        new.refresh_from_db()
        assert (old.state, old.state_reason) == ("superseded",
                                                     "f4_subject_confirmed_update")
        assert new.supersedes_id == old.pk and new.state == "active"
        assert Relation.objects.get(type="contradicts").settled_at is not None
        assert not Validation.objects.filter(knowledge=old, status="open").exists()
        assert PeerQuestion.objects.get(pk=question["id"]).status == "answered"
    found = _search(live_server, keys.alice)
    assert str(old.pk) not in _ids(found)


def test_the_subject_settles_yes_both_stand_and_reads_stop_marking(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    old, _new = _pair(live_server, keys, committed_world)
    with account_context(committed_world.account.id):
        question = PeerQuestion.objects.get(knowledge=old, kind="contradiction")
    r = api(live_server, keys.bob, "POST", f"questions/{question.pk}/answer",
            {"answer": "yes"})
    assert r.status_code == 404  # only the subject answers
    r = api(live_server, keys.alice, "POST", f"questions/{question.pk}/answer",
            {"answer": "maybe"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_answer"
    r = api(live_server, keys.alice, "POST", f"questions/{question.pk}/answer",
            {"answer": "yes"})
    assert r.status_code == 200, r.text
    with account_context(committed_world.account.id):
        old.refresh_from_db()
        assert old.state == "active"
        assert Relation.objects.get(type="contradicts").settled_at is not None
        review = Validation.objects.get(knowledge=old, kind="contradiction")
        assert (review.status, review.resolution) == ("resolved", "contradiction_keep")
    found = {c["id"]: c for c in _search(live_server, keys.alice)}
    assert found[str(old.pk)]["possibly_outdated"] is None
    r = api(live_server, keys.alice, "POST", f"questions/{question.pk}/answer",
            {"answer": "no"})
    assert r.status_code == 409


def test_an_unanswered_question_past_its_deadline_comes_to_the_curator(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    old, _new = _pair(live_server, keys, committed_world)
    with account_context(committed_world.account.id):
        PeerQuestion.objects.filter(knowledge=old).update(
            deadline=T0 - timedelta(days=1))
    queue = api(live_server, keys.carol, "GET", "curator/queue", state="contradiction")
    assert _ids(queue.json()["items"]) == [str(old.pk)]


def test_shared_facts_go_to_the_curator_who_retires_the_older(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    """Claims about the scope have no subject to ask: a curator settles them."""
    from governance.intake.supersession import record_contradiction
    from governance.services import knowledge_approve
    from tests.governance.helpers import held_scope_claim

    with account_context(committed_world.account.id):
        older, newer = (knowledge_approve(
            item=held_scope_claim(committed_world, text), actor=committed_world.curator)
            for text in ("The team offsite venue is the Harbour Hotel.",
                         "The team offsite will be at Lakeside Lodge."))
        assert record_contradiction(newer, older, confidence=0.6,
                                    reason="f4_update_uncertain") == older
        assert not PeerQuestion.objects.filter(knowledge=older).exists()
    found = {c["id"]: c for c in _search(live_server, keys.bob, "Where is the team offsite?")}
    assert found[str(older.pk)]["possibly_outdated"] == str(newer.pk)
    queue = api(live_server, keys.carol, "GET", "curator/queue", state="contradiction")
    assert _ids(queue.json()["items"]) == [str(older.pk)]
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{older.pk}/contradiction",
            {"outcome": "retire", "note": "the venue changed"})
    assert r.status_code == 200, r.text
    assert r.json()["knowledge"]["state"] == "superseded"
    with account_context(committed_world.account.id):
        newer.refresh_from_db()
        assert newer.supersedes_id == older.pk
        assert Relation.objects.get(type="contradicts").settled_at is not None


def test_a_curator_keeping_both_stops_the_mark(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    post(live_server, keys.alice, "I live in Denver.")
    post(live_server, keys.bob, "Alice lives in Austin.", at=T0 + timedelta(days=3))
    denver = rows(committed_world, "Denver")[0]
    r = api(live_server, keys.carol, "POST", f"curator/knowledge/{denver.pk}/contradiction",
            {"outcome": "keep", "note": "both hold: two homes"})
    assert r.status_code == 200, r.text
    found = {c["id"]: c for c in _search(live_server, keys.alice, "Where does Alice live?")}
    assert found[str(denver.pk)]["possibly_outdated"] is None


def test_the_mcp_tools_carry_the_order_and_the_mark(
        live_server: Any, keys: Any, committed_world: Any, tmp_path: Any) -> None:
    from tests.integrations.test_mcp_server import _run_mcp

    old, new = _pair(live_server, keys, committed_world)
    old_id, new_id = str(old.pk), str(new.pk)

    async def body(session: Any) -> dict[str, Any]:
        return {
            "search": await session.call_tool("search", {"query": QUERY, "scope": SCOPE}),
            "context": await session.call_tool("get_context", {"scope": SCOPE,
                                                               "query": QUERY}),
            "listed": await session.call_tool("list_knowledge", {"scope": SCOPE}),
            "one": await session.call_tool("get_knowledge", {"knowledge_id": old_id}),
        }

    out = _run_mcp(live_server.url, keys.alice, tmp_path, body)
    assert not any(r.is_error for r in out.values()), {k: r.content for k, r in out.items()}
    found = out["search"].structured_content["candidates"]
    assert _ids(found).index(new_id) < _ids(found).index(old_id)
    assert {c["id"]: c["possibly_outdated"] for c in found}[old_id] == new_id
    assert f"(possibly outdated: see {new_id})" in out["context"].structured_content["context"]
    listed = out["listed"].structured_content["items"]
    assert {i["id"]: i["possibly_outdated"] for i in listed}[old_id] == new_id
    assert out["one"].structured_content["knowledge"]["possibly_outdated"] == new_id


def test_the_helper_is_one_query_and_never_crosses_an_account(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memhouse.core.principal import Reader
    from retrieval.conflicts import outdated_by

    old, new = _pair(live_server, keys, committed_world)
    alice = Reader(account_id=committed_world.account.id, posture="peer",
                   peer_id=old.subject_peer_id)
    with account_context(committed_world.account.id), \
            CaptureQueriesContext(connection) as queries:
        marks = outdated_by(reader=alice, ids=[old.pk, new.pk])
    assert marks == {str(old.pk): str(new.pk)}
    assert len(queries.captured_queries) == 1
    other = committed_world.outsider.account_id  # Mallory's Account
    stranger = Reader(account_id=other, posture="peer", peer_id=committed_world.outsider.pk)
    with account_context(other):
        assert outdated_by(reader=stranger, ids=[old.pk, new.pk]) == {}


def test_a_blank_context_from_projections_marks_the_older_too(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    """Without a query the head comes from the projections (once built), not from search:
    the same helper marks and orders it."""
    old, new = _pair(live_server, keys, committed_world)
    bodies = [api(live_server, keys.alice, "POST", "context", {"scope": SCOPE}).json()
              for _ in range(2)]
    assert bodies[1]["projection_cache_hit"], bodies[1]["projections"]
    for body in bodies:
        head = {e["id"]: e for e in body["knowledge"]}
        assert head[str(old.pk)]["possibly_outdated"] == str(new.pk)
        assert _ids(body["knowledge"]).index(str(new.pk)) < _ids(body["knowledge"]).index(
            str(old.pk))
        assert f"(possibly outdated: see {new.pk})" in body["context"]
