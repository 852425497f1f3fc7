"""Read your writes against the real `manage.py serve` (tests/served.py), where extraction
runs on an in-process worker thread after the request commits, never inside it: without
`wait` a search right after a write may find nothing; with it (the client's `wait=`, the
Agents SDK session's default) the write answers once the statements exist."""

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
