"""Read your writes against the real `manage.py serve` (tests/served.py), where extraction
runs on an in-process worker thread after the request commits, never inside it: without
`wait` a search right after a write may find nothing; with it (the client's `wait=` for
messages and documents, the Agents SDK session's and the LangGraph store's defaults) the
write answers once the statements exist."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest

from memhouse.client import MemHouseClient, Message
from tests.served import Served, cleanup, start_serve

SCOPE = "/demo"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = start_serve(tmp_path_factory.mktemp("ryw") / "data")
    try:
        yield server
    finally:
        cleanup(server)


@pytest.fixture(scope="module")
def mh(served: Served) -> Iterator[MemHouseClient]:
    key = re.search(r"API key:\s+(mh_\S+)", served.text)
    assert key, served.text
    with MemHouseClient(served.url, key.group(1), timeout=60) as client:
        client.create_peer("caroline", "human", display_name="Caroline")
        yield client


def _found(mh: MemHouseClient, query: str, knowledge_id: str) -> bool:
    hits = mh.search(query, scope=SCOPE, peer_key="caroline")["candidates"]
    return knowledge_id in [h["id"] for h in hits]


def _by_meaning(mh: MemHouseClient, query: str, knowledge_id: str) -> bool:
    """Found by the semantic strategy: the wait covered the statement's vector too."""
    hits = mh.search(query, scope=SCOPE, peer_key="caroline")["candidates"]
    return any(h["id"] == knowledge_id and "semantic" in h["scores"] for h in hits)


def test_a_write_with_wait_is_read_at_once(mh: MemHouseClient) -> None:
    sent = mh.ingest_messages(SCOPE, [
        Message("I adopted a greyhound called Biscuit.", peer_key="caroline"),
        Message("ok thanks", peer_key="caroline")], wait=8)
    assert sent["timed_out"] is False, sent
    dog, thanks = sent["messages"]
    assert dog["outcome"]["processing"] == thanks["outcome"]["processing"] == "processed"
    [stmt] = dog["outcome"]["statements"]
    assert stmt["state"] == "active" and "greyhound" in stmt["statement"]
    assert [r["reason"] for r in thanks["outcome"]["refused"]] == ["f4_gate_a_phatic"]
    assert _found(mh, "What dog did Caroline adopt?", stmt["id"])  # first try
    assert _by_meaning(mh, "Does she have a pet?", stmt["id"])  # no word in common
    read = mh.message(dog["id"], peer_key="caroline")["message"]
    assert read["outcome"]["processing"] == "processed"
    assert [s["id"] for s in read["outcome"]["statements"]] == [stmt["id"]]


def test_the_agents_session_waits_for_its_turns(mh: MemHouseClient) -> None:
    try:
        from memhouse.client.agents_session import MemHouseSession
    except ImportError as exc:  # the optional extra memhouse[agents]; CI installs it
        pytest.skip(f"openai-agents not installed: {exc}")
    session = MemHouseSession("ryw-1", mh, scope=SCOPE, user_peer_key="caroline")
    asyncio.run(session.add_items([{"role": "user",
                                    "content": "I play the trombone in a jazz band."}]))
    [mid] = session.ingested_message_ids
    outcome = mh.message(mid, peer_key="caroline")["message"]["outcome"]
    assert outcome["processing"] == "processed", outcome
    [stmt] = outcome["statements"]
    assert _found(mh, "Which instrument does Caroline play?", stmt["id"])
    with pytest.raises(ValueError, match="0 to 10"):
        MemHouseSession("ryw-2", mh, scope=SCOPE, wait=11)


def test_a_document_with_wait_is_read_at_once(mh: MemHouseClient) -> None:
    created = mh.create_document(SCOPE, "Caroline's notes", wait=8,
                                 text="Caroline collects vintage typewriters.\n")
    assert created["timed_out"] is False, created
    outcome = created["outcome"]
    assert outcome["processing"] == "processed"
    # An agent's note about Caroline is hers to read (provisional until she confirms it):
    # read as the key's own peer it is counted, never shown.
    assert outcome["statements"] == [] and outcome["not_visible"]["count"] == 1
    [hit] = [h for h in mh.search("What does Caroline collect?", scope=SCOPE,
                                  peer_key="caroline")["candidates"]
             if "typewriters" in h["statement"]]  # first try
    doc = mh.get_document(created["document_id"])
    assert doc["processing"] == "processed"
    assert [v["processing"] for v in doc["versions"]] == ["processed"]
    revised = mh.add_document_version(created["document_id"], wait=8,
                                      text="Caroline collects vintage cameras.\n")
    assert (revised["version"], revised["outcome"]["processing"]) == (2, "processed")
    found = mh.search("What does Caroline collect?", scope=SCOPE,
                      peer_key="caroline")["candidates"]
    assert any("cameras" in h["statement"] for h in found)
    assert hit["id"] not in [h["id"] for h in found]  # superseded by version 2


def test_the_langgraph_store_reads_its_put_at_once(mh: MemHouseClient) -> None:
    try:
        from memhouse.client.langgraph_store import MemHouseStore
    except ImportError as exc:  # the optional extra memhouse[langgraph]; CI installs it
        pytest.skip(f"langgraph not installed: {exc}")
    store = MemHouseStore(mh, peer_key="caroline")
    namespace = ("demo", "ryw")
    store.put(namespace, "pets", {"note": "Caroline keeps a tortoise called Shelly."})
    hits = store.search(namespace, query="Which pet does Caroline keep?")  # first try
    assert any("tortoise" in h.value["statement"] for h in hits), hits
    store.put(namespace, "pets", {"note": "Caroline keeps a parrot called Kiwi."})
    hits = store.search(namespace, query="Which pet does Caroline keep?")
    statements = [h.value["statement"] for h in hits]
    assert any("parrot" in s for s in statements), statements
    assert not any("tortoise" in s for s in statements), statements  # superseded
    doc = store.client.get_document(mh.list_documents(scope="/demo/ryw",
                                                      external_id="pets")["items"][0]["id"])
    assert [v["processing"] for v in doc["versions"]] == ["processed", "processed"]
    with pytest.raises(ValueError, match="0 to 10"):
        MemHouseStore(mh, wait=11)
