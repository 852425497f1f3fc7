"""memhouse.client.langgraph_store.MemHouseStore with the real `langgraph` package against a
real live_server (real HTTP, real PostgreSQL): items as document versions, governed search,
a LangGraph graph that uses the store from a node (a fake chat model, no model call)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

from knowledge import services
from memhouse.client import MemHouseClient, PermissionDeniedError
from memhouse.core.tenancy import account_context

try:  # the optional extra memhouse[langgraph]; CI installs it (the dev extra)
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.runtime import Runtime
    from langgraph.store.base import InvalidNamespaceError, Item, PutOp, SearchItem

    from memhouse.client.langgraph_store import MemHouseStore
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"langgraph is not installed ({exc}); CI must test the "
                           "LangGraph store: install the dev extra") from exc
    pytest.skip(f"langgraph not installed: {exc}", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)
NS = ("team", "alice")
TEA = "Alice drinks green tea every morning."


@pytest.fixture
def mh(live_server, committed_world) -> Iterator[MemHouseClient]:
    with MemHouseClient(live_server.url, committed_world.agent_key, timeout=60) as client:
        yield client


def _key(world, key: str, **grants: Any) -> str:
    with account_context(world.account.id):
        agent = services.peer_create(account_id=world.account.id, key=key, kind="agent",
                                     display_name=key)
        _, secret = services.credential_create(account_id=world.account.id, peer=agent,
                                               **grants)
    return secret


def test_put_get_search_delete_round_trip(mh):
    store = MemHouseStore(mh, peer_key="alice")
    assert store.get(NS, "prefs") is None  # no scope yet: nothing stored, no error
    store.put(NS, "prefs", {"note": TEA, "topic": "drinks"})
    item = store.get(NS, "prefs")
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (NS, "prefs",
                                                      {"note": TEA, "topic": "drinks"})
    assert item.updated_at >= item.created_at and item.created_at.tzinfo is not None

    # A put is a document version: governed, with provenance, in the scope /team/alice.
    docs = mh.list_documents(scope="/team/alice", external_id="prefs")["items"]
    assert len(docs) == 1 and docs[0]["latest_version"]["media_type"] == "application/json"
    doc_id = docs[0]["id"]
    found = store.search(NS, query="What does Alice drink in the morning?")
    assert found and all(isinstance(hit, SearchItem) for hit in found)
    top = found[0]
    assert "tea" in top.value["statement"].lower() and top.namespace == NS
    assert isinstance(top.score, float) and top.score > 0
    lineage = mh.lineage(top.key, peer_key="alice")
    assert doc_id in str(lineage)  # the statement's source is the stored document

    store.put(NS, "prefs", {"note": "Alice drinks black coffee every morning.",
                            "topic": "drinks"})
    assert store.get(NS, "prefs").value["note"].startswith("Alice drinks black coffee")
    assert [v["version"] for v in mh.get_document(doc_id)["versions"]] == [1, 2]
    store.put(NS, "prefs", {"topic": "drinks", "note": "Alice drinks black coffee every "
                                                      "morning."})  # same JSON: no version
    assert len(mh.get_document(doc_id)["versions"]) == 2
    assert store.get(NS, "prefs").updated_at > item.updated_at

    store.put(("team", "bob"), "prefs", {"note": "Bob likes jazz.", "topic": "music"})
    listed = store.search(("team",))  # no query: the stored items under the prefix
    assert {(i.namespace, i.key) for i in listed} == {(NS, "prefs"), (("team", "bob"), "prefs")}
    assert all(i.score is None for i in listed)
    assert [i.key for i in store.search(("team",), filter={"topic": "music"})] == ["prefs"]
    assert store.search(("team",), filter={"topic": "music"})[0].namespace == ("team", "bob")
    assert len(store.search(("team",), limit=1)) == 1
    assert store.search(("nowhere",)) == []
    assert store.search(("nowhere",), query="tea") == []  # an unknown scope: nothing

    assert store.list_namespaces() == [NS, ("team", "bob")]
    assert store.list_namespaces(prefix=("team",), max_depth=1) == [("team",)]
    assert store.list_namespaces(suffix=("bob",)) == [("team", "bob")]
    assert store.list_namespaces(prefix=("*", "alice")) == [NS]
    assert store.list_namespaces(prefix=("other",)) == []

    store.delete(NS, "prefs")  # tombstone: the statements it alone supported are retracted
    assert store.get(NS, "prefs") is None
    assert mh.list_documents(scope="/team/alice")["items"] == []
    statements = [c["statement"] for c in mh.search("What does Alice drink?",
                                                    scope="/team/alice",
                                                    peer_key="alice")["candidates"]]
    assert not any("coffee" in s or "tea" in s for s in statements), statements
    assert mh.list_knowledge(peer_key="alice", scope="/team/alice")["items"] == []
    store.delete(NS, "prefs")  # deleting a missing key is a no-op, as in LangGraph

    # The key can be used again after a delete (a new document, version 1).
    store.put(NS, "prefs", {"note": "Alice drinks water."})
    again = mh.list_documents(scope="/team/alice", external_id="prefs")["items"]
    assert len(again) == 1 and again[0]["id"] != doc_id
    assert again[0]["latest_version"]["version"] == 1
    store.put(NS, "prefs", None)  # put(None) deletes too
    assert store.get(NS, "prefs") is None


def test_async_variants_run_through_abatch(mh):
    store = MemHouseStore(mh)

    async def main() -> tuple[Any, ...]:
        await store.aput(("notes",), "n1", {"text": "The office is in Lisbon."})
        got = await store.aget(("notes",), "n1")
        listed = await store.asearch(("notes",))
        names = await store.alist_namespaces()
        both = await store.abatch([PutOp(("notes",), "n2", {"text": "Second."}),
                                   PutOp(("notes",), "n1", None)])
        return got, listed, names, both

    got, listed, names, both = asyncio.run(main())
    assert got.value == {"text": "The office is in Lisbon."}
    assert [i.key for i in listed] == ["n1"] and names == [("notes",)]
    assert both == [None, None]
    assert store.get(("notes",), "n1") is None and store.get(("notes",), "n2") is not None


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]
    recalled: list[str]


def build_graph(store: MemHouseStore, model: GenericFakeChatModel) -> Any:
    """A LangGraph agent graph whose node recalls from and writes to the MemHouse store
    (docs/integrations.md shows this graph)."""

    def respond(state: State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        question = state["messages"][-1].content
        memories = runtime.store.search(("team", "alice"), query=question, limit=3)
        recalled = [m.value["statement"] for m in memories]
        prompt = [SystemMessage("Known about Alice:\n" + "\n".join(recalled)),
                  *state["messages"]]
        reply = model.invoke(prompt)
        runtime.store.put(("team", "alice"), "last-exchange",
                          {"question": question, "answer": reply.content})
        return {"messages": [reply], "recalled": recalled}

    return (StateGraph(State).add_node("respond", respond).add_edge(START, "respond")
            .compile(store=store))


def test_a_langgraph_graph_uses_the_store_from_a_node(mh):
    store = MemHouseStore(mh, peer_key="alice")
    store.put(NS, "prefs", {"note": TEA})
    model = GenericFakeChatModel(messages=iter([AIMessage("You like green tea.")]))
    graph = build_graph(store, model)

    out = graph.invoke({"messages": [HumanMessage("What do I drink in the morning?")],
                        "recalled": []})

    assert out["messages"][-1].content == "You like green tea."
    assert any("tea" in s.lower() for s in out["recalled"]), out["recalled"]
    saved = store.get(NS, "last-exchange")
    assert saved is not None and saved.value == {
        "question": "What do I drink in the morning?", "answer": "You like green tea."}


def test_bad_input_gives_clear_errors(mh):
    store = MemHouseStore(mh)
    with pytest.raises(InvalidNamespaceError, match="letters, digits"):
        store.put(("team", "al ice"), "k", {"a": 1})
    with pytest.raises(InvalidNamespaceError, match="letters, digits"):
        store.get(("team", "al/ice"), "k")
    with pytest.raises(InvalidNamespaceError):
        store.search(("team", "a.b"), query="x")  # LangGraph's own label rule
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a.b",), "k", {"a": 1})])  # ops passed to batch directly
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        store.put(NS, "k", {"when": datetime(2024, 1, 1, tzinfo=UTC)})
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        store.put(NS, "k", {"x": float("nan")})
    with pytest.raises(ValueError, match="non-empty string"):
        store.put(NS, "", {"a": 1})
    assert store.get(NS, "k") is None  # nothing was stored by the refused puts


def test_the_store_reads_only_what_the_key_may(live_server, mh, committed_world):
    MemHouseStore(mh).put(NS, "prefs", {"note": TEA})
    solo = _key(committed_world, "solo")  # no act-for grant
    with MemHouseClient(live_server.url, solo) as client:
        with pytest.raises(PermissionDeniedError) as denied:
            MemHouseStore(client, peer_key="alice").search(NS, query="What does Alice drink?")
        assert denied.value.code == "act_for_denied" and denied.value.status == 403
        own = MemHouseStore(client).search(NS, query="What does Alice drink?")
        assert all(hit.value["sensitivity"] in ("public", "internal") for hit in own)

    narrow = _key(committed_world, "narrow", scope_paths=["/team/bob"])
    with MemHouseClient(live_server.url, narrow) as client:
        store = MemHouseStore(client)
        assert store.get(NS, "prefs") is None  # another scope: the same as nothing there
        assert store.search(("team",)) == [] and store.list_namespaces() == []
        assert store.search(NS, query="What does Alice drink?") == []  # 404: not its scope
        with pytest.raises(PermissionDeniedError) as forbidden:
            store.put(NS, "mine", {"a": 1})
        assert forbidden.value.code == "scope_forbidden"
        store.put(("team", "bob"), "mine", {"note": "Bob plays the cello."})
        assert store.list_namespaces() == [("team", "bob")]
        assert [(i.namespace, i.key) for i in store.search(())] == [(("team", "bob"), "mine")]


def test_the_documented_example_runs(live_server, committed_world, capsys, monkeypatch):
    from tests.integrations.test_client import _doc_block, documented_env

    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    documented_env(monkeypatch, live_server, committed_world)
    setup = _doc_block(text, "mh.create_peer(")  # the page's scope and peers come first
    exec(compile(setup, "docs/integrations.md", "exec", dont_inherit=True), {})
    capsys.readouterr()  # its list of peers
    example = _doc_block(text, "MemHouseStore(mh")
    # dont_inherit: run as its own module, without this file's `from __future__` flags.
    exec(compile(example, "docs/integrations.md", "exec", dont_inherit=True), {})
    out = capsys.readouterr().out
    assert "{'note': 'Alice drinks green tea every morning.'}" in out
    assert "['Alice drinks green tea every morning.'] You like green tea." in out
    assert "Alice drinks green tea every morning. provisional" in out
    assert "[('team', 'alice')]" in out
