"""Entity resolution beyond exact aliases: a model confirms every non-exact merge.

"Dana", "Dana R." and "our copy lead" become one entity of one scope only after the
configured provider (a fake OpenAI-compatible server on 127.0.0.1) says so; without a
provider only exact aliases merge. Links never widen what a reader sees.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from governance import tasks
from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Scope, UsageEntry
from memhouse.core.llm import get_provider
from memhouse.core.principal import Reader
from memhouse.core.tenancy import account_context
from retrieval.embedding import get_embedder
from retrieval.entities import extract_all_mentions, index_knowledge, rebuild_entities
from retrieval.entity_resolution import (
    RESOLUTION_SCHEMA,
    linked_keys,
    name_candidate,
    resolve_entities,
)
from retrieval.lexical import analyze
from retrieval.models import Entity, EntityJudgement, EntityLink, KnowledgeVector
from retrieval.strategies import entity_match
from retrieval.strategies.base import StrategyContext
from retrieval.vectors import space_ensure
from tests.factories import KnowledgeFactory
from tests.memhouse.test_llm import Reply, completion

PERSONAL = Knowledge.Sensitivity.PERSONAL


def _active(world: Any, statement: str, *, scope: Any = None, subject: Any = None,
            sensitivity: str = Knowledge.Sensitivity.INTERNAL) -> Knowledge:
    kw: dict[str, Any] = {"statement": statement, "sensitivity": sensitivity,
                          "subject_peer": subject}
    if scope is not None:
        kw["scope"] = scope
    item = KnowledgeFactory(world=world, **kw)
    transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    return item


def _vectors(world: Any, items: dict[Any, int]) -> None:
    """Context vectors in the configured embedder's space: statements given the same
    axis are about the same thing (exact, so the candidate order is known)."""
    space = space_ensure(get_embedder().identity)
    for item, axis in items.items():
        vec = [0.0] * space.dims
        vec[axis] = 1.0
        KnowledgeVector.objects.create(account=world.account, knowledge=item, space=space,
                                       embedding=vec)


def _verdicts(*same: bool) -> Reply:
    body = {"verdicts": [{"pair": n, "same_entity": v} for n, v in enumerate(same, 1)]}
    return Reply(body={**completion(json.dumps(body)),
                       "usage": {"prompt_tokens": 120, "completion_tokens": 30}})


def _ids(world: Any, reader: Reader, query: str, scope_ids: Any = None) -> set[str]:
    if scope_ids is None:
        scope_ids = tuple(Scope.objects.filter(path__in=["/marketing/social", "/marketing",
                                                          "/"]).values_list("id", flat=True))
    ctx = StrategyContext(reader=reader, scope_ids=scope_ids, query=query,
                          lexical=analyze(query), now=timezone.now(), limit=20)
    return {kid for kid, _ in entity_match.run(ctx).candidates}


def _member(world: Any) -> Reader:
    return Reader(account_id=world.account.id, posture="peer", peer_id=world.member.id)


@pytest.fixture
def team(world: Any) -> dict[str, Knowledge]:
    items = {
        "dana": _active(world, "Dana drafted the launch copy."),
        "dana_r": _active(world, "Yesterday Dana R. approved the tagline."),
        "lead": _active(world, "Our copy lead wants shorter headlines."),
        "mel": _active(world, "Melanie painted a lake."),
        # Personal and about Alice: only Alice may read it, linked or not.
        "private": _active(world, "Alice told Dana R. about her diagnosis.",
                           subject=world.subject, sensitivity=PERSONAL),
    }
    index_knowledge(world.account.id, [k.id for k in items.values()])
    _vectors(world, {items["dana"]: 0, items["dana_r"]: 0, items["lead"]: 0,
                     items["mel"]: 1, items["private"]: 2})
    return items


# --- candidates ---------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("dana", "dana r", True),  # containment
    ("dana r", "dana rossi", True),  # an initial
    ("d rossi", "dana rossi", True),
    ("mel", "melanie", True),  # a short form
    ("dana", "dan", False),  # not a whole leading word, and too short a prefix
    ("dana r", "dana k", False),  # two different initials
    ("d r", "dana rossi", False),  # initials only
    ("dana", "dana", False),  # exact: already one entity
    ("copy lead", "dana", False),  # a description is an embedding candidate only
])
def test_name_candidates(a: str, b: str, expected: bool) -> None:
    assert name_candidate(a, b) is expected


def test_role_descriptions_are_indexed_without_their_determiner() -> None:
    assert [(m.surface, m.key) for m in extract_all_mentions(
        "Our copy lead asked the lead designer, and Dana R. agreed.")] == [
        ("copy lead", "copy lead"), ("lead designer", "lead designer"),
        ("Dana R.", "dana r")]
    assert extract_all_mentions("my boss and the most senior engineer") == []


# --- without a model ------------------------------------------------------------------------


@pytest.mark.django_db
def test_without_a_provider_only_exact_aliases_merge(world, team, settings):
    settings.MEMHOUSE_LLM_BASE_URL = ""
    assert get_provider() is None
    out = resolve_entities(world.account.id)
    assert (out["model"], out["asked"], out["links"]) == (False, 0, 0)
    assert not EntityLink.objects.exists() and not EntityJudgement.objects.exists()
    assert {"dana", "dana r", "copy lead"} <= set(
        Entity.objects.filter(scope=world.scope).values_list("canonical", flat=True))
    assert _ids(world, _member(world), "What did Dana write?") == {str(team["dana"].id)}


# --- with a model -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_model_confirms_the_merge_and_it_is_metered_and_cached(committed_world,
                                                                 fake_openai):
    w = committed_world
    with account_context(w.account.id):
        team = {
            "dana": _active(w, "Dana drafted the launch copy."),
            "dana_r": _active(w, "Yesterday Dana R. approved the tagline."),
            "lead": _active(w, "Our copy lead wants shorter headlines."),
            "mel": _active(w, "Melanie painted a lake."),
        }
        _vectors(w, {team["dana"]: 0, team["dana_r"]: 0, team["lead"]: 0, team["mel"]: 1})
    index_knowledge(w.account.id, [k.id for k in team.values()])
    fake_openai.script.append(_verdicts(True, True, True))

    # The model is called with no transaction open and no connection held.
    seen: list[tuple[bool, bool]] = []
    real = get_provider()

    class Watching:
        name = "watching"

        def complete_json(self, **kwargs: Any) -> dict[str, Any]:
            seen.append((connection.in_atomic_block, connection.connection is None))
            assert real is not None
            return real.complete_json(**kwargs)

    out = resolve_entities(w.account.id, [w.scope.id], provider=Watching())
    assert seen == [(False, True)]
    assert (out["asked"], out["confirmed"], out["links"]) == (3, 3, 2)

    request = fake_openai.requests[0]["json"]
    fmt = request["response_format"]["json_schema"]
    assert (fmt["name"], fmt["strict"], fmt["schema"]) == (
        "entity_resolution_v1", True, RESOLUTION_SCHEMA)
    prompt = request["messages"][1]["content"]
    # Best candidates first; the prompt quotes each name's own wording and statements.
    assert "Pair 1: A = 'copy lead'; B = 'Dana'" in prompt
    assert "Pair 3: A = 'Dana'; B = 'Dana R.'" in prompt
    assert "Melanie" not in prompt  # no candidate: another name, another context

    with account_context(w.account.id):
        assert linked_keys(w.account.id, w.scope.id) == {"dana r": "dana", "copy lead": "dana"}
        assert EntityJudgement.objects.count() == 3
        assert not any("dana" in d for d in EntityJudgement.objects.values_list(
            "pair_digest", flat=True))  # the cache holds no name
        # Billed to the Account: one call, its tokens.
        usage = dict(UsageEntry.objects.filter(kind__in=["model_call", "model_tokens"])
                     .values_list("kind", "units"))
        assert usage == {"model_call": 1, "model_tokens": 150}
        linked = {str(team[k].id) for k in ("dana", "dana_r", "lead")}
        for query in ["What did Dana write?", "Did Dana R. approve it?",
                      "What does our copy lead want?"]:
            assert _ids(w, _member(w), query) == linked, query
        assert _ids(w, _member(w), "What did Melanie paint?") == {str(team["mel"].id)}

    # Redelivery asks nothing again: the verdicts are cached.
    again = tasks.resolve_entity_scopes.delay(str(w.account.id), [str(w.scope.id)]).get()
    assert (again["asked"], again["links"]) == (0, 2)
    assert len(fake_openai.requests) == 1

    # An index rebuild drops the links with its rows; the operator command relinks them
    # from the cached verdicts without calling the model.
    rebuild_entities(w.account.id)
    with account_context(w.account.id):
        assert not EntityLink.objects.exists()
    text = io.StringIO()
    call_command("rebuild_entities", account=str(w.account.id), stdout=text)
    assert "2 links" in text.getvalue() and "dana" not in text.getvalue().lower()
    assert len(fake_openai.requests) == 1
    with account_context(w.account.id):
        assert linked_keys(w.account.id, w.scope.id) == {"dana r": "dana", "copy lead": "dana"}


@pytest.mark.django_db
def test_a_refused_pair_never_ends_up_in_one_group(world, team, fake_openai):
    # Pairs, best first: copy lead/Dana, Dana/Dana R., copy lead/Dana R. (Alice and
    # Dana R. are named in the same statement: alike for that reason alone, no pair). The
    # model refuses Dana = Dana R., so joining copy lead and Dana R. would put a refused
    # pair in one group: only the first join is made.
    fake_openai.script.append(_verdicts(True, False, True))
    out = resolve_entities(world.account.id, [world.scope.id])
    prompt = fake_openai.requests[0]["json"]["messages"][1]["content"]
    assert "Pair 2: A = 'Dana'; B = 'Dana R.'" in prompt
    assert "Pair 3: A = 'copy lead'; B = 'Dana R.'" in prompt
    assert "A = 'Alice'" not in prompt
    assert (out["confirmed"], out["refused"], out["links"]) == (2, 1, 1)
    assert linked_keys(world.account.id, world.scope.id) == {"copy lead": "dana"}
    assert _ids(world, _member(world), "Did Dana R. approve it?") == {str(team["dana_r"].id)}


@pytest.mark.django_db
def test_a_failed_model_call_merges_nothing_and_is_asked_again(world, team, fake_openai):
    fake_openai.script.append(Reply(400, {"error": {"message": "bad request"}}))
    out = resolve_entities(world.account.id, [world.scope.id])
    assert (out["failed_calls"], out["links"]) == (1, 0)
    assert not EntityJudgement.objects.exists() and not EntityLink.objects.exists()
    fake_openai.script.append(_verdicts(True, True, True))
    assert resolve_entities(world.account.id, [world.scope.id])["links"] == 2


@pytest.mark.django_db
def test_a_merge_never_widens_what_a_reader_sees(world, team, fake_openai):
    fake_openai.script.append(_verdicts(True, True, True))
    resolve_entities(world.account.id, [world.scope.id])
    linked = {str(team[k].id) for k in ("dana", "dana_r", "lead")}
    # Bob does not see Alice's personal statement through the link; Alice does.
    assert _ids(world, _member(world), "What did Dana do?") == linked
    alice = Reader(account_id=world.account.id, posture="peer", peer_id=world.subject.id)
    assert _ids(world, alice, "What did Dana do?") == linked | {str(team["private"].id)}
    # The link is bound to its scope: the same name in another authorised scope is not
    # reached through it.
    sales = services.scope_ensure(account_id=world.account.id, path="/sales")
    other = _active(world, "Now Dana R. runs the sales pipeline.", scope=sales)
    index_knowledge(world.account.id, [other.id])
    both = (world.scope.id, sales.id)
    assert _ids(world, _member(world), "What did our copy lead do?", both) == linked
    # Once a linked statement is withdrawn, it is gone from the group's results too.
    transition(team["dana_r"], "redacted", actor="system:test", reason="f4_subject_redacted")
    assert str(team["dana_r"].id) not in _ids(world, _member(world), "What did Dana do?")


@pytest.mark.django_db
def test_a_name_withdrawn_from_use_takes_its_links_with_it(world, team, fake_openai):
    from governance.services import drop_derived_rows

    fake_openai.script.append(_verdicts(True, True, True))
    resolve_entities(world.account.id, [world.scope.id])
    # "Dana R." is the most mentioned name of the group here, so it is the canonical one.
    assert linked_keys(world.account.id, world.scope.id) == {"dana": "dana r",
                                                             "copy lead": "dana r"}
    # The only statement saying "our copy lead" is withdrawn (the erasure and redaction
    # paths call this): its entity goes, and the link with it, in the same transaction.
    transition(team["lead"], "redacted", actor="system:test", reason="f4_subject_redacted")
    drop_derived_rows([team["lead"].id])
    assert linked_keys(world.account.id, world.scope.id) == {"dana": "dana r"}
    assert not Entity.objects.filter(canonical="copy lead").exists()
