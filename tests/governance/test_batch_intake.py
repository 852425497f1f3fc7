"""Batch intake (issue 21, item 3): a batch of messages is extracted, proposed, gated and
placed with set-based writes, with the decisions of one message at a time, a bounded
number of queries per message, and nothing changed by a redelivery."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governance.models import PeerQuestion, Validation
from governance.tasks import process_messages
from knowledge import audit, lifecycle, services
from knowledge.ingest.services import IncomingMessage, messages_ingest
from knowledge.models import AuditEntry, Knowledge, LifecycleEvent, Message
from memhouse.core.principal import Principal
from memhouse.core.tenancy import account_context
from retrieval.models import EntityMention, KnowledgeVector

pytestmark = pytest.mark.django_db(transaction=True)

# A conversation that exercises every intake decision: statements about oneself (active),
# about the other (provisional + a question), a repeat (duplicate), an update by the same
# speaker (supersedes), an older claim arriving late, junk, and a restricted statement.
TURNS = [
    ("caroline", "I moved to Denver last spring and I love the mountains."),
    ("melanie", "That sounds amazing! I have been painting landscapes lately."),
    ("caroline", "Melanie is a great painter, she sold three paintings last month."),
    ("melanie", "ok"),
    ("caroline", "I work at Acme Corp as a data analyst."),
    ("melanie", "My password is hunter2 and my SSN is 123-45-6789."),
    ("caroline", "I moved to Denver last spring and I love the mountains."),
    ("melanie", "I have two cats named Luna and Oliver."),
    ("caroline", "Actually I now live in Boulder, I moved there in June."),
    ("melanie", "I have three cats now, we adopted Milo."),
    ("caroline", "I started a new job at Globex as a product manager."),
    ("melanie", "Caroline goes hiking every weekend with her dog."),
]


@pytest.fixture
def chat(committed_world: Any) -> Any:
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
        services.peer_create(account_id=w.account.id, key="melanie", kind="human",
                             display_name="Melanie", aliases=["Mel"])
    return w


def _principal(w: Any) -> Principal:
    return Principal(account_id=w.account.id, peer=w.agent, via="api_key",
                     scope_paths=("/",), act_for_all=True)


def _messages(turns: list[tuple[str, str]], tag: str) -> list[IncomingMessage]:
    start = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
    return [IncomingMessage(text=text, occurred_at=start + timedelta(minutes=i),
                            client_message_id=f"{tag}:{i}", peer_key=peer)
            for i, (peer, text) in enumerate(turns)]


def _ingest(w: Any, path: str, msgs: list[IncomingMessage]) -> list[dict[str, Any]]:
    with account_context(w.account.id):
        services.scope_ensure(account_id=w.account.id, path=path)
    with account_context(w.account.id):  # the eager pipeline runs when this commits
        return messages_ingest(principal=_principal(w), scope_path=path, messages=msgs,
                               session_id="s1")


def _outcome(w: Any, path: str) -> dict[str, Any]:
    """What intake decided in one scope, independent of row ids and times."""
    with account_context(w.account.id):
        rows = list(Knowledge.objects.filter(scope__path=path).select_related(
            "subject_peer", "supersedes"))
        ids = {str(k.pk) for k in rows}
        return {
            "statements": Counter((k.statement, k.state, k.state_reason, k.verification,
                                   k.subject_peer.key if k.subject_peer else None,
                                   k.source_count,
                                   k.supersedes.statement if k.supersedes else None)
                                  for k in rows),
            "events": Counter((e.knowledge.statement, e.from_state, e.to_state, e.reason)
                              for e in LifecycleEvent.objects.filter(
                                  knowledge__scope__path=path).select_related("knowledge")),
            "audit": Counter(e.payload.get("to") for e in AuditEntry.objects.filter(
                target_type="knowledge", target_id__in=ids)),
            "validations": Counter((v.knowledge.statement, v.kind, v.status) for v in
                                   Validation.objects.filter(knowledge__scope__path=path)
                                   .select_related("knowledge")),
            "questions": PeerQuestion.objects.filter(knowledge__scope__path=path).count(),
            # Rows a later message of the same batch superseded are never embedded (the
            # batch embeds once, after it is placed), so only usable rows are compared.
            "vectors": KnowledgeVector.objects.filter(
                knowledge__scope__path=path,
                knowledge__state__in=sorted(lifecycle.EMBEDDABLE)).count(),
            "embeddable": Knowledge.objects.filter(
                scope__path=path, state__in=sorted(lifecycle.EMBEDDABLE)).count(),
            "mentions": EntityMention.objects.filter(knowledge__scope__path=path).count(),
        }


def test_a_batch_decides_as_one_message_at_a_time(chat):
    w = chat
    _ingest(w, "/batch", _messages(TURNS, "b"))
    for msg in _messages(TURNS, "o"):  # each message its own batch
        _ingest(w, "/one", [msg])
    batch, one = _outcome(w, "/batch"), _outcome(w, "/one")
    assert batch == one
    assert batch["vectors"] == batch["embeddable"]
    states = Counter(state for (_, state, *_rest) in batch["statements"].elements())
    # The conversation exercises the decisions it is meant to.
    assert states["active"] and states["provisional"] and states["rejected"]
    assert states["superseded"], batch["statements"]
    assert any(reason == "f4_gate_a_duplicate"
               for (_, _, reason, *_rest) in batch["statements"])
    assert batch["questions"] == states["provisional"] + sum(
        1 for s in batch["statements"].elements() if s[2] == "f4_gate_a_b_deferred"
        and s[1] != "provisional")
    assert audit.verify(w.account.id).ok
    # Every change has its event and its audit entry.
    assert sum(batch["events"].values()) == sum(batch["audit"].values())


def test_a_redelivered_batch_changes_nothing(chat):
    w = chat
    results = _ingest(w, "/batch", _messages(TURNS, "b"))
    ids = [r["id"] for r in results]

    def counts() -> tuple[int, ...]:
        with account_context(w.account.id):
            return (Knowledge.objects.count(), LifecycleEvent.objects.count(),
                    AuditEntry.objects.count(), Validation.objects.count(),
                    KnowledgeVector.objects.count(), EntityMention.objects.count())

    before = counts()
    assert process_messages(str(w.account.id), ids) == 0
    assert counts() == before
    with account_context(w.account.id):
        assert not Message.objects.filter(extracted_at__isnull=True).exists()


VERBS = ("baked", "painted", "read about", "photographed", "sketched")
THINGS = ("lighthouses", "old maps", "sourdough", "tulips", "sailboats", "comets",
          "glaciers", "violins", "castles", "owls")


def _queries_for(w: Any, n: int) -> int:
    # Distinct facts (no shared slot, number or wording), so every one is placed active.
    turns = [(("caroline", "melanie")[i % 2],
              f"I {VERBS[i % 5]} {THINGS[i // 5 % 10]} with my cousin yesterday.")
             for i in range(n)]
    msgs = _messages(turns, f"q{n}")
    with account_context(w.account.id):
        services.scope_ensure(account_id=w.account.id, path=f"/q{n}")
    with CaptureQueriesContext(connection) as captured:
        _ingest(w, f"/q{n}", msgs)
    with account_context(w.account.id):
        assert Knowledge.objects.filter(scope__path=f"/q{n}", state="active").count() >= n
    return len(captured)


def test_queries_per_message_are_bounded(chat):
    """A small constant per batch plus a small constant per message (row by row it was
    about 60 per message)."""
    w = chat
    q1, q10, q50 = (_queries_for(w, n) for n in (1, 10, 50))
    per_message = (q50 - q10) / 40
    print("queries for 1, 10, 50 messages:", q1, q10, q50)
    assert per_message <= 2, (q1, q10, q50)
    # The per-batch constant includes the statement and message embedding jobs (eager
    # here) and, on a process's first batch, its once-per-process index checks.
    assert q1 <= 140, (q1, q10, q50)


def test_a_batch_embeds_its_statements_and_messages_in_one_encoder_call(chat, monkeypatch):
    """Issue 37: the statements a batch kept and its messages (the source recall lane's
    vectors) go through the encoder together: one sort by length, one call."""
    from retrieval.embedding import get_embedder

    w = chat
    cls = type(get_embedder())
    real = cls.embed_documents
    calls: list[list[str]] = []

    def counted(self: Any, texts: Any, batch_size: int = 64) -> Any:  # the real encoder
        calls.append(list(texts))
        return real(self, texts, batch_size)

    monkeypatch.setattr(cls, "embed_documents", counted)
    # Distinct facts: nothing for the update rule to compare by embedding.
    turns = [(("caroline", "melanie")[i % 2],
              f"I {VERBS[i % 5]} {THINGS[i]} with my cousin yesterday.") for i in range(6)]
    msgs = _messages(turns, "enc")
    _ingest(w, "/enc", msgs)
    with account_context(w.account.id):
        statements = set(Knowledge.objects.filter(
            scope__path="/enc", state__in=sorted(lifecycle.EMBEDDABLE))
            .values_list("statement", flat=True))
        vectors = KnowledgeVector.objects.filter(knowledge__scope__path="/enc").count()
    assert len(statements) >= len(msgs) and vectors == len(statements)
    assert len(calls) == 1, [len(c) for c in calls]
    assert set(calls[0]) == statements | {m.text for m in msgs}


def test_the_update_rules_read_a_claims_candidates_once(chat):
    """The update rule and the contradiction rule compare a placed claim with the same
    current rows: they are read once per claim, not once per rule."""
    from governance.intake.supersession import CANDIDATE_LIMIT, find_update, may_conflict

    w = chat
    _ingest(w, "/cand", _messages([("caroline", "I live in Denver with my sister.")], "c0"))
    claim = "I have two cats named Luna and Oliver."
    with CaptureQueriesContext(connection) as captured:
        _ingest(w, "/cand", _messages([("caroline", claim)], "c1"))
    with account_context(w.account.id):
        row = Knowledge.objects.get(scope__path="/cand", statement__contains="Luna")
        # Both rules looked: the claim could update (a count) and could contradict (names).
        assert find_update(row) is None and may_conflict(row.statement)
    reads = [q["sql"] for q in captured if f"LIMIT {CANDIDATE_LIMIT}" in q["sql"]]
    assert len(reads) == 1, reads
