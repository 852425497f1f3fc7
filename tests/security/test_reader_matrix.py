"""Reader matrix: every reader posture x sensitivity x audience/level x lifecycle state
gets exactly the seed's visibility, through visible_knowledge and search (API and engine),
spot-checked through lineage, context, stable-profile, me/knowledge and the curator views;
and a reader's search / ask / context response is the same whether or not a hidden
matching row exists (only the documented `authorization_filtered` flag may differ).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, replace
from typing import Any

import pytest
from rest_framework.test import APIClient

from knowledge.selectors import knowledge_for_read, reader_for
from memhouse.core.principal import Principal, Reader, internal_reader
from memhouse.core.tenancy import account_context, rebind_account_for_tests
from tests.security.corpus import (
    AUDIENCES,
    EXTRAS,
    SENSITIVITIES,
    STATES,
    Cell,
    Corpus,
    api,
)

SOCIAL = "/marketing/social"

# --- the expected tables ----------------------------------------------------------------

# Seed retrieval-and-context.txt, "A read is performed for a peer": what each posture sees.
#   named peer_key / machine credential as its own peer / password session as itself:
#     "Public and internal statements, that peer's own statements, statements about the
#      scope rather than about a person, and anything promoted to scope or account level"
#   peerless credential naming no peer: "Public statements only"
#   server-side work: "The whole corpus, narrowed only by lifecycle"
# Audience classes of a row relative to the reader: own | other | about_scope | promoted.
SEES: dict[str, dict[str, frozenset[str]]] = {
    "peer": {
        "public": frozenset({"own", "other", "about_scope", "promoted"}),
        "internal": frozenset({"own", "other", "about_scope", "promoted"}),
        "personal": frozenset({"own", "about_scope", "promoted"}),
        "restricted": frozenset({"own", "about_scope", "promoted"}),
    },
    "public_only": {
        "public": frozenset({"own", "other", "about_scope", "promoted"}),
        "internal": frozenset(), "personal": frozenset(), "restricted": frozenset(),
    },
    "internal": {s: frozenset({"own", "other", "about_scope", "promoted"})
                 for s in SENSITIVITIES},
}

# Seed memory-model.txt, lifecycle state contract, column "Search and /ask".
SEARCH: dict[str, str] = {
    "proposed": "no", "active": "yes", "provisional": "subject_only", "held": "no",
    "needs_revalidation": "no", "superseded": "no", "expired": "no", "rejected": "no",
    "contested": "no", "redacted": "no", "stale": "no", "retracted": "no",
    # Retrieval section: "Active knowledge whose expires_at is not later than the read
    # time is lifecycle-hidden"; memory model: a search at a scope never selects siblings.
    "active_expired": "no", "active_sibling_scope": "no",
}

# Seed memory-model.txt, column "Visibility: subject / member / curator / admin": the
# curator column (who may inspect / decide on a row). "Another subject's provisional row
# stays hidden even from a curator or account administrator."
CURATOR_SEES: dict[str, bool] = {
    "proposed": True, "active": True, "provisional": False, "held": True,
    "needs_revalidation": True, "superseded": True, "expired": True, "rejected": True,
    "contested": True, "redacted": True, "stale": True, "retracted": True,
}


@dataclass(frozen=True)
class Posture:
    key: str | None  # corpus.keys entry; None = server-side (internal reader)
    peer_key: str | None  # peer_key named in the request
    reads_for: str | None  # the peer the read is for
    posture: str  # reader_posture reported
    session: bool = False  # a console password session instead of a key


POSTURES: dict[str, Posture] = {
    "named_peer_on_peerless_key": Posture("peerless", "alice", "alice", "peer"),
    "named_peer_on_agent_key": Posture("scribe", "bob", "bob", "peer"),
    "machine_key_as_own_peer": Posture("scribe", None, "scribe", "peer"),
    "peerless_key": Posture("peerless", None, None, "public_only"),
    "password_session": Posture(None, None, "alice", "peer", session=True),
    "human_token": Posture("bob_token", None, "bob", "peer"),
    "internal_server_side": Posture(None, None, None, "internal"),
}


def audience_class(audience: str, reads_for: str | None) -> str:
    subject, level = AUDIENCES[audience]
    if subject is None:
        return "about_scope"
    if level in ("scope", "account"):
        return "promoted" if subject != reads_for else "own"
    return "own" if subject == reads_for else "other"


def expected_visible(p: Posture, cell: Cell) -> bool:
    audience, sensitivity, state = cell
    subject = AUDIENCES[audience][0]
    search = SEARCH[state]
    state_ok = search == "yes" or (search == "subject_only" and p.reads_for is not None
                                   and subject == p.reads_for)
    return state_ok and audience_class(audience, p.reads_for) in SEES[p.posture][sensitivity]


def expected_set(c: Corpus, p: Posture) -> set[str]:
    return {kid for cell, kid in c.cells.items() if expected_visible(p, cell)}


ALL_CELLS = [(a, s, st) for a in AUDIENCES for s in SENSITIVITIES for st in (*STATES, *EXTRAS)]


# --- helpers ----------------------------------------------------------------------------

def _client(c: Corpus, p: Posture) -> APIClient:
    client = APIClient()
    if p.session:
        rebind_account_for_tests(None)
        assert client.login(username="alice", password="alice-pass-123")
        rebind_account_for_tests(None)
    return client


def _reader(c: Corpus, p: Posture) -> Reader:
    rebind_account_for_tests(c.world.account.id)
    if p.posture == "internal":
        return internal_reader(c.world.account.id)
    from knowledge.models import Credential, Peer

    if p.session:
        return reader_for(principal=Principal(account_id=c.world.account.id,
                                              peer=c.world.subject, via="session"))
    prefix = c.keys[p.key].split("_")[1]
    cred = Credential.objects.get(prefix=prefix)
    peer = Peer.objects.filter(pk=cred.peer_id).first()
    return reader_for(principal=Principal(account_id=c.world.account.id, peer=peer,
                                          via="api_key", scope_paths=tuple(cred.scope_paths),
                                          act_for_all=cred.act_for_all,
                                          act_for=tuple(cred.act_for)),
                      peer_key=p.peer_key)


def _body(p: Posture, **body: Any) -> dict[str, Any]:
    if p.peer_key:
        body["peer_key"] = p.peer_key
    return body


def _cell_ids(c: Corpus, ids: set[str]) -> set[str]:
    return ids & set(c.cells.values())


def _ids_in(obj: Any) -> set[str]:
    return set(re.findall(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                          json.dumps(obj, default=str)))


def _diff(c: Corpus, got: set[str], want: set[str]) -> list[str]:
    by_id = {v: k for k, v in c.cells.items()}
    return ([f"leaked {by_id[i]}" for i in sorted(got - want)]
            + [f"missing {by_id[i]}" for i in sorted(want - got)])


pytestmark_db = pytest.mark.django_db


# --- the matrix -------------------------------------------------------------------------

@pytestmark_db
def test_the_matrix_is_complete(corpus, record_property):
    assert set(corpus.cells) == set(ALL_CELLS)
    n = len(ALL_CELLS) * len(POSTURES)
    record_property("facts", f"reader matrix: {len(POSTURES)} postures x {len(AUDIENCES)} "
                             f"audiences x {len(SENSITIVITIES)} sensitivities x "
                             f"{len(STATES) + len(EXTRAS)} states = {n} cells, checked through "
                             f"visible_knowledge and search")
    # Every class of the seed tables is exercised by some cell.
    assert {expected_visible(p, cell) for p in POSTURES.values() for cell in ALL_CELLS} == {
        True, False}


@pytestmark_db
@pytest.mark.parametrize("name", sorted(POSTURES))
def test_visible_knowledge_matches_the_seed(corpus, name):
    c, p = corpus, POSTURES[name]
    reader = _reader(c, p)
    assert reader.posture == p.posture
    got = {str(i) for i in knowledge_for_read(reader=reader, scope=c.world.scope)
           .values_list("id", flat=True)}
    assert not _diff(c, _cell_ids(c, got), expected_set(c, p))


@pytestmark_db
@pytest.mark.parametrize("name", sorted(POSTURES))
def test_search_matches_the_seed(corpus, name):
    c, p = corpus, POSTURES[name]
    want = expected_set(c, p)
    assert want or p.posture == "public_only"
    if p.posture == "internal":
        from retrieval import engine
        from retrieval.profiles import resolve_profile

        reader = _reader(c, p)
        profile = replace(resolve_profile(requested="balanced", scope=c.world.scope,
                                          default="balanced"), deadline_ms=5000)
        res = engine.search(reader=reader, scope=c.world.scope, query="zephyr note",
                            profile=profile, limit=100)
        got = {x["id"] for x in res.candidates}
        assert res.reader_posture == "internal"
    else:
        r = api(_client(c, p), c.keys.get(p.key or ""), "POST", "search",
                _body(p, query="zephyr note", scope=SOCIAL, limit=100, deadline_ms=5000))
        assert r.status_code == 200, r.content
        assert r.json()["reader_posture"] == p.posture
        assert not r.json()["strategies"]["dropped"]
        got = {x["id"] for x in r.json()["candidates"]}
    assert not _diff(c, _cell_ids(c, got), want)


@pytestmark_db
@pytest.mark.parametrize("name", ["named_peer_on_peerless_key", "peerless_key",
                                  "internal_server_side"])
def test_lineage_roots_follow_the_same_table(corpus, name):
    from memhouse.core.errors import NotFound
    from retrieval.lineage import lineage

    c, p = corpus, POSTURES[name]
    reader = _reader(c, p)
    wrong = []
    for cell, kid in c.cells.items():
        if cell[2] == "active_sibling_scope":
            continue  # lineage reads every granted scope, not one read scope
        try:
            graph = lineage(reader=reader, knowledge_id=kid, depth=1)
            seen = True
            assert graph["nodes"][0]["id"] == kid
        except NotFound:
            seen = False
        if seen != expected_visible(p, cell):
            wrong.append(cell)
    assert not wrong


@pytestmark_db
@pytest.mark.parametrize("name", ["password_session", "human_token", "peerless_key"])
def test_api_spot_checks_lineage_context_stable_profile(corpus, name):
    c, p = corpus, POSTURES[name]
    client, key = _client(c, p), c.keys.get(p.key or "")
    want = expected_set(c, p)
    # lineage over HTTP: a visible root is a graph, a hidden one the same 404 as unknown.
    for cell in [("alice_peer", "personal", "active"), ("alice_peer", "internal", "provisional"),
                 ("bob_peer", "restricted", "active"), ("about_scope", "public", "active"),
                 ("bob_scope", "personal", "active"), ("alice_peer", "public", "held")]:
        r = api(client, key, "POST", "lineage", _body(p, knowledge_id=c.cells[cell]))
        if expected_visible(p, cell):
            assert r.status_code == 200, (cell, r.content)
        else:
            assert (r.status_code, r.json()) == (404, {"error": {
                "code": "not_found", "message": "knowledge not found"}}), cell
    # context: every statement in any section is one this reader may see.
    r = api(client, key, "POST", "context", _body(p, scope=SOCIAL, query="zephyr note"))
    assert r.status_code == 200 and r.json()["reader_posture"] == p.posture
    shown = _cell_ids(c, _ids_in(r.json()))
    dropped = (r.json()["retrieval"] or {}).get("strategies", {}).get("dropped")
    assert shown or dropped, r.json()  # the live fast profile has a 100 ms deadline
    assert shown <= want, [d for d in _diff(c, shown, want) if d.startswith("leaked")]
    # stable-profile: about the reader, active, public/internal, sourced (no scope named:
    # every granted scope, so the sibling scope's row counts too).
    r = api(client, key, "POST", "stable-profile", _body(p))
    if p.reads_for is None:
        assert r.status_code == 400 and r.json()["error"]["code"] == "peer_required"
    else:
        got = {e["knowledge_id"] for e in r.json()["entries"]}
        expect = {kid for (aud, sens, st), kid in c.cells.items()
                  if AUDIENCES[aud][0] == p.reads_for and sens in ("public", "internal")
                  and st in ("active", "active_sibling_scope")}
        assert _cell_ids(c, got) == expect and expect


@pytestmark_db
@pytest.mark.parametrize("name", ["password_session", "human_token"])
def test_me_knowledge_is_everything_about_me_in_any_state(corpus, name):
    c, p = corpus, POSTURES[name]
    r = api(_client(c, p), c.keys.get(p.key or ""), "GET", "me/knowledge",
            query={"limit": "200"})
    assert r.status_code == 200
    got = _cell_ids(c, {i["id"] for i in r.json()["items"]})
    want = {kid for (aud, _, _), kid in c.cells.items() if AUDIENCES[aud][0] == p.reads_for}
    assert got == want and len(want) >= 56


@pytestmark_db
def test_curators_and_admins_never_see_another_subjects_provisional_rows(corpus):
    from governance import selectors as gs
    from memhouse.core.errors import NotFound

    c = corpus
    client = APIClient()
    # Curator queue: held and contested rows only, never provisional.
    r = api(client, c.keys["carol"], "GET", "curator/queue", query={"limit": "200"})
    got = _cell_ids(c, {i["id"] for i in r.json()["items"]})
    assert got == {kid for (_, _, st), kid in c.cells.items() if st in ("held", "contested")}
    assert c.a_ids["k_provisional"] not in r.content.decode()
    # Deciding on a row: the seed's curator column, state by state.
    rebind_account_for_tests(c.world.account.id)
    carol = Principal(account_id=c.world.account.id, peer=c.world.curator, via="api_key")
    wrong = []
    for (aud, sens, st), kid in c.cells.items():
        if st in EXTRAS:
            continue
        try:
            gs.knowledge_for_curator(principal=carol, knowledge_id=uuid.UUID(kid))
            seen = True
        except NotFound:
            seen = False
        if seen != CURATOR_SEES[st]:
            wrong.append((aud, sens, st))
    assert not wrong
    provisional = c.cells[("alice_peer", "internal", "provisional")]
    r1 = api(client, c.keys["carol"], "POST", f"curator/knowledge/{provisional}/approve", {})
    r2 = api(client, c.keys["carol"], "POST", f"curator/knowledge/{uuid.uuid4()}/approve", {})
    assert r1.status_code == r2.status_code == 404 and r1.json() == r2.json()
    # The administrator (and the curator) as readers: search, lineage, me/knowledge.
    alice_prov = {kid for (aud, _, st), kid in c.cells.items()
                  if aud == "alice_peer" and st == "provisional"} | {c.a_ids["k_provisional"]}
    for who in ("dave", "carol"):
        r = api(client, c.keys[who], "POST", "search",
                {"query": "zephyr note tea", "scope": SOCIAL, "limit": 100, "deadline_ms": 5000})
        assert r.status_code == 200 and not ({x["id"] for x in r.json()["candidates"]}
                                             & alice_prov)
        for kid in alice_prov:
            assert api(client, c.keys[who], "POST", "lineage",
                       {"knowledge_id": kid}).status_code == 404
        mine = api(client, c.keys[who], "GET", "me/knowledge", query={"limit": "200"})
        assert not (_ids_in(mine.json()) & alice_prov)


# --- the knowledge listing (GET /knowledge, /knowledge/<id>) ----------------------------

# Seed memory-model.txt, column "Visibility: subject / member / curator / admin": the
# member column - the history a reader may list beyond search's usable states (still
# under the sensitivity rule of "A read is performed for a peer").
MEMBER_SEES: dict[str, bool] = {
    "proposed": False, "active": True, "provisional": False, "held": False,
    "needs_revalidation": True, "superseded": True, "expired": True, "rejected": False,
    "contested": False, "redacted": False, "stale": False, "retracted": False,
}
LISTING_POSTURES = sorted(n for n, p in POSTURES.items() if p.posture != "internal")
HUMAN_POSTURES = ("password_session", "human_token")  # credentials that are the subject


def expected_listed(p: Posture, cell: Cell, *, states: str, scoped: bool) -> bool:
    """`states`: "usable" (no filter: search's table), "member" (every state the listing
    offers any reader) or "all" (a human reading as themself adds their own rows in every
    state: the subject column)."""
    audience, sensitivity, state = cell
    subject = AUDIENCES[audience][0]
    if state == "active_expired":
        return False  # lifecycle-hidden at read time under every filter
    if state == "active_sibling_scope":
        if scoped:
            return False  # a read at a scope never selects a sibling
        cell, state = (audience, sensitivity, "active"), "active"
    if states == "usable":
        return expected_visible(p, cell)
    own = p.reads_for is not None and subject == p.reads_for
    if states == "all" and own:
        return True
    state_ok = MEMBER_SEES[state] or (state == "provisional" and own)
    return state_ok and audience_class(audience, p.reads_for) in SEES[p.posture][sensitivity]


def _list_all(c: Corpus, p: Posture, **query: str) -> tuple[set[str], Any]:
    client, key = _client(c, p), c.keys.get(p.key or "")
    got: set[str] = set()
    cursor = None
    while True:
        page = dict(query, limit="200", **({"cursor": cursor} if cursor else {}))
        if p.peer_key:
            page["peer_key"] = p.peer_key
        r = api(client, key, "GET", "knowledge", query=page)
        if r.status_code != 200:
            return got, r
        assert r.json()["reader_posture"] == p.posture
        got |= {i["id"] for i in r.json()["items"]}
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return got, r


@pytestmark_db
@pytest.mark.parametrize("name", LISTING_POSTURES)
def test_knowledge_listing_matches_the_seed(corpus, name):
    c, p = corpus, POSTURES[name]
    every_state = ",".join(STATES)
    member_states = ",".join(s for s in STATES if MEMBER_SEES[s] or s == "provisional")
    for states, query, scoped in (
            ("usable", {"scope": SOCIAL}, True), ("usable", {}, False),
            ("member", {"state": member_states}, False),
            ("member", {"state": member_states, "scope": SOCIAL}, True),
            ("all", {"state": every_state}, False)):
        got, r = _list_all(c, p, **query)
        if states == "all" and name not in HUMAN_POSTURES:
            # Subject-only states are refused outright for everyone but the subject.
            assert r.status_code == 400 and r.json()["error"]["code"] == "state_not_visible"
            continue
        assert r.status_code == 200, (states, r.content)
        want = {kid for cell, kid in c.cells.items()
                if expected_listed(p, cell, states=states, scoped=scoped)}
        assert want or p.posture == "public_only"
        assert not _diff(c, _cell_ids(c, got), want), (states, query)


@pytestmark_db
@pytest.mark.parametrize("name", ["named_peer_on_agent_key", "peerless_key", "human_token"])
def test_knowledge_detail_is_404_exactly_where_the_listing_hides_a_row(corpus, name):
    c, p = corpus, POSTURES[name]
    client, key = _client(c, p), c.keys.get(p.key or "")
    states = "all" if name in HUMAN_POSTURES else "member"
    query = {"peer_key": p.peer_key} if p.peer_key else None
    wrong = []
    for cell, kid in c.cells.items():
        r = api(client, key, "GET", f"knowledge/{kid}", query=query)
        if expected_listed(p, cell, states=states, scoped=False):
            ok = r.status_code == 200 and r.json()["knowledge"]["id"] == kid
        else:
            ok = (r.status_code, r.json()) == (404, {"error": {
                "code": "not_found", "message": "knowledge not found"}})
        if not ok:
            wrong.append(cell)
    assert not wrong


# --- diagnostics leak nothing -----------------------------------------------------------

def _normalise(body: Any) -> Any:
    if isinstance(body, dict):
        out = {}
        for k, v in body.items():
            if k in ("elapsed_ms", "rebuilt_at"):
                continue
            if k == "retrieval_outcomes":
                v = [o for o in v if o.get("reason_class") != "authorization_filtered"]
            out[k] = _normalise(v)
        return out
    if isinstance(body, list):
        return [_normalise(v) for v in body]
    return body


READS = [
    ("search", {"query": "Where do the lanterns of Harbourton glow?", "scope": SOCIAL,
                "deadline_ms": 5000}),
    ("search", {"query": "harbourton lanterns", "scope": SOCIAL, "profile": "thorough",
                "deadline_ms": 5000}),
    ("search", {"query": "quokkasecret", "scope": SOCIAL, "deadline_ms": 5000}),
    ("ask", {"query": "Where do the lanterns of Harbourton glow?", "scope": SOCIAL}),
    ("ask", {"query": "Where do the lanterns of Harbourton glow?", "scope": SOCIAL,
             "effort": "medium", "include_source_recall": True}),
    ("context", {"query": "lanterns Harbourton", "scope": SOCIAL}),
    ("context", {"scope": SOCIAL}),
]


def _reads(w: Any, keys: dict[str, str], settle: int = 0) -> dict[str, list[Any]]:
    """Each read for bob (named on the agent key) and for a peerless key. `settle` extra
    context calls first let projections be built and cached; measuring the first call
    after a change then shows whether the change touched this reader's projections."""
    out: dict[str, list[Any]] = {}
    client = APIClient()
    for reader, (key, peer_key) in {"bob": (keys["scribe"], "bob"),
                                    "peerless": (keys["peerless"], None)}.items():
        out[reader] = []
        for path, body in READS:
            b = dict(body, **({"peer_key": peer_key} if peer_key else {}))
            for _ in range(settle if path == "context" else 0):
                api(client, key, "POST", path, b)
            r = api(client, key, "POST", path, b)
            assert r.status_code == 200, r.content
            out[reader].append(r.json())
    return out


def _add(w: Any, statement: str, *, subject: Any = None, sensitivity: str = "public",
         state: str = "active", scope: Any = None, level: str = "peer", **kw: Any) -> str:
    from tests.governance.helpers import propose
    from tests.security.corpus import PATHS

    item = propose(w, statement, subject=subject, scope=scope, level=level,
                   sensitivity=sensitivity, speaker=subject or w.agent, kind="fact", **kw)
    for to, reason in PATHS[state]:
        from knowledge.lifecycle import transition

        transition(item, to, actor="system:test", reason=reason)
    return str(item.id)


def _index(w: Any, ids: list[str]) -> None:
    from retrieval.entities import index_knowledge
    from retrieval.vectors import embed_knowledge

    embed_knowledge(w.account.id, ids)
    index_knowledge(w.account.id, ids)


@pytest.mark.django_db(transaction=True)
def test_responses_are_identical_with_and_without_hidden_matching_rows(committed_world,
                                                                       settings,
                                                                       record_property):
    from datetime import timedelta

    from django.utils import timezone

    from knowledge import services as ks

    settings.MEMHOUSE_RATE_LIMIT_PER_MINUTE = 0
    w = committed_world
    with account_context(w.account.id):
        _, peerless = ks.credential_create(account_id=w.account.id, peer=None, name="etl")
        keys = {"scribe": w.agent_key, "peerless": peerless}
        sibling = ks.scope_ensure(account_id=w.account.id, path="/marketing/paid")
        visible = [_add(w, f"The lanterns of Harbourton glow over the harbour, note {i}.")
                   for i in range(3)]
    _index(w, visible)
    before = _reads(w, keys, settle=2)

    hidden_text = "quokkasecret"
    with account_context(w.account.id):
        a = w.subject
        hidden = [
            _add(w, f"Alice lit the lanterns of Harbourton, {hidden_text} one.", subject=a,
                 sensitivity="personal"),
            _add(w, f"Alice fears the lanterns of Harbourton, {hidden_text} two.", subject=a,
                 sensitivity="restricted"),
            _add(w, f"Alice glows near the lanterns of Harbourton, {hidden_text} three.",
                 subject=a, sensitivity="internal", state="provisional"),
            _add(w, f"Alice hid the lanterns of Harbourton, {hidden_text} four.", subject=a,
                 sensitivity="internal", state="contested"),
            _add(w, f"The lanterns of Harbourton glow for the team, {hidden_text} five.",
                 level="scope", sensitivity="internal", state="held"),
            _add(w, f"The lanterns of Harbourton glow in paid ads, {hidden_text} six.",
                 scope=sibling, sensitivity="public"),
            _add(w, f"The lanterns of Harbourton glowed last week, {hidden_text} seven.",
                 sensitivity="public", expires_at=timezone.now() - timedelta(minutes=1)),
        ]
    _index(w, hidden)
    after = _reads(w, keys)
    for reader in ("bob", "peerless"):
        for (path, body), b0, b1 in zip(READS, before[reader], after[reader], strict=True):
            text = json.dumps(b1, default=str)
            assert hidden_text not in text and not (set(hidden) & _ids_in(b1)), (reader, path)
            assert _normalise(b0) == _normalise(b1), (reader, path, body)
    # The one documented difference: a query only hidden rows match is flagged, content-free.
    flagged = after["bob"][2]["retrieval_outcomes"]
    assert {"strategy": "lexical", "outcome": "candidate_filter",
            "reason_class": "authorization_filtered"} in flagged
    assert not [o for o in before["bob"][2]["retrieval_outcomes"]
                if o["reason_class"] == "authorization_filtered"]

    # A row visible to bob but hidden from the peerless reader changes nothing for the
    # latter either.
    with account_context(w.account.id):
        internal = _add(w, "The lanterns of Harbourton glow inside, staff note.",
                        sensitivity="internal")
    _index(w, [internal])
    again = _reads(w, keys)
    for (path, body), b1, b2 in zip(READS, after["peerless"], again["peerless"], strict=True):
        assert _normalise(b1) == _normalise(b2), (path, body)
    assert internal in _ids_in(again["bob"][0])
    record_property("facts", f"diagnostics: {len(READS)} reads x 2 readers compared with and "
                             f"without {len(hidden) + 1} hidden matching rows")
