"""The entity mention index and the entity_match strategy.

Entities are internal: the index is rebuildable, rebuilds read -> compute -> write with
the previous index intact on failure, and retrieval returns knowledge ids only, filtered
by the reader inside the query.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Scope
from memhouse.core.principal import Reader
from memhouse.core.tenancy import account_context, rebind_account_for_tests
from retrieval import entities
from retrieval.entities import (
    alias_map,
    extract_mentions,
    index_knowledge,
    mention_key,
    rebuild_entities,
)
from retrieval.entity_resolution import resolve_entities
from retrieval.entity_tasks import index_entities
from retrieval.lexical import analyze
from retrieval.models import Entity, EntityMention
from retrieval.strategies import entity_match
from retrieval.strategies.base import StrategyContext
from tests.factories import KnowledgeFactory

PERSONAL = Knowledge.Sensitivity.PERSONAL
PUBLIC = Knowledge.Sensitivity.PUBLIC


# --- helpers ------------------------------------------------------------------------------


def _active(world: Any, statement: str, *, scope: Any = None, subject: Any = "default",
            sensitivity: str = Knowledge.Sensitivity.INTERNAL) -> Knowledge:
    kw: dict[str, Any] = {"statement": statement, "sensitivity": sensitivity}
    if scope is not None:
        kw["scope"] = scope
    if subject != "default":
        kw["subject_peer"] = subject
    item = KnowledgeFactory(world=world, **kw)
    transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    return item


def _reader(world: Any, peer: Any = None, posture: str = "peer") -> Reader:
    return Reader(account_id=world.account.id, posture=posture,
                  peer_id=peer.id if peer is not None else None)


def _social_ids(world: Any) -> tuple[Any, ...]:
    """The read scope /marketing/social and its ancestors: the authorised set."""
    return tuple(Scope.objects.filter(
        path__in=["/marketing/social", "/marketing", "/"]).values_list("id", flat=True))


def _ctx(world: Any, reader: Reader, query: str, *, scope_ids: tuple[Any, ...] | None = None,
         limit: int = 10) -> StrategyContext:
    return StrategyContext(reader=reader,
                           scope_ids=scope_ids if scope_ids is not None else _social_ids(world),
                           query=query, lexical=analyze(query), now=timezone.now(), limit=limit)


def _ids(result: Any) -> set[str]:
    return {kid for kid, _ in result.candidates}


def _snapshot() -> set[tuple[Any, ...]]:
    return set(EntityMention.objects.values_list(
        "entity__scope_id", "entity__canonical", "entity__kind", "entity__mention_count",
        "knowledge_id", "surface", "start", "end", "confidence"))


def _rows_of(item: Knowledge) -> set[tuple[Any, ...]]:
    return set(EntityMention.objects.filter(knowledge=item).values_list(
        "entity_id", "surface", "start", "end", "confidence"))


def _keys(text: str) -> list[str]:
    return [m.key for m in extract_mentions(text)]


# --- extraction ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("I went to a LGBTQ support group yesterday.", ["lgbtq"]),
    ("Caroline's dog is called Rex.", ["caroline", "rex"]),
    ("Melanie\u2019s car is red.", ["melanie"]),
    ("We moved to New York last May.", ["new york"]),
    ("Dana R. joined the team.", ["dana r"]),
    ("She works at Bank of America.", ["bank of america"]),
    ("The meeting with Bob is on Monday at 10:00 UTC.", ["bob"]),
    ("Yesterday Caroline went hiking.", ["caroline"]),
    ("Thanks Mel! Wow, that's great.", ["mel"]),
    ("We saw the Great Lakes and Jean-Luc met O'Brien.", ["great lakes", "jean-luc", "o'brien"]),
    ("Alice, Bob and Carol came.", ["alice", "bob", "carol"]),
])
def test_extraction_accepts_names(text: str, expected: list[str]) -> None:
    found = extract_mentions(text)
    assert [m.key for m in found] == expected
    for m in found:
        assert text[m.start:m.end] == m.surface
        assert 0 < m.confidence <= 1


@pytest.mark.parametrize("text", [
    "The weather was nice.",  # determiner
    "I think so.",  # pronoun
    "I'm sure we'll manage. Don't worry!",  # contractions
    "It starts at 10:00 UTC, or 9 PST, 4 PM CET, 11 AEST.",  # timezones, clock marker
    "See you on Monday! Sunday works too. In March, maybe.",  # weekday and month names
    "Yesterday was long.",  # sentence-initial relative date
    "Thanks! Wow. Hey, how are you? OK.",  # interjections
    "Great, see you soon. Good luck. Honestly!",  # sentence artefacts
    "I LOVE IT AND WILL DO IT",  # shouting common words
    "A plan. B.",  # lone letters
])
def test_extraction_rejects_closed_class_artefacts_dates_and_timezones(text: str) -> None:
    assert extract_mentions(text) == []


def test_a_common_word_is_an_artefact_only_at_the_start_of_a_sentence() -> None:
    assert _keys("Great food here.") == []
    assert _keys("They toured the Great Barrier Reef.") == ["great barrier reef"]
    initial, middle = extract_mentions("Caroline met Rex.")
    assert initial.confidence < middle.confidence  # a sentence start is weaker evidence


def test_mention_key_normalises() -> None:
    assert mention_key("  Dana   R. ") == "dana r"
    assert mention_key("Caroline\u2019s") == "caroline"
    assert mention_key("NEW  York") == "new york"


def test_alias_map_merges_exact_aliases_only_when_unambiguous() -> None:
    aliases = alias_map([("Melanie", ["Mel"]), ("Samuel", ["Sam"]), ("Samantha", ["Sam"]),
                         ("Bob", ["Melanie", "Bobby"])])
    assert aliases.resolve("mel") == "melanie"
    assert aliases.resolve("bobby") == "bob"
    assert aliases.resolve("melanie") == "melanie"  # another peer's display name wins
    assert aliases.resolve("sam") == "sam"  # an alias of two peers does not merge
    assert aliases.resolve("dana") == "dana"


# --- indexing -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_peer_aliases_merge_and_without_a_model_non_exact_names_do_not(world, settings):
    settings.MEMHOUSE_LLM_BASE_URL = ""  # no provider: resolution may not merge "Dana R."
    services.peer_create(account_id=world.account.id, key="melanie", kind="human",
                         display_name="Melanie", aliases=["Mel"])
    a = _active(world, "Mel painted a lake.", subject=None)
    b = _active(world, "We know that Melanie ran a charity race.", subject=None)
    c = _active(world, "They said Dana joined, and Dana R. left.", subject=None)
    index_knowledge(world.account.id, [a.id, b.id, c.id])
    assert resolve_entities(world.account.id)["links"] == 0
    mel = Entity.objects.get(canonical="melanie")
    assert (mel.mention_count, mel.kind, mel.scope_id) == (2, "person", world.scope.id)
    assert set(mel.mentions.values_list("surface", flat=True)) == {"Mel", "Melanie"}
    assert set(mel.mentions.values_list("confidence", flat=True)) == {1.0}  # a known peer
    assert not Entity.objects.filter(canonical="mel").exists()
    # Similar but not identical names need a model to confirm a merge: none here (see
    # test_entity_resolution for the same names with a model).
    assert set(Entity.objects.filter(canonical__startswith="dana")
               .values_list("canonical", flat=True)) == {"dana", "dana r"}
    assert Entity.objects.get(canonical="dana r").kind == "person"  # "Name X." shape


@pytest.mark.django_db
def test_the_same_name_in_two_scopes_is_two_entities(world):
    a = _active(world, "We hired Dana.", subject=None)
    b = _active(world, "We hired Dana.", subject=None, scope=world.root)
    index_knowledge(world.account.id, [a.id, b.id])
    assert sorted(Entity.objects.filter(canonical="dana").values_list("scope_id", flat=True)
                  ) == sorted([world.scope.id, world.root.id])


@pytest.mark.django_db
def test_incremental_index_is_idempotent_and_follows_lifecycle(world):
    a = _active(world, "Then Dana planned the Zephyr launch.", subject=None)
    counts = index_knowledge(world.account.id, [a.id])
    assert counts == {"statements": 1, "mentions": 2}
    first, rows_of_a = _snapshot(), _rows_of(a)
    entity_ids = set(Entity.objects.values_list("id", flat=True))
    assert index_entities(str(world.account.id), [str(a.id)]) == counts  # redelivery
    assert _snapshot() == first and _rows_of(a) == rows_of_a
    assert set(Entity.objects.values_list("id", flat=True)) == entity_ids

    b = _active(world, "So Dana reviewed the budget.", subject=None)
    index_knowledge(world.account.id, [b.id])
    assert Entity.objects.get(canonical="dana").mention_count == 2
    assert Entity.objects.count() == 2  # the same Dana, not a second one
    assert _rows_of(a) == rows_of_a  # incremental: a's rows untouched

    transition(b, "redacted", actor="system:test", reason="f4_subject_redacted")
    assert index_knowledge(world.account.id, [b.id]) == {"statements": 0, "mentions": 0}
    assert Entity.objects.get(canonical="dana").mention_count == 1
    transition(a, "redacted", actor="system:test", reason="f4_subject_redacted")
    index_knowledge(world.account.id, [a.id])
    assert not Entity.objects.exists() and not EntityMention.objects.exists()


@pytest.mark.django_db
def test_rebuild_replaces_the_index_of_a_scope(world):
    a = _active(world, "Then Dana planned the Zephyr launch.", subject=None)
    r = _active(world, "Our mascot is Quill.", subject=None, scope=world.root)
    index_knowledge(world.account.id, [a.id, r.id])
    # A stale row the rebuild must drop: an entity no statement mentions any more.
    ghost = Entity.objects.create(account_id=world.account.id, scope=world.scope,
                                  canonical="ghost", mention_count=1)
    EntityMention.objects.create(account_id=world.account.id, entity=ghost, knowledge=a,
                                 surface="Then", start=0, end=4, confidence=0.5)
    root_rows = {row for row in _snapshot() if row[0] == world.root.id}

    counts = rebuild_entities(world.account.id, world.scope.id)
    assert counts == {"statements": 1, "entities": 2, "mentions": 2}
    assert not Entity.objects.filter(canonical="ghost").exists()
    assert set(Entity.objects.filter(scope=world.scope).values_list("canonical", flat=True)
               ) == {"dana", "zephyr"}
    assert {row for row in _snapshot() if row[0] == world.root.id} == root_rows
    assert rebuild_entities(world.account.id) == {"statements": 2, "entities": 3,
                                                  "mentions": 3}


@pytest.mark.django_db(transaction=True)
def test_rebuild_computes_outside_transactions_and_a_failed_write_keeps_the_old_index(
        committed_world, monkeypatch):
    w = committed_world
    with account_context(w.account.id):
        a = _active(w, "Then Dana planned the Zephyr launch.", subject=None)
        old = _active(w, "Later Quill left.", subject=None)
    index_knowledge(w.account.id, [a.id, old.id])
    with account_context(w.account.id):
        transition(Knowledge.objects.get(pk=old.pk), "redacted", actor="system:test",
                   reason="f4_subject_redacted")  # the index is now stale for `old`
        _active(w, "Now Rex joined.", subject=None)
        before = _snapshot()
        old_mention_ids = set(EntityMention.objects.values_list("id", flat=True))
    assert any(row[1] == "quill" for row in before)

    seen: list[tuple[bool, bool]] = []
    real_compute = entities._compute

    def compute(*args: Any, **kwargs: Any) -> Any:
        seen.append((connection.in_atomic_block, connection.connection is None))
        return real_compute(*args, **kwargs)

    deleted_first: list[bool] = []

    def failing_bulk_create(*args: Any, **kwargs: Any) -> Any:
        deleted_first.append(not EntityMention.objects.filter(pk__in=old_mention_ids).exists())
        raise RuntimeError("disk full")

    monkeypatch.setattr(entities, "_compute", compute)
    monkeypatch.setattr(EntityMention.objects, "bulk_create", failing_bulk_create)
    with pytest.raises(RuntimeError, match="disk full"):
        rebuild_entities(w.account.id)
    assert deleted_first == [True]  # it failed after deleting the old rows...
    assert seen == [(False, True)]  # ...having computed with no transaction or connection
    with account_context(w.account.id):
        assert _snapshot() == before  # ...and the previous index is intact

    monkeypatch.undo()
    assert rebuild_entities(w.account.id) == {"statements": 2, "entities": 3, "mentions": 3}
    with account_context(w.account.id):
        assert set(Entity.objects.values_list("canonical", flat=True)) == {
            "dana", "zephyr", "rex"}


@pytest.mark.django_db
def test_entity_rows_are_confined_to_their_account(world):
    a = _active(world, "Then Dana planned the Zephyr launch.", subject=None)
    index_knowledge(world.account.id, [a.id])
    assert Entity.objects.count() == 2
    rebind_account_for_tests(world.other_account.id)
    try:
        assert Entity.objects.count() == 0 and EntityMention.objects.count() == 0
    finally:
        rebind_account_for_tests(world.account.id)


# --- entity_match -------------------------------------------------------------------------


@pytest.mark.django_db
def test_entity_match_returns_only_reader_visible_knowledge(world):
    sales = services.scope_ensure(account_id=world.account.id, path="/sales")
    shared = _active(world, "Now Dana leads the Zephyr launch.")  # internal, about Alice
    personal = _active(world, "Alice told Dana about her diagnosis.", sensitivity=PERSONAL)
    sibling = _active(world, "Now Dana runs the sales pipeline.", scope=sales, subject=None)
    ancestor = _active(world, "We know Dana founded the company.", scope=world.root,
                       subject=None, sensitivity=PUBLIC)
    index_knowledge(world.account.id, [shared.id, personal.id, sibling.id, ancestor.id])
    query = "What is Dana working on?"

    bob = entity_match.run(_ctx(world, _reader(world, world.member), query))
    assert bob.name == "entity_match" and bob.applicable
    assert _ids(bob) == {str(shared.id), str(ancestor.id)}
    alice = entity_match.run(_ctx(world, _reader(world, world.subject), query))
    assert _ids(alice) == {str(shared.id), str(ancestor.id), str(personal.id)}
    public = entity_match.run(_ctx(world, _reader(world, posture="public_only"), query))
    assert _ids(public) == {str(ancestor.id)}
    # The sibling scope is reachable only when it is authorised.
    sales_ctx = _ctx(world, _reader(world, world.member), query, scope_ids=(sales.id,))
    assert _ids(entity_match.run(sales_ctx)) == {str(sibling.id)}

    # Knowledge ids and scores only: no entity id or name leaves retrieval.
    out = repr(alice).lower()
    assert "dana" not in out
    assert not any(str(e) in out for e in Entity.objects.values_list("id", flat=True))
    assert all(set(d) == {"matched_entities"} for d in alice.details.values())


@pytest.mark.django_db
def test_entity_match_resolves_aliases_in_the_query(world):
    services.peer_create(account_id=world.account.id, key="melanie", kind="human",
                         display_name="Melanie", aliases=["Mel"])
    a = _active(world, "Then Melanie painted a lake.", subject=None)
    index_knowledge(world.account.id, [a.id])
    result = entity_match.run(_ctx(world, _reader(world, world.member), "What did Mel paint?"))
    assert _ids(result) == {str(a.id)}


@pytest.mark.django_db
def test_rarer_entities_count_more_and_order_is_score_then_id(world):
    common = [_active(world, f"We shipped Zephyr build {n}.", subject=None) for n in range(3)]
    rare = _active(world, "We shipped Quill today.", subject=None)
    both = _active(world, "We shipped Zephyr with Quill.", subject=None)
    index_knowledge(world.account.id, [k.id for k in [*common, rare, both]])
    result = entity_match.run(_ctx(world, _reader(world, world.member),
                                   "Tell me about Zephyr and Quill"))
    order = [kid for kid, _ in result.candidates]
    assert order[:2] == [str(both.id), str(rare.id)]
    assert order[2:] == sorted(str(k.id) for k in common)  # equal scores: by id
    scores = dict(result.candidates)
    assert scores[str(rare.id)] > scores[str(common[0].id)]
    assert result.details[str(both.id)] == {"matched_entities": 2}
    limited = entity_match.run(_ctx(world, _reader(world, world.member),
                                    "Tell me about Zephyr and Quill", limit=2))
    assert [kid for kid, _ in limited.candidates] == order[:2]


@pytest.mark.django_db
def test_each_entity_ranks_at_most_its_pool_of_strongest_mentions(world, monkeypatch):
    common = [_active(world, f"We shipped Zephyr build {n}.", subject=None) for n in range(4)]
    rare = _active(world, "We shipped Quill today.", subject=None)
    index_knowledge(world.account.id, [k.id for k in [*common, rare]])
    reader = _reader(world, world.member)
    assert len(entity_match.run(_ctx(world, reader, "Zephyr and Quill?")).candidates) == 5
    monkeypatch.setattr(entity_match, "POOL", 2)
    bounded = _ids(entity_match.run(_ctx(world, reader, "Zephyr and Quill?")))
    assert str(rare.id) in bounded and len(bounded & {str(k.id) for k in common}) == 2
    # Equally strong mentions enter the pool by statement id, whatever the plan or the
    # rows' places: the two smallest ids of the four.
    assert bounded & {str(k.id) for k in common} == set(sorted(str(k.id) for k in common)[:2])


@pytest.mark.django_db
def test_corpus_wide_entities_are_ignored_counting_visible_statements(world):
    zephyr = [_active(world, f"We shipped Zephyr build {n}.", subject=None) for n in range(5)]
    hidden = _active(world, "Alice said Zephyr drains her.", sensitivity=PERSONAL)
    quill = _active(world, "We paired Zephyr with Quill.", subject=None)
    fillers = [_active(world, f"it rained {n} times.", subject=None) for n in range(3)]
    index_knowledge(world.account.id, [k.id for k in [*zephyr, hidden, quill, *fillers]])

    # Alice sees 10 statements, 7 mention Zephyr (> max(5, 3)): corpus-wide for her.
    alice = _reader(world, world.subject)
    assert entity_match.run(_ctx(world, alice, "Zephyr?")).candidates == []
    assert _ids(entity_match.run(_ctx(world, alice, "Zephyr and Quill?"))) == {str(quill.id)}
    # Bob sees 9, 6 mention Zephyr: still corpus-wide; drop one more and it is not.
    bob = _reader(world, world.member)
    assert entity_match.run(_ctx(world, bob, "Zephyr?")).candidates == []
    transition(zephyr[0], "redacted", actor="system:test", reason="f4_subject_redacted")
    found = _ids(entity_match.run(_ctx(world, bob, "Zephyr?")))
    assert found == {str(k.id) for k in [*zephyr[1:], quill]}


@pytest.mark.django_db
def test_entity_match_is_not_applicable_without_names(world):
    a = _active(world, "Then Melanie painted a lake.", subject=None)
    index_knowledge(world.account.id, [a.id])
    reader = _reader(world, world.member)
    for query in ["what did she paint last week?", "The UTC time on Monday?", ""]:
        result = entity_match.run(_ctx(world, reader, query))
        assert (result.applicable, result.reason, result.candidates) == (
            False, "applicability", [])
    unknown = entity_match.run(_ctx(world, reader, "What did Rex paint?"))
    assert (unknown.applicable, unknown.candidates) == (True, [])  # a name, no match


# --- shared-entity neighbours ----------------------------------------------------------------


@pytest.mark.django_db
def test_shared_entity_neighbours_cap_per_seed_and_stay_inside_scope_ids(world):
    sales = services.scope_ensure(account_id=world.account.id, path="/sales")
    seed = _active(world, "Then Dana planned the Zephyr offsite.", subject=None)
    local = [_active(world, f"So Dana booked room {n}.", subject=None) for n in range(3)]
    ancestor = _active(world, "We know Dana founded the company.", scope=world.root,
                       subject=None)
    sibling = _active(world, "Now Dana runs the sales pipeline.", scope=sales, subject=None)
    hidden = _active(world, "Alice told Dana about her diagnosis.", sensitivity=PERSONAL)
    index_knowledge(world.account.id,
                    [k.id for k in [seed, *local, ancestor, sibling, hidden]])
    bob = _reader(world, world.member)
    ctx = _ctx(world, bob, "")

    capped = entity_match.shared_entity_neighbours(ctx, [str(seed.id)])
    assert len(capped) == 3 and {s for _, _, s in capped} == {str(seed.id)}
    assert [sc for _, sc, _ in capped] == sorted((sc for _, sc, _ in capped), reverse=True)
    everything = entity_match.shared_entity_neighbours(ctx, [str(seed.id)], per_seed_cap=10)
    assert {n for n, _, _ in everything} == {str(k.id) for k in [*local, ancestor]}
    # Without the ancestor in the authorised set, its statement is not reached.
    narrow = _ctx(world, bob, "", scope_ids=(world.scope.id,))
    assert {n for n, _, _ in entity_match.shared_entity_neighbours(
        narrow, [str(seed.id)], per_seed_cap=10)} == {str(k.id) for k in local}
    # Both endpoints must be authorised and visible: an outside or hidden seed yields nothing.
    assert entity_match.shared_entity_neighbours(ctx, [str(sibling.id)], per_seed_cap=10) == []
    assert entity_match.shared_entity_neighbours(ctx, [str(hidden.id)], per_seed_cap=10) == []
    # Seeds are never their own neighbours, and each seed has its own cap.
    two = entity_match.shared_entity_neighbours(ctx, [str(seed.id), str(local[0].id)],
                                                per_seed_cap=2)
    assert [s for _, _, s in two] == [str(seed.id)] * 2 + [str(local[0].id)] * 2
    assert not {n for n, _, _ in two} & {str(seed.id), str(local[0].id)}

    # Once Dana is everywhere (all 7 visible statements) it links nothing.
    more = [_active(world, f"So Dana signed form {n}.", subject=None) for n in range(2)]
    index_knowledge(world.account.id, [k.id for k in more])
    assert entity_match.shared_entity_neighbours(ctx, [str(seed.id)], per_seed_cap=10) == []


# --- operator command ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_rebuild_command_loops_accounts_and_prints_counts(committed_world):
    w = committed_world
    with account_context(w.account.id):
        _active(w, "Then Dana planned the Zephyr launch.", subject=None)
    out = io.StringIO()
    call_command("rebuild_entities", stdout=out)
    text = out.getvalue()
    assert f"{w.account.id}: 1 statements, 2 entities, 2 mentions" in text
    assert f"{w.other_account.id}: 0 statements, 0 entities, 0 mentions" in text
    assert "dana" not in text.lower()
    out = io.StringIO()
    call_command("rebuild_entities", account=str(w.account.id), stdout=out)
    assert str(w.other_account.id) not in out.getvalue()
    with pytest.raises(CommandError):
        call_command("rebuild_entities", account="00000000-0000-0000-0000-000000000000")
    with account_context(w.account.id):
        assert Entity.objects.count() == 2
