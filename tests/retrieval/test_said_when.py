"""Semantic's said-when lane (balanced, thorough): a question that names a time reads the
messages said within it, nearest first, and their statements the reader may see. Real
PostgreSQL, real embedder."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from knowledge import services
from knowledge.models import Message, Peer, Scope, Session
from memhouse.core.principal import Reader, internal_reader
from memhouse.core.tenancy import account_context
from retrieval import engine
from retrieval.profiles import BASE_PROFILES, with_deadline
from retrieval.strategies.semantic import SAID_WHEN, SOURCE_TURNS
from retrieval.vectors import embed_knowledge, embed_messages
from tests.retrieval.test_search import _add

pytestmark = pytest.mark.django_db(transaction=True)


def _unhurried(profile):
    """The profile with a deadline no loaded machine misses: these tests are about what the
    lanes read, not about time (the deadline has its own tests)."""
    return with_deadline(profile, 10_000)


def _reader(w, key: str) -> Reader:
    return Reader(account_id=w.account.id, posture="peer",
                  peer_id=Peer.objects.get(key=key).id, scope_roots=None)


@pytest.fixture
def two_trips(committed_world):
    """Alice went camping twice: in July 2023 and in March 2024, each told in its own
    session and extracted without the date (as the extractor moves "last weekend" into
    valid time, or drops it)."""
    w = committed_world
    ids: dict[str, str] = {}
    with account_context(w.account.id):
        msgs = {}
        for key, when, text in (
                ("july", datetime(2023, 7, 17, 18, tzinfo=UTC),
                 "We went camping by the river last weekend, the kids loved it."),
                ("march", datetime(2024, 3, 11, 9, tzinfo=UTC),
                 "We went camping in the mountains last weekend, it was freezing."),
                ("feb", datetime(2023, 2, 1, 12, tzinfo=UTC),
                 "Great news: a wholesaler replied and said yes today!")):
            session = Session.objects.create(account=w.account, scope=w.scope,
                                             external_id=f"s-{key}")
            msgs[key] = Message.objects.create(account=w.account, peer=w.subject,
                                               scope=w.scope, session=session, text=text,
                                               occurred_at=when)
        ids["july"] = _add(w, "Alice went camping by the river with her kids.",
                           sources=[{"message": msgs["july"], "excerpt": "camping"}])
        ids["march"] = _add(w, "Alice went camping in the mountains.",
                            sources=[{"message": msgs["march"], "excerpt": "camping"}])
        ids["feb"] = _add(w, "A wholesaler agreed to supply Alice's clothing store.",
                          sources=[{"message": msgs["feb"], "excerpt": "wholesaler"}])
        ids["july_secret"] = _add(w, "Alice had a panic attack at the campsite.",
                                  sensitivity="personal",
                                  sources=[{"message": msgs["july"], "excerpt": "camping"}])
        ids["msgs"] = ",".join(str(m.id) for m in msgs.values())
    embed_knowledge(w.account.id, [ids[k] for k in ("july", "march", "feb", "july_secret")])
    embed_messages(w.account.id, ids["msgs"].split(","))
    return w, ids


def _search(w, query: str, reader: Reader | None = None, profile: str = "balanced",
            as_of: datetime | None = None):
    return _search_at(w, "/marketing/social", query, reader, profile, as_of)


def _search_at(w, path: str, query: str, reader: Reader | None = None,
               profile: str = "balanced", as_of: datetime | None = None):
    with account_context(w.account.id):
        scope = Scope.objects.get(path=path)
        return engine.search(reader=reader or internal_reader(w.account.id), scope=scope,
                             query=query, profile=_unhurried(BASE_PROFILES[profile]), limit=10,
                             as_of=as_of)


@pytest.mark.parametrize("profile", ["balanced", "thorough"])
def test_a_named_month_reads_only_what_was_said_in_it(two_trips, profile):
    w, ids = two_trips
    july = _search(w, "When did Alice go camping in July?", profile=profile)
    # The internal reader sees the personal statement from the July message too.
    assert {kid for kid, _ in july.lists[SAID_WHEN]} == {ids["july"], ids["july_secret"]}
    # Any year's July: the question does not say which.
    march = _search(w, "Where did Alice go camping in March 2024?", profile=profile)
    assert [kid for kid, _ in march.lists[SAID_WHEN]] == [ids["march"]]
    assert march.candidates[0]["id"] == ids["march"]
    assert SAID_WHEN in march.candidates[0]["scores"]
    # A lane of semantic, not a seventh strategy.
    assert SAID_WHEN not in march.strategies["contributed"] + march.strategies["empty"]


def test_a_named_day_matches_a_few_days_either_side(two_trips):
    w, ids = two_trips
    # Said on 1 February 2023; the question names the day after.
    res = _search(w, "What did Alice's clothing store get on 2 February, 2023?")
    assert [kid for kid, _ in res.lists[SAID_WHEN]] == [ids["feb"]]
    far = _search(w, "What did Alice's clothing store get on 20 February, 2023?")
    assert far.lists[SAID_WHEN] == []


def test_a_relative_time_is_read_against_as_of(two_trips):
    w, ids = two_trips
    res = _search(w, "Where did Alice go camping last week?",
                  as_of=datetime(2024, 3, 20, tzinfo=UTC))
    assert [kid for kid, _ in res.lists[SAID_WHEN]] == [ids["march"]]


def test_no_named_time_no_lane_entries(two_trips):
    w, _ = two_trips
    for query in ("Where did Alice go camping?", "May I ask where Alice went camping?"):
        assert _search(w, query).lists[SAID_WHEN] == []


def test_statements_hidden_from_the_reader_never_enter_the_lane(two_trips):
    w, ids = two_trips
    with account_context(w.account.id):
        carol, alice = _reader(w, "carol"), _reader(w, "alice")
    query = "What happened when Alice went camping in July?"
    assert ids["july_secret"] not in dict(_search(w, query, carol).lists[SAID_WHEN])
    assert ids["july_secret"] in dict(_search(w, query, alice).lists[SAID_WHEN])


def test_profiles_without_the_lane_weight_do_not_run_it(two_trips):
    w, _ = two_trips
    balanced = BASE_PROFILES["balanced"]
    off = replace(balanced, weights={**balanced.weights, SAID_WHEN: 0.0})
    with account_context(w.account.id):
        scope = Scope.objects.get(path="/marketing/social")
        for profile in (BASE_PROFILES["fast"], off):
            res = engine.search(reader=internal_reader(w.account.id), scope=scope,
                                query="When did Alice go camping in July?",
                                profile=profile, limit=5)
            assert SAID_WHEN not in res.lists
            assert all(SAID_WHEN not in c["scores"] for c in res.candidates)


def test_a_lane_that_overruns_its_time_is_dropped_alone(two_trips, monkeypatch):
    """A lane runs under its own statement_timeout: cancelled, it drops out of the search
    (reported in retrieval_outcomes) while semantic's own list and its other lane stand,
    and the statements after it run under the strategy's timeout again."""
    from django.db import connection

    from retrieval.strategies import semantic

    w, ids = two_trips
    slow_reads: list[str] = []
    after: list[str] = []

    def slow_said_when(ctx, limit):
        slow_reads.append(ctx.query)
        with connection.cursor() as cur:
            cur.execute("SELECT pg_sleep(1)")  # a real statement past the lane's time
        return []

    real_source_turns = semantic._source_turns

    def source_turns_then_check(ctx, limit):
        out = real_source_turns(ctx, limit)
        with connection.cursor() as cur:
            cur.execute("SHOW statement_timeout")
            after.append(cur.fetchone()[0])
        return out

    monkeypatch.setattr(semantic, "LANE_STATEMENT_MS", 100)
    monkeypatch.setattr(semantic, "_said_when", slow_said_when)
    monkeypatch.setattr(semantic, "_source_turns", source_turns_then_check)
    res = _search(w, "When did Alice go camping in July?", profile="thorough")
    assert slow_reads  # the lane ran, and was cancelled well before the 1 s sleep ended
    assert {"strategy": SAID_WHEN, "outcome": "dropped",
            "reason_class": "timeout"} in res.retrieval_outcomes
    assert SAID_WHEN not in res.lists
    assert {ids["july"], ids["march"]} <= {kid for kid, _ in res.lists["semantic"]}
    assert res.lists[semantic.SOURCE_TURNS]
    assert "semantic" not in {d["name"] for d in res.strategies["dropped"]}
    # The source-turn lane ran under the lane's 100 ms, not the strategy's timeout...
    assert after == ["100ms"]
    # ...and a lane that keeps to its time leaves the strategy's timeout as it was.
    with account_context(w.account.id), connection.cursor() as cur:
        from django.db import transaction

        with transaction.atomic():
            cur.execute("SET LOCAL statement_timeout = 250")
            result = semantic.StrategyResult("semantic")
            semantic._run_lanes(result, [("semantic.test", lambda: [("x", 1.0)])])
            cur.execute("SHOW statement_timeout")
            assert cur.fetchone()[0] == "250ms"
            assert result.extra_lists == {"semantic.test": [("x", 1.0)]}
            assert result.lanes_dropped == {}


def test_the_planner_knows_how_many_messages_a_month_holds(committed_world):
    """'In July' of any year filters on the month a message was said; the migration's
    statistics on that expression let PostgreSQL count it (without them it guesses 0.5%
    of the rows, and at 1M messages sorted all of July's by distance instead of walking
    the vector index)."""
    from django.db import connection

    w = committed_world
    with account_context(w.account.id):
        for i in range(1200):
            Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                   text=f"message {i}",
                                   occurred_at=datetime(2020 + i % 4, 1 + i % 12, 5,
                                                        tzinfo=UTC))
        with connection.cursor() as cur:
            cur.execute("ANALYZE memhouse_message")
        sql, params = (Message.objects.filter(occurred_at__month__in=[7])
                       .values("id").query.sql_with_params())
        with connection.cursor() as cur:
            cur.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            plan = cur.fetchone()[0]
    estimate = plan[0]["Plan"]["Plan Rows"]
    assert 70 <= estimate <= 130  # 100 of the 1200 were said in a July


def test_message_vectors_carry_their_messages_scope_and_time(two_trips):
    """The lanes filter a message's scope and time on its vector's row (retrieval 0012):
    every vector holds exactly its message's, however it was written."""
    from retrieval.models import MessageVector

    w, ids = two_trips
    with account_context(w.account.id):
        rows = list(MessageVector.objects.filter(message_id__in=ids["msgs"].split(","))
                    .values_list("scope_id", "said_at", "message__scope_id",
                                 "message__occurred_at"))
    assert len(rows) == 3
    assert all(scope == message_scope and said == occurred
               for scope, said, message_scope, occurred in rows)


def test_the_lanes_read_only_the_scopes_of_the_read(two_trips):
    """A message of another scope of the same Account, said in the same July and nearer
    to the question than any, is never read by either lane."""
    w, ids = two_trips
    with account_context(w.account.id):
        paid = services.scope_ensure(account_id=w.account.id, path="/marketing/paid")
        session = Session.objects.create(account=w.account, scope=paid, external_id="s-paid")
        msg = Message.objects.create(account=w.account, peer=w.subject, scope=paid,
                                     session=session, occurred_at=datetime(2023, 7, 18,
                                                                           tzinfo=UTC),
                                     text="When did Alice go camping in July? By the river.")
        other = _add(w, "Alice went camping by the river in July.", scope=paid,
                     sources=[{"message": msg, "excerpt": "camping"}])
    embed_knowledge(w.account.id, [other])
    embed_messages(w.account.id, [str(msg.id)])
    res = _search(w, "When did Alice go camping in July?")
    assert {kid for kid, _ in res.lists[SAID_WHEN]} == {ids["july"], ids["july_secret"]}
    assert other not in dict(res.lists[SOURCE_TURNS])
    paid_read = _search_at(w, "/marketing/paid", "When did Alice go camping in July?")
    assert other in dict(paid_read.lists[SAID_WHEN])


def test_the_planner_knows_how_many_message_vectors_a_month_holds(committed_world):
    """The said-when lane filters the vectors by the month they were said; retrieval 0012's
    statistics on exactly that expression let PostgreSQL count it (guessing 0.5% of the
    rows it sorted a whole month by distance instead of walking the vector index)."""
    import numpy as np
    from django.db import connection

    from retrieval.embedding import get_embedder
    from retrieval.models import MessageVector
    from retrieval.strategies.semantic import SAID_MONTH
    from retrieval.vectors import space_ensure

    w = committed_world
    rng = np.random.default_rng(3)
    with account_context(w.account.id):
        space = space_ensure(get_embedder().identity)
        messages = Message.objects.bulk_create([
            Message(account=w.account, peer=w.subject, scope=w.scope, text=f"message {i}",
                    occurred_at=datetime(2020 + i % 4, 1 + i % 12, 5, tzinfo=UTC))
            for i in range(1200)])
        MessageVector.objects.bulk_create([
            MessageVector(account=w.account, message=m, space=space, scope=w.scope,
                          said_at=m.occurred_at, embedding=rng.normal(size=space.dims))
            for m in messages])
        with connection.cursor() as cur:
            cur.execute("ANALYZE memhouse_message_vector")
            cur.execute(f"EXPLAIN (FORMAT JSON) SELECT mv.id FROM memhouse_message_vector mv "
                        f"WHERE {SAID_MONTH} IN (7)")
            plan = cur.fetchone()[0]
    estimate = plan[0]["Plan"]["Plan Rows"]
    assert 70 <= estimate <= 130  # 100 of the 1200 were said in a July


def test_a_lane_keeps_inside_the_searchs_deadline(two_trips, monkeypatch):
    """A lane whose statements each keep to their timeout but together would outlast the
    search is cut at the deadline: it drops out alone and semantic's list arrives (before,
    twelve 100 ms statements cost semantic its place); the lane after it is dropped
    unread when no time is left."""
    from django.db import connection

    from retrieval.strategies import semantic

    w, ids = two_trips
    statements: list[int] = []

    def slow_source_turns(ctx, limit):
        for _ in range(12):
            with connection.cursor() as cur:
                cur.execute("SELECT pg_sleep(0.1)")
            statements.append(1)
        return []

    monkeypatch.setattr(semantic, "_source_turns", slow_source_turns)
    with account_context(w.account.id):
        scope = Scope.objects.get(path="/marketing/social")
        res = engine.search(reader=internal_reader(w.account.id), scope=scope,
                            query="When did Alice go camping in July?", limit=10,
                            profile=with_deadline(BASE_PROFILES["balanced"], 1000))
    assert "semantic" not in {d["name"] for d in res.strategies["dropped"]}
    assert {ids["july"], ids["march"]} <= {kid for kid, _ in res.lists["semantic"]}
    assert {"strategy": semantic.SOURCE_TURNS, "outcome": "dropped",
            "reason_class": "timeout"} in res.retrieval_outcomes
    assert len(statements) < 12  # cut at the deadline, not after twelve
    assert {"strategy": SAID_WHEN, "outcome": "dropped",
            "reason_class": "timeout"} in res.retrieval_outcomes
    assert res.elapsed_ms < 1500
