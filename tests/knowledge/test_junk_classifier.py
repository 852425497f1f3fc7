"""Gate A's learned junk model: plain-JSON weights, machine output it never saw refused,
chat kept, and the refusal on the row with its own reason code (real pipeline, real
PostgreSQL). Also: an agent's claims about "the user" are the user's to confirm."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from governance.intake import junk
from knowledge.ingest import junk_classifier
from knowledge.ingest.junk_classifier import DENSE, FORMAT, MODEL_PATH, JunkClassifier

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "bench" / "fixtures"


def test_the_shipped_weights_are_plain_json_that_loads():
    data = json.loads(MODEL_PATH.read_text())
    assert data["format"] == FORMAT and data["dense"] == list(DENSE)
    model = JunkClassifier.load()
    assert model.weights.shape == (data["buckets"] + len(DENSE),)
    assert 0.5 <= model.threshold < 1 and np.isfinite(model.weights).all()
    # What inference reads is what the file says, nothing else.
    assert model.score("Traceback (most recent call last):") == pytest.approx(
        JunkClassifier.from_dict(data).score("Traceback (most recent call last):")
    )


@pytest.mark.parametrize("change", [{"format": "pickle"}, {"dense": ["length"]}, {"buckets": 17}])
def test_a_model_file_that_is_not_this_featurisers_is_refused(change):
    data = {**json.loads(MODEL_PATH.read_text()), **change}
    with pytest.raises(ValueError):
        JunkClassifier.from_dict(data)


# Programs the training corpus (bench/junk_corpus.py) never ran.
UNSEEN = {
    "sysconfig": [sys.executable, "-m", "sysconfig"],
    "tokenize": [sys.executable, "-m", "tokenize", str(ROOT / "memhouse" / "urls.py")],
    "dis": [sys.executable, "-m", "dis", str(ROOT / "governance" / "intake" / "gates.py")],
    "site": [sys.executable, "-m", "site"],
    "pip inspect": [sys.executable, "-m", "pip", "inspect"],
}


@pytest.fixture(scope="module")
def unseen_output() -> dict[str, list[str]]:
    out = {}
    for name, cmd in UNSEEN.items():
        got = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
        lines = [ln.strip() for ln in got.stdout.splitlines() if len(ln.strip()) >= 3]
        assert lines, f"{name} printed nothing"
        out[name] = lines[:150]
    return out


def test_machine_output_of_programs_it_never_saw_is_refused(unseen_output):
    rule_misses = caught = 0
    for name, lines in unseen_output.items():
        refused = [junk.machine_output(ln) or junk_classifier.machine_output(ln) for ln in lines]
        assert sum(refused) / len(lines) >= 0.9, name
        missed_by_rules = [ln for ln in lines if not junk.machine_output(ln)]
        rule_misses += len(missed_by_rules)
        caught += sum(junk_classifier.machine_output(ln) for ln in missed_by_rules)
    # The model earns its place: most of what the rules let through, it refuses.
    assert rule_misses > 50 and caught / rule_misses >= 0.9


THIRD_PARTY_JUNK = [
    "Build succeeded in 3.2s",
    "[INFO] worker-3 heartbeat ok",
    "Priority: optional",
    "Requires-Dist: typing-extensions>=4.6",
    "Installed-Size: 1342",
]


@pytest.mark.parametrize("text", THIRD_PARTY_JUNK)
def test_machine_status_lines_are_refused_by_rules_or_model(text):
    assert junk.machine_output(text) or junk_classifier.machine_output(text)


def _chat() -> list[str]:
    kq = json.loads((FIXTURES / "knowledge_quality.json").read_text())
    said = [m["text"] for m in kq["messages"] if m["label"] == "keep"]
    said += [side["text"] for u in kq["updates"] for side in (u["old"], u["new"])]
    for name in ("update_pairs", "update_pairs_c"):
        pairs = json.loads((FIXTURES / f"{name}.json").read_text())["pairs"]
        said += [p[k] for p in pairs for k in ("old", "new") if isinstance(p.get(k), str)]
    return said


# Chat in LoCoMo's manner written for this test (not in the training data), including
# the technical talk of people that the rules already take care to keep.
LOCOMO_LIKE = [
    "Hey Mel! Long time no talk, how's the pottery class going?",
    "I finally finished the mural at the community center last weekend",
    "my cron job backs up my photos every night",
    "I work on the logging team, so I read stack traces all day lol",
    "We adopted a rescue pup named Biscuit, she's 2 and super chill",
    "Went hiking near Lake Tahoe with the kids - 12 miles, exhausting but worth it!",
    "Thanks! I've been running 5k three times a week since March.",
    "My sister just moved to Seattle for a job at a startup.",
    "just got back from the farmers market with way too many peaches",
    "The new job is intense but my team is great",
    # people talking shop, which the training chat (LoCoMo) has little of
    "I moved the backup cron to 3am and bumped redis to 7.2 last night.",
    "We migrated the billing service to Postgres 16 on Friday.",
    "My laptop runs Arch with i3, 32GB RAM.",
    "I pushed the fix to main, CI is green.",
    "Set up my Raspberry Pi 5 as a Pi-hole yesterday.",
]


def test_chat_is_kept():
    said = _chat() + LOCOMO_LIKE
    assert len(said) > 100
    refused = [
        t for t in said if junk.learned_reason(statement="", excerpt=t, message_text=t) is not None
    ]
    assert refused == []


def test_document_sentences_are_left_to_the_rules():
    # Trained on chat against program output: a project's documentation (commands, paths,
    # Markdown) is neither, so the model does not judge document sentences.
    from datetime import UTC, datetime

    from governance.intake.pipeline import document_claims

    text = (ROOT / "README.md").read_text()
    claims = document_claims(text, names={}, occurred_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert len(claims) > 50
    for claim, excerpt in claims:
        assert (
            junk.learned_reason(statement=claim.statement, excerpt=excerpt, message_text="") is None
        )


@pytest.mark.parametrize(
    ("excerpt", "statement", "about_user"),
    [
        ("The user is a vegetarian", "Assistant said the user is a vegetarian.", True),
        ("User prefers dark mode", "Assistant said User prefers dark mode.", True),
        ("user's daughter is called Mia", "Assistant said user's daughter is called Mia.", True),
        ("I created a new user for Sam", "Assistant created a new user for Sam.", False),
        ("I cleaned up the user table", "Assistant cleaned up the user table.", False),
        ("I love helping with plans", "Assistant loves helping with plans.", False),
    ],
)
def test_which_agent_claims_are_about_the_user(excerpt, statement, about_user):
    from datetime import UTC, datetime

    from governance.intake.gates import agent_claim_about_user
    from knowledge.ingest.extraction import ExtractedClaim
    from knowledge.models import Peer

    claim = ExtractedClaim(
        statement=statement,
        subject_peer_key="bot",
        kind="fact",
        confidence=0.8,
        sensitivity="internal",
        relevant_from=datetime(2026, 1, 1, tzinfo=UTC),
        relevant_until=None,
        self_observation=True,
        source_message_id="m",
        evidence_span=(0, len(excerpt)),
    )
    agent = Peer(key="bot", kind="agent", display_name="Assistant")
    human = Peer(key="sam", kind="human", display_name="Sam")
    placed = agent_claim_about_user(claim, excerpt=excerpt, speaker=agent, addressee=human)
    assert (placed.subject_peer_key == "sam") is about_user
    assert placed.self_observation is not about_user
    if about_user:
        assert "Sam" in placed.statement and "user" not in placed.statement.lower()
    # A human saying "the user" is a person speaking of someone: nothing changes.
    assert agent_claim_about_user(claim, excerpt=excerpt, speaker=human, addressee=agent) is claim


# --- through the pipeline ------------------------------------------------------------


@pytest.fixture
def ops(committed_world):
    from knowledge import services
    from memhouse.core.tenancy import account_context

    w = committed_world
    with account_context(w.account.id):
        services.peer_create(
            account_id=w.account.id, key="opsbot", kind="agent", display_name="Ops Bot"
        )
        services.peer_create(
            account_id=w.account.id, key="caroline", kind="human", display_name="Caroline"
        )
    return w


def _ingest(live_server, w, *turns, session: str | None = "s1"):
    """POST the turns over real HTTP (the pipeline runs eagerly) and return the statements
    drawn from them."""
    import uuid

    import httpx

    from knowledge.models import Knowledge
    from memhouse.core.tenancy import account_context

    tag = uuid.uuid4().hex[:8]
    body = {
        "scope": "/marketing/social",
        "messages": [
            {
                "id": f"{tag}-{i}",
                "peer_key": peer,
                "text": text,
                "occurred_at": f"2026-03-02T09:{10 + i}:00Z",
            }
            for i, (peer, text) in enumerate(turns)
        ],
    }
    if session:
        body["session"] = session
    r = httpx.post(
        f"{live_server.url}/api/v1/messages",
        json=body,
        timeout=60,
        headers={"Authorization": f"Bearer {w.agent_key}"},
    )
    assert r.status_code == 202, r.text
    with account_context(w.account.id):
        return list(
            Knowledge.objects.filter(sources__message__client_message_id__startswith=tag)
            .distinct()
            .select_related("subject_peer")
        )


pipeline = pytest.mark.django_db(transaction=True)


@pipeline
def test_a_refusal_by_the_model_is_on_the_row_with_its_reason_and_source(live_server, ops):
    from knowledge.models import KnowledgeSource, LifecycleEvent
    from memhouse.core.tenancy import account_context

    text = "Priority: optional"
    assert (
        junk.junk_reason(statement=f"Ops Bot said: {text}.", excerpt=text, message_text=text)
        is None
    )  # the rules let it through
    rows = _ingest(live_server, ops, ("opsbot", text), session=None)
    assert rows and {(k.state, k.state_reason) for k in rows} == {
        ("rejected", "f4_gate_a_classifier")
    }
    with account_context(ops.account.id):  # kept as evidence, with its provenance
        assert KnowledgeSource.objects.filter(knowledge__in=rows).count() == len(rows)
        event = LifecycleEvent.objects.get(knowledge=rows[0], to_state="rejected")
    # and the model's score against its threshold on the decision
    assert event.evidence["junk_model_score"] >= event.evidence["junk_model_threshold"]


@pipeline
def test_chat_next_to_it_is_still_kept(live_server, ops):
    rows = _ingest(
        live_server,
        ops,
        ("caroline", "I finally finished the mural at the community center."),
        session=None,
    )
    assert [(k.state, k.subject_peer.key) for k in rows] == [("active", "caroline")]


@pipeline
def test_an_agents_claim_about_the_user_is_provisional_for_the_user(live_server, ops):
    rows = _ingest(
        live_server,
        ops,
        ("caroline", "Hi, can you help me plan my week?"),
        ("opsbot", "The user is a vegetarian who lives in Berlin."),
    )
    about = [k for k in rows if "vegetarian" in k.statement]
    assert [(k.statement, k.subject_peer.key, k.state) for k in about] == [
        ("Caroline is a vegetarian who lives in Berlin.", "caroline", "provisional")
    ]
    # Nothing about it became an active fact about anyone, the agent included.
    assert not [k for k in rows if "vegetarian" in k.statement and k.state == "active"]


@pipeline
def test_an_agents_claim_about_a_user_nobody_can_name_is_held(live_server, ops):
    rows = _ingest(live_server, ops, ("opsbot", "The user's daughter is called Mia."), session=None)
    assert [(k.subject_peer_id, k.state) for k in rows] == [(None, "held")]


@pipeline
def test_an_agent_speaking_of_itself_is_unchanged(live_server, ops):
    rows = _ingest(
        live_server, ops, ("caroline", "Hi there."), ("opsbot", "I love helping with plans.")
    )
    own = [k for k in rows if "helping" in k.statement]
    assert [(k.subject_peer.key, k.state) for k in own] == [("opsbot", "active")]


@pipeline
def test_what_the_user_said_themself_stays_theirs_when_the_agent_repeats_it(live_server, ops):
    rows = _ingest(
        live_server,
        ops,
        ("caroline", "I'm vegetarian."),
        ("opsbot", "The user is vegetarian."),
    )
    # The agent's repeat joins the user's own active statement: no provisional copy.
    current = [k for k in rows if k.state != "rejected"]
    assert [(k.statement, k.subject_peer.key, k.state) for k in current] == [
        ("Caroline is vegetarian.", "caroline", "active")
    ]
    assert {k.state_reason for k in rows if k.state == "rejected"} == {"f4_gate_a_duplicate"}
    from memhouse.core.tenancy import account_context

    with account_context(ops.account.id):
        assert current[0].sources.count() == 2


def test_a_two_word_span_is_judged_by_its_message() -> None:
    from governance.intake.junk import learned_reason

    # alone, "Cancelled PureGym" reads as a status line (0.94); cut from a person's
    # update it is a person's words, and a fragment of a core dump stays machine output
    said = "Cancelled PureGym. I've joined the climbing wall at The Arch instead."
    assert learned_reason(statement="Hal cancelled PureGym.", excerpt="Cancelled PureGym",
                          message_text=said) is None
    dump = "Segmentation fault (core dumped)\n[1]    4411 exit 139     ./a.out"
    assert learned_reason(statement="Ops said: segmentation fault.",
                          excerpt="Segmentation fault", message_text=dump) is not None
