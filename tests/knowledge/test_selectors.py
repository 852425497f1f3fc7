"""Scope tree helpers and reader visibility inside the query."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge import selectors, services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Scope
from knowledge.selectors import knowledge_for_read, reader_for, scope_for_read
from memhouse.core.errors import ApplicationError, NotFound
from memhouse.core.principal import Principal, Reader, ancestor_paths, internal_reader, path_within
from tests.factories import KnowledgeFactory, active_statement

pytestmark = pytest.mark.django_db


def _principal(world, peer=None, scopes=("/",), act_for_all=True) -> Principal:
    return Principal(account_id=world.account.id, peer=peer, via="api_key", scope_paths=scopes,
                     act_for_all=act_for_all)


def test_path_helpers():
    assert ancestor_paths("/marketing/social") == ["/marketing/social", "/marketing", "/"]
    assert ancestor_paths("/") == ["/"]
    assert path_within("/marketing/social", "/marketing")
    assert not path_within("/marketingx", "/marketing")
    assert not path_within("/marketing", "/marketing/social")


def test_scope_ensure_builds_the_chain_and_settings_inherit_nearest_wins(world):
    deep = services.scope_ensure(account_id=world.account.id, path="/marketing/social/x/")
    assert deep.path == "/marketing/social/x" and deep.parent == world.scope
    mid = Scope.objects.get(path="/marketing")
    Scope.objects.filter(pk=world.root.pk).update(settings={"retrieval_profile": "fast"})
    assert selectors.scope_setting(scope=deep, key="retrieval_profile") == "fast"
    Scope.objects.filter(pk=mid.pk).update(settings={"retrieval_profile": "thorough"})
    assert selectors.scope_setting(scope=deep, key="retrieval_profile") == "thorough"
    assert selectors.scope_setting(scope=deep, key="missing", default=1) == 1
    with pytest.raises(ApplicationError):
        services.scope_ensure(account_id=world.account.id, path="relative/path")
    with pytest.raises(ApplicationError):
        services.scope_ensure(account_id=world.account.id, path="/a/../b")


def test_reader_postures(world):
    r = reader_for(principal=_principal(world, world.agent))
    assert (r.posture, r.peer_id) == ("peer", world.agent.id)  # machine key reads as its peer
    r = reader_for(principal=_principal(world, world.agent), peer_key="alice")
    assert (r.posture, r.peer_id) == ("peer", world.subject.id)
    assert reader_for(principal=_principal(world)).posture == "public_only"
    with pytest.raises(ApplicationError) as exc:
        reader_for(principal=_principal(world, world.agent), peer_key="nobody")
    assert exc.value.code == "unknown_peer_key"
    with pytest.raises(ApplicationError):
        reader_for(principal=_principal(world, world.agent), peer_key="mallory")  # other Account
    # Without an act-for grant a machine key reads only as itself; a human never for others.
    with pytest.raises(ApplicationError) as exc:
        reader_for(principal=_principal(world, world.agent, act_for_all=False), peer_key="alice")
    assert exc.value.code == "act_for_denied" and exc.value.status_code == 403
    with pytest.raises(ApplicationError) as exc:
        reader_for(principal=_principal(world, world.member), peer_key="alice")
    assert exc.value.code == "act_for_denied"
    assert reader_for(principal=_principal(world, world.subject), peer_key="alice").peer_id == (
        world.subject.id)


def test_scope_authorisation_stays_the_credentials(world):
    services.scope_ensure(account_id=world.account.id, path="/engineering")
    reader = reader_for(principal=_principal(world, world.agent, scopes=("/marketing",)),
                        peer_key="alice")
    assert scope_for_read(reader=reader, path="/marketing/social") == world.scope
    with pytest.raises(NotFound):
        scope_for_read(reader=reader, path="/engineering")
    with pytest.raises(NotFound):
        scope_for_read(reader=reader, path="/marketing/none")


def _ids(reader: Reader, scope) -> set:
    return set(knowledge_for_read(reader=reader, scope=scope).values_list("id", flat=True))


def test_visibility_by_reader_sensitivity_state_scope_and_expiry(world):
    acct = world.account.id
    sibling = services.scope_ensure(account_id=acct, path="/marketing/paid")
    parent = Scope.objects.get(path="/marketing")
    personal = active_statement(world, "Alice has asthma", sensitivity="personal")
    internal = active_statement(world, "Alice likes tea")
    public = active_statement(world, "Alice leads design", sensitivity="public")
    about_scope = active_statement(world, "The team ships Fridays", subject_peer=None,
                          sensitivity="personal", scope=parent)
    in_sibling = active_statement(world, "Paid ads budget", scope=sibling)
    provisional = KnowledgeFactory(world=world, statement="Alice may move to Oslo")
    transition(provisional, "provisional", actor="system:test", reason="f4_gate_a_b_deferred")
    proposed = KnowledgeFactory(world=world, statement="Alice is proposed")
    expired_now = active_statement(world, "Alice is on leave")
    Knowledge.objects.filter(pk=expired_now.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1))  # sweeper has not run yet
    alice = Reader(account_id=acct, posture="peer", peer_id=world.subject.id)
    bob = Reader(account_id=acct, posture="peer", peer_id=world.member.id)
    nobody = Reader(account_id=acct, posture="public_only")
    base = {internal.id, public.id, about_scope.id}
    assert _ids(alice, world.scope) == base | {personal.id, provisional.id}
    assert _ids(bob, world.scope) == base
    assert _ids(nobody, world.scope) == {public.id}
    everything = _ids(internal_reader(acct), world.scope)
    assert everything == base | {personal.id}  # internal: lifecycle only, no provisional
    assert in_sibling.id not in everything and proposed.id not in everything
    assert _ids(bob, sibling) == {in_sibling.id, about_scope.id}


def test_scope_setting_write_is_the_one_writer_and_reads_see_it(world):
    scope = world.scope
    updated = services.scope_setting_write(scope=scope, key="retrieval_profile", value="fast")
    assert updated.settings["retrieval_profile"] == "fast"
    services.scope_setting_write(scope=scope, key="other", value={"a": 1})
    assert selectors.scope_setting(scope=scope, key="retrieval_profile") == "fast"
    cleared = services.scope_setting_write(scope=scope, key="retrieval_profile", value=None)
    assert cleared.settings == {"other": {"a": 1}}
    assert selectors.scope_setting(scope=scope, key="retrieval_profile", default="x") == "x"


def test_scope_for_read_keeps_the_chain_for_the_request(world):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    services.scope_setting_write(scope=world.root, key="retrieval_profile", value="fast")
    reader = Reader(account_id=world.account.id, posture="internal", scope_roots=None)
    with CaptureQueriesContext(connection) as q:
        scope = scope_for_read(reader=reader, path="/marketing/social")
        chain = selectors.scope_chain(scope)
        assert selectors.scope_setting(scope=scope, key="retrieval_profile") == "fast"
    assert len(q.captured_queries) == 1
    assert chain.paths == ("/marketing/social", "/marketing", "/")
    assert chain.ids[0] == scope.pk and chain.ids[-1] == world.root.pk
