"""Scope relations and cross-scope expansion, authorised twice.

An administrator links two scopes (real HTTP); relation expansion then follows typed
relations and shared entities from a seed anchored at one endpoint to statements anchored
at the other, but only for a reader whose grants reach both endpoint scopes, only for
neighbours every visibility filter lets through, and at most LINKED_PER_SEED_CAP per seed.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.utils import timezone

from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import AuditEntry, Knowledge, Relation, Scope, ScopeRelation
from memhouse.core.principal import Reader
from memhouse.core.tenancy import account_context
from retrieval.entities import index_knowledge
from retrieval.lexical import analyze
from retrieval.strategies import relation
from retrieval.strategies.base import StrategyContext
from retrieval.vectors import embed_knowledge
from tests.factories import KnowledgeFactory

PERSONAL = Knowledge.Sensitivity.PERSONAL


def _active(world: Any, statement: str, *, scope: Any = None, subject: Any = None,
            sensitivity: str = Knowledge.Sensitivity.INTERNAL) -> Knowledge:
    item = KnowledgeFactory(world=world, statement=statement, scope=scope or world.scope,
                            subject_peer=subject, sensitivity=sensitivity)
    transition(item, "active", actor="system:test", reason="f4_gate_a_b_accepted")
    return item


def _reader(world: Any, roots: tuple[str, ...] | None = ("/",), peer: Any = None) -> Reader:
    return Reader(account_id=world.account.id, posture="peer",
                  peer_id=(peer or world.member).id, scope_roots=roots)


def _social_ids() -> tuple[Any, ...]:
    """A read at /marketing/social: the scope and its ancestors."""
    return tuple(Scope.objects.filter(path__in=["/marketing/social", "/marketing", "/"])
                 .values_list("id", flat=True))


def _expand(world: Any, reader: Reader, seeds: list[Knowledge]) -> dict[str, str]:
    ctx = StrategyContext(reader=reader, scope_ids=_social_ids(), query="", lexical=analyze(""),
                          now=timezone.now(), limit=50, seeds=tuple(str(s.id) for s in seeds))
    result = relation.run(ctx)
    return {kid: result.details[kid]["via"] for kid, _ in result.candidates}


def _link(world: Any, a: str, b: str) -> ScopeRelation:
    return ScopeRelation.objects.create(account=world.account,
                                        source=Scope.objects.get(path=a),
                                        target=Scope.objects.get(path=b))


# --- the strategy -------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_link_is_followed_only_when_the_reader_may_read_both_endpoints(world):
    services.scope_ensure(account_id=world.account.id, path="/sales")
    seed = _active(world, "The social team planned the spring campaign.")
    deal = _active(world, "The sales team closed the spring deal.",
                   scope=Scope.objects.get(path="/sales"))
    Relation.objects.create(account=world.account, source=seed, target=deal, type="related")
    everywhere = _reader(world)
    # No link: a relation into another scope is not followed, whatever the grants.
    assert str(deal.id) not in _expand(world, everywhere, [seed])

    _link(world, "/marketing/social", "/sales")
    assert _expand(world, everywhere, [seed]) == {str(deal.id): "linked_relation"}
    # Grants that stop short of /sales: the linked scope contributes nothing.
    assert _expand(world, _reader(world, ("/marketing",)), [seed]) == {}
    # Grants that reach /sales but not the seed's own scope: not followed either.
    assert _expand(world, _reader(world, ("/marketing/paid", "/sales")), [seed]) == {}
    # The link is undirected.
    ScopeRelation.objects.all().delete()
    _link(world, "/sales", "/marketing/social")
    assert _expand(world, everywhere, [seed]) == {str(deal.id): "linked_relation"}


@pytest.mark.django_db
def test_a_link_from_an_inherited_ancestor_needs_grants_on_that_ancestor(world):
    services.scope_ensure(account_id=world.account.id, path="/sales")
    marketing = Scope.objects.get(path="/marketing")
    seed = _active(world, "Marketing owns the brand book.", scope=marketing)
    local = _active(world, "The social team posts on Tuesdays.")
    deal = _active(world, "Sales quotes the brand book to clients.",
                   scope=Scope.objects.get(path="/sales"))
    for other in (deal, local):
        Relation.objects.create(account=world.account, source=seed, target=other,
                                type="related")
    _link(world, "/marketing", "/sales")
    assert _expand(world, _reader(world), [seed]) == {str(local.id): "relation",
                                                      str(deal.id): "linked_relation"}
    # A read at /marketing/social sees /marketing's statements, but grants on
    # /marketing/social and /sales do not reach /marketing: its link is not followed.
    narrow = _reader(world, ("/marketing/social", "/sales"))
    assert _expand(world, narrow, [seed]) == {str(local.id): "relation"}
    # A link touches exactly its two scopes: a seed below /marketing does not use it.
    below = _active(world, "The social team reuses the brand book.")
    Relation.objects.create(account=world.account, source=below, target=deal, type="related")
    assert str(deal.id) not in _expand(world, _reader(world), [below])


@pytest.mark.django_db
def test_linked_neighbours_pass_every_visibility_filter(world):
    sales = services.scope_ensure(account_id=world.account.id, path="/sales")
    seed = _active(world, "The social team planned the spring campaign.")
    personal = _active(world, "Alice told sales about her diagnosis.", scope=sales,
                       subject=world.subject, sensitivity=PERSONAL)
    held = KnowledgeFactory(world=world, statement="Sales may reorganise.", scope=sales,
                            subject_peer=None)
    transition(held, "held", actor="system:test", reason="f4_scope_hold")
    for other in (personal, held):
        Relation.objects.create(account=world.account, source=seed, target=other,
                                type="related")
    _link(world, "/marketing/social", "/sales")
    assert _expand(world, _reader(world), [seed]) == {}  # bob reads: neither is his to see
    assert _expand(world, _reader(world, peer=world.subject), [seed]) == {
        str(personal.id): "linked_relation"}


@pytest.mark.django_db
def test_linked_scopes_contribute_at_most_the_per_seed_cap(world):
    sales = services.scope_ensure(account_id=world.account.id, path="/sales")
    seeds = [_active(world, f"The social team planned campaign {n}.") for n in range(2)]
    deals = [_active(world, f"The sales team closed deal {n}.", scope=sales) for n in range(6)]
    for seed in seeds:
        for deal in deals:
            Relation.objects.create(account=world.account, source=seed, target=deal,
                                    type="related")
    _link(world, "/marketing/social", "/sales")
    cap = relation.LINKED_PER_SEED_CAP
    assert cap < len(deals)
    one = _expand(world, _reader(world), seeds[:1])
    assert len(one) == cap and set(one.values()) == {"linked_relation"}
    # Each seed has its own cap (the second seed adds its own best, which may coincide).
    assert cap <= len(_expand(world, _reader(world), seeds)) <= 2 * cap


@pytest.mark.django_db
def test_shared_entities_cross_a_link_only_when_authorised_and_capped(world):
    sales = services.scope_ensure(account_id=world.account.id, path="/sales")
    seed = _active(world, "Then Dana planned the Zephyr offsite.")
    theirs = [_active(world, f"So Zephyr signed contract {n}.", scope=sales) for n in range(4)]
    filler = [_active(world, f"Sales met client number {n}.", scope=sales) for n in range(8)]
    index_knowledge(world.account.id, [k.id for k in [seed, *theirs, *filler]])
    assert _expand(world, _reader(world), [seed]) == {}  # no link: the name stays home
    _link(world, "/marketing/social", "/sales")
    found = _expand(world, _reader(world), [seed])
    assert len(found) == relation.LINKED_PER_SEED_CAP
    assert set(found) <= {str(k.id) for k in theirs} and set(found.values()) == {
        "linked_entity"}
    assert _expand(world, _reader(world, ("/marketing",)), [seed]) == {}


# --- the admin API and the search, over real HTTP ----------------------------------------


def _call(live_server: Any, key: str, method: str, path: str, body: Any = None) -> Any:
    return httpx.request(method, f"{live_server.url}/api/v1/{path}", json=body,
                         headers={"Authorization": f"Bearer {key}"}, timeout=30)


@pytest.fixture
def admin_key(committed_world: Any) -> str:
    w = committed_world
    with account_context(w.account.id):
        dave = services.peer_create(account_id=w.account.id, key="dave", kind="human",
                                    display_name="Dave", password="dave-pass-1234",
                                    is_admin=True, is_curator=True)
        services.scope_ensure(account_id=w.account.id, path="/sales")
        return services.token_issue(peer=dave)[1]


@pytest.mark.django_db(transaction=True)
def test_administrators_create_list_and_delete_links_with_4xx_for_bad_input(
        live_server, committed_world, admin_key):
    w = committed_world
    r = _call(live_server, admin_key, "POST", "scopes/relations",
              {"source": "/marketing/social/", "target": "/sales"})
    assert r.status_code == 201, r.text
    made = r.json()
    assert (made["source"], made["target"], made["created_by"]) == (
        "/marketing/social", "/sales", "dave")
    bad = [
        ({"source": "/sales", "target": "/marketing/social"}, 409, "scope_relation_exists"),
        ({"source": "/sales", "target": "/sales/"}, 400, "scope_relation_self"),
        ({"source": "/sales", "target": "/nowhere"}, 404, "not_found"),
        ({"source": "sales", "target": "/marketing"}, 400, "invalid_scope_path"),
        ({"source": "/sales"}, 400, "invalid_input"),
        ({"source": ["/sales"], "target": "/marketing"}, 400, "invalid_input"),
    ]
    for body, status, code in bad:
        r = _call(live_server, admin_key, "POST", "scopes/relations", body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), (body, r.text)
    listed = _call(live_server, admin_key, "GET", "scopes/relations").json()["relations"]
    assert listed == [made]
    # Members, curators-only and agents may not manage links.
    with account_context(w.account.id):
        bob_token = services.token_issue(peer=w.member)[1]
    for key, code in ((bob_token, "admin_only"), (w.agent_key, "human_only")):
        for method, path, body in (("GET", "scopes/relations", None),
                                   ("POST", "scopes/relations",
                                    {"source": "/", "target": "/sales"}),
                                   ("DELETE", f"scopes/relations/{made['id']}", None)):
            r = _call(live_server, key, method, path, body)
            assert (r.status_code, r.json()["error"]["code"]) == (403, code), (path, r.text)
    # Another Account's administrator sees nothing and deletes nothing.
    r = _call(live_server, w.outsider_key, "DELETE", f"scopes/relations/{made['id']}")
    assert r.status_code in (403, 404)
    r = _call(live_server, admin_key, "DELETE", f"scopes/relations/{made['id']}")
    assert r.status_code == 200 and r.json() == {"id": made["id"], "deleted": True}
    r = _call(live_server, admin_key, "DELETE", f"scopes/relations/{made['id']}")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    with account_context(w.account.id):
        assert not ScopeRelation.objects.exists()
        events = list(AuditEntry.objects.filter(event_type__startswith="scope_relation.")
                      .order_by("seq").values_list("event_type", "actor", "payload"))
    assert events == [
        ("scope_relation.created", "peer:dave", {"source": "/marketing/social",
                                                 "target": "/sales"}),
        ("scope_relation.deleted", "peer:dave", {"source": "/marketing/social",
                                                 "target": "/sales"}),
    ]


@pytest.mark.django_db(transaction=True)
def test_administrators_with_narrow_grants_cannot_link_outside_them(
        live_server, committed_world, admin_key):
    w = committed_world
    with account_context(w.account.id):
        from knowledge.models import Peer

        Peer.objects.filter(key="dave").update(scope_paths=["/marketing"])
        token = services.token_issue(peer=Peer.objects.get(key="dave"))[1]
    r = _call(live_server, token, "POST", "scopes/relations",
              {"source": "/marketing/social", "target": "/sales"})
    nowhere = _call(live_server, token, "POST", "scopes/relations",
                    {"source": "/marketing/social", "target": "/nowhere"})
    assert r.status_code == 404 and r.json() == nowhere.json()  # no existence oracle


@pytest.mark.django_db(transaction=True)
def test_search_reaches_a_linked_scope_only_for_readers_authorised_for_it(
        live_server, committed_world, admin_key):
    w = committed_world
    with account_context(w.account.id):
        sales = Scope.objects.get(path="/sales")
        seed = _active(w, "Alice loves hiking in the mountains with her dog.")
        deal = _active(w, "The sales team closed the Lisbon deal.", scope=sales)
        Relation.objects.create(account=w.account, source=seed, target=deal, type="related")
        # A person whose grants stop at /marketing, reading with their own token.
        narrow = services.peer_create(account_id=w.account.id, key="nina", kind="human",
                                      display_name="Nina", password="nina-pass-1234")
        narrow.scope_paths = ["/marketing"]
        narrow.save(update_fields=["scope_paths"])
        nina = services.token_issue(peer=narrow)[1]
    embed_knowledge(w.account.id, [seed.id, deal.id])

    def expanded(key: str, **extra: Any) -> tuple[list[str], list[str]]:
        r = _call(live_server, key, "POST", "search",
                  {"query": "mountains dog", "scope": "/marketing/social",
                   "profile": "thorough", "deadline_ms": 5000, **extra})
        assert r.status_code == 200, r.text
        cands = r.json()["candidates"]
        return ([c["id"] for c in cands if "relation_expand" in c["scores"]],
                [c["id"] for c in cands])

    assert str(deal.id) not in expanded(w.agent_key, peer_key="bob")[0]
    before = expanded(nina)
    r = _call(live_server, admin_key, "POST", "scopes/relations",
              {"source": "/marketing/social", "target": "/sales"})
    assert r.status_code == 201
    assert str(deal.id) in expanded(w.agent_key, peer_key="bob")[0]
    # Nina's grants do not reach /sales: the link changes nothing for her.
    assert expanded(nina) == before and str(deal.id) not in before[1]
