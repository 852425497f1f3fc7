"""Semantic's source-turn lane (balanced): statements reached through their source
message, and an answer turn through the question turn before it in its session, with the
reader's message and statement visibility inside the SQL. Real PostgreSQL, real embedder."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from knowledge.models import Message, Peer, Scope, Session
from memhouse.core.principal import Reader, internal_reader
from memhouse.core.tenancy import account_context
from retrieval import engine
from retrieval.profiles import BASE_PROFILES, with_deadline
from retrieval.strategies.semantic import SOURCE_TURNS
from retrieval.vectors import embed_knowledge, embed_messages
from tests.retrieval.test_search import _add

pytestmark = pytest.mark.django_db(transaction=True)

QUERY = "Where did Alice go on her road trip for research?"


def _unhurried(profile):
    """The profile with a deadline no loaded machine misses: these tests are about what the
    lanes read, not about time (the deadline has its own tests)."""
    return with_deadline(profile, 10_000)


def _reader(w, key: str) -> Reader:
    return Reader(account_id=w.account.id, posture="peer",
                  peer_id=Peer.objects.get(key=key).id, scope_roots=None)


@pytest.fixture
def dialogue(committed_world):
    """Bob asks about the research trip (no statement comes from his turn); Alice's answer
    names only the town, and so does the one statement extracted from it."""
    w = committed_world
    t0 = datetime(2024, 3, 1, 10, tzinfo=UTC)
    ids = {}
    with account_context(w.account.id):
        bob = Peer.objects.get(key="bob")
        session = Session.objects.create(account=w.account, scope=w.scope, external_id="s1")
        turns = [(bob, "Did you manage to go on that road trip for your research?"),
                 (w.subject, "Yes! I went to Woodhaven, a small town in the Midwest."),
                 (bob, "Nice. My sister bakes sourdough bread every Sunday.")]
        msgs = [Message.objects.create(account=w.account, peer=peer, scope=w.scope,
                                       session=session, text=text, occurred_at=t0)
                for peer, text in turns]  # one session time: arrival order decides
        ids["question_msg"], ids["answer_msg"] = str(msgs[0].id), str(msgs[1].id)
        ids["woodhaven"] = _add(w, "Alice went to Woodhaven, a small town in the Midwest.",
                                sources=[{"message": msgs[1], "excerpt": "Woodhaven"}])
        ids["bread"] = _add(w, "Bob's sister bakes sourdough bread every Sunday.",
                            subject="bob",
                            sources=[{"message": msgs[2], "excerpt": "sourdough"}])
        filler = [_add(w, f"Alice reviewed quarterly budget spreadsheet number {n}.")
                  for n in range(6)]
    embed_knowledge(w.account.id, [ids["woodhaven"], ids["bread"], *filler])
    embed_messages(w.account.id, [str(m.id) for m in msgs])
    return w, ids


def _search(w, reader: Reader):
    with account_context(w.account.id):
        scope = Scope.objects.get(path="/marketing/social")
        return engine.search(reader=reader, scope=scope, query=QUERY,
                             profile=_unhurried(BASE_PROFILES["balanced"]), limit=10)


def test_an_answer_is_reached_through_the_question_turn_before_it(dialogue):
    w, ids = dialogue
    res = _search(w, internal_reader(w.account.id))
    lane = dict(res.lists[SOURCE_TURNS])
    # The answer statement carries the question turn's similarity, above its own text's.
    assert next(iter(res.lists[SOURCE_TURNS]))[0] == ids["woodhaven"]
    top = res.candidates[0]
    assert top["id"] == ids["woodhaven"]
    assert set(top["scores"]) >= {"semantic", SOURCE_TURNS}
    # The lane is part of semantic, not a seventh strategy.
    assert SOURCE_TURNS not in res.strategies["contributed"] + res.strategies["empty"]
    assert lane[ids["woodhaven"]] > lane.get(ids["bread"], -1.0)


def test_a_turn_the_reader_may_not_see_lends_nothing(dialogue):
    """Bob's question produced no statement, so only Bob (who spoke it) may see it
    (lineage.visible_messages). Alice's answer is reached by both, but only Bob's search
    lifts it by the question; Carol's scores it by its own text."""
    w, ids = dialogue
    with account_context(w.account.id):
        bob, carol = _reader(w, "bob"), _reader(w, "carol")
    for_bob = dict(_search(w, bob).lists[SOURCE_TURNS])
    for_carol = dict(_search(w, carol).lists[SOURCE_TURNS])
    assert ids["woodhaven"] in for_bob
    assert for_carol.get(ids["woodhaven"], -1.0) < for_bob[ids["woodhaven"]]


def test_statements_hidden_from_the_reader_never_enter_the_lane(dialogue):
    w, ids = dialogue
    with account_context(w.account.id):
        answer = Message.objects.get(id=ids["answer_msg"])
        secret = _add(w, "Alice visited a fertility clinic in Woodhaven.",
                      sensitivity="personal",
                      sources=[{"message": answer, "excerpt": "Woodhaven"}])
    embed_knowledge(w.account.id, [secret])
    with account_context(w.account.id):
        carol, alice = _reader(w, "carol"), _reader(w, "alice")
    assert secret not in dict(_search(w, carol).lists[SOURCE_TURNS])
    assert secret in dict(_search(w, alice).lists[SOURCE_TURNS])


def test_profiles_without_the_lane_weight_do_not_run_it(dialogue):
    w, _ = dialogue
    balanced = BASE_PROFILES["balanced"]
    off = replace(balanced, weights={**balanced.weights, SOURCE_TURNS: 0.0})
    with account_context(w.account.id):
        scope = Scope.objects.get(path="/marketing/social")
        for profile in (BASE_PROFILES["fast"], off):
            res = engine.search(reader=internal_reader(w.account.id), scope=scope,
                                query=QUERY, profile=profile, limit=5)
            assert SOURCE_TURNS not in res.lists
            assert all(SOURCE_TURNS not in c["scores"] for c in res.candidates)


def test_a_hidden_turn_in_between_neither_lends_nor_blocks(dialogue):
    """The turn before is the one before *among the messages this reader may see*, so a
    hidden message between the question and the answer changes nothing for the reader:
    its existence cannot be read off the ranking."""
    w, ids = dialogue
    with account_context(w.account.id):
        bob = _reader(w, "bob")
    before = dict(_search(w, bob).lists[SOURCE_TURNS])[ids["woodhaven"]]
    with account_context(w.account.id):
        question = Message.objects.get(id=ids["question_msg"])
        answer = Message.objects.get(id=ids["answer_msg"])
        hidden = Message.objects.create(
            account=w.account, peer=w.subject, scope=w.scope, session=question.session,
            text="Sorry, one sec, my migraine medication alarm went off.",
            occurred_at=question.occurred_at,
            inserted_at=question.inserted_at + (answer.inserted_at - question.inserted_at) / 2)
        secret = _add(w, "Alice takes migraine medication.", sensitivity="personal",
                      sources=[{"message": hidden, "excerpt": "migraine"}])
    embed_knowledge(w.account.id, [secret])
    embed_messages(w.account.id, [str(hidden.id)])
    after = dict(_search(w, bob).lists[SOURCE_TURNS])
    assert secret not in after
    assert after[ids["woodhaven"]] == pytest.approx(before)


def test_hidden_messages_nearer_than_the_visible_ones_are_read_past(dialogue):
    """A peer reader's lanes read the nearest messages of the scope first and decide
    visibility for those only, more each round: with more hidden messages nearer to the
    query than the first round reads, the visible one is still found, and no hidden one
    is returned."""
    from django.utils import timezone

    from retrieval.lexical import analyze
    from retrieval.strategies import semantic
    from retrieval.strategies.base import StrategyContext

    w, ids = dialogue
    hidden = []
    with account_context(w.account.id):
        session = Message.objects.get(id=ids["answer_msg"]).session
        for n in range(6):  # Alice's own turns, each the source of a personal fact
            msg = Message.objects.create(
                account=w.account, peer=w.subject, scope=w.scope, session=session,
                text=f"{QUERY} To the clinic, visit {n}.",
                occurred_at=datetime(2024, 3, 2, 10 + n, tzinfo=UTC))
            _add(w, f"Alice had treatment {n} at the clinic in Woodhaven.",
                 sensitivity="personal", sources=[{"message": msg, "excerpt": "clinic"}])
            hidden.append(str(msg.id))
    embed_messages(w.account.id, hidden)
    with account_context(w.account.id):
        carol = _reader(w, "carol")
        scope = Scope.objects.get(path="/marketing/social")
        space_id, vector = engine._space_and_vector(carol, QUERY)
        ctx = StrategyContext(reader=carol, scope_ids=engine.scope_chain(scope).ids,
                              query=QUERY, lexical=analyze(QUERY), now=timezone.now(),
                              limit=1, query_vector=tuple(vector), space_id=space_id)
        first_round = semantic._ann_messages(ctx, semantic.CANDIDATE_FIRST)
        # Bob's question produced no statement: hidden from Carol as well.
        assert {str(m) for m, _ in first_round} <= {*hidden, ids["question_msg"]}
        found = semantic._nearest_messages(ctx, None, 1)
    assert [str(m) for m, _ in found] == [ids["answer_msg"]]
