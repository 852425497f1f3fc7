"""Knowledge quality benchmark: is junk refused, and do updates replace what they update?

    .venv/bin/python bench/knowledge_quality.py [--dataset bench/fixtures/knowledge_quality.json] \
        --out bench/results/knowledge_quality.json [--keep-db] [--port 8766] \
        [--server auto|gunicorn|runserver] [--limit-messages N] [--limit-updates N]

It creates its own database (bench/common.bootstrap, `bench_kq`), an Account with one
scope, the fixture's peers (humans and agents) and an agent API key for a calling peer
`kq-agent` (with an act-for-all grant when `credential_create` offers one), then starts a
real server (gunicorn when installed, else `manage.py runserver --noreload`) bound to
127.0.0.1 with the default eager pipeline (`MEMHOUSE_CELERY_EAGER=true`, no model
provider), and talks to it only over HTTP (memhouse.client, httpx):

1. every fixture message goes in its own POST /api/v1/messages (its own session), said by
   its `speaker`, at its `occurred_at`;
2. the update pairs go in two rounds: first every pair's first message (the old one, or
   for `late_arrival` the new one), then every second message, each in its own request
   and session, with the fixture's `occurred_at` (the old one is always earlier);
3. it waits until every stored message is extracted (bounded);
4. junk / keep: the Knowledge rows whose sources include a message are read with the ORM
   inside account_context (there is no message -> statement API): a junk message is
   rejected when none of its rows is active, provisional or held; a keep message is kept
   when at least one is active or provisional;
5. updates: for each pair, POST /api/v1/search (profile balanced, peer_key = the subject,
   limit 10) and POST /api/v1/ask (model-free) with the pair's question, then value
   matching on the returned statements (see `value_outcome`); the lifecycle of the old
   and new rows (state, supersedes, open validations, contradicts relations) is read with
   the ORM for the per-item report.

Fixture format (JSON):

    {"format": "memhouse-knowledge-quality/1", "scope": "/kq",
     "peers": [{"key": "dana", "kind": "human", "display_name": "Dana Whitfield",
                "aliases": ["Dana"]}, ...],
     "messages": [{"id": "j01", "text": "...", "speaker": "opsbot", "label": "junk",
                   "category": "log_line", "occurred_at": "2026-03-02T08:00:00Z"}, ...],
     "updates": [{"id": "u01", "attribute": "appointment_time", "speaker": "dana",
                  "case": "same_speaker", "cue": "now",
                  "old": {"text": "...", "occurred_at": "..."},
                  "new": {"text": "...", "occurred_at": "...", "speaker": "nina"},
                  "old_value": "Tuesday at 10am", "new_value": "Thursday at 4pm",
                  "question": "When is my dentist appointment?"}, ...]}

`label` is junk or keep, or one of two placement checks: `about_other` (a turn whose
claims are about a named person other than the speaker: passes when no row drawn from it
is an active fact about the speaker) and `personal` (a sentence one clause of which is
personal: passes when every row drawn from it that is not rejected is personal or
restricted, so no clause of it is visible to others); `occurred_at` is optional.
`case` is same_speaker,
late_arrival (the new message is ingested first) or third_party (`new.speaker`, another
peer, states the new value about `speaker`); `new.speaker` defaults to `speaker`; `cue` is
the update wording (null: the new value is just stated). `validate_dataset` lists the
rules a fixture must follow (values appear in their texts, the new value never in the old
text, neither value in any other text of the fixture, the old one earlier).

Output keys: see bench/README.md ("Knowledge quality").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

from bench import common  # noqa: E402

REPO = common.REPO_ROOT
PYTHON = sys.executable
DEFAULT_DATASET = REPO / "bench" / "fixtures" / "knowledge_quality.json"
CASES = ("same_speaker", "late_arrival", "third_party")
# Cases where the newer fact is expected to replace the older one in reads.
SUPERSEDING_CASES = ("same_speaker", "late_arrival")
JUNK_VISIBLE_STATES = frozenset({"active", "provisional", "held"})
KEPT_STATES = frozenset({"active", "provisional"})
CURATOR_VALIDATIONS = frozenset({"review", "dispute"})  # governance.models.Validation.Kind
GOAL = 0.95
LABELS = ("junk", "keep", "about_other", "personal")
PRIVATE_SENSITIVITIES = frozenset({"personal", "restricted"})

SUBPROCESS_SETTINGS = '''\
from bench.settings import *  # noqa: F403
from bench.settings import DATABASES

DATABASES["default"]["ATOMIC_REQUESTS"] = True
'''


# ---------------------------------------------------------------------------------------
# Pure parts (tests/bench/test_knowledge_quality_smoke.py covers them)
# ---------------------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Lower case, accents kept, every run of non-alphanumerics one space, padded."""
    text = unicodedata.normalize("NFC", text or "").lower()
    return " " + " ".join("".join(ch if ch.isalnum() else " " for ch in text).split()) + " "


def mentions(text: str | None, value: str) -> bool:
    """`value` occurs in `text` as whole words, case-insensitively, punctuation ignored
    ("555-0142" matches "555 0142", "Paws & Claws" matches "paws claws"); its last word
    may carry a plural or third-person "s"/"es" ("bike" matches "bikes")."""
    if not text:
        return False
    v = normalise(value).strip()
    if not v:
        return False
    return re.search(" " + re.escape(v) + "(?:e?s)? ", normalise(text)) is not None


def value_outcome(statements: list[str], old_value: str, new_value: str,
                  marked: list[bool] | None = None, telling: list[bool] | None = None
                  ) -> dict[str, Any]:
    """Value matching over ranked statements (search top k, or ask's supporting
    statements). A statement mentioning the new value counts as current even when it
    also names the old one ("I no longer take the bus; I bike"); a statement is stale
    when it mentions the old value and not the new one.

    current_first: the first statement mentioning either value mentions the new one (no
    statement mentioning either value is a failure: the reader did not get the answer);
    stale_hidden: no stale statement among them; stale_hidden_or_marked: every stale one
    among them carries `possibly_outdated` (`marked`, per statement; read-time conflicts).

    `telling` (per statement): drawn from the update's own new message. Such a line that
    names only the old value tells the change ("Kwame cancelled their Iron Temple
    membership"): the strict keys count it as stale, the `*_telling_neutral` keys pass
    over it (neither current nor stale)."""
    out = _value_outcome(statements, old_value, new_value, marked)
    if telling is not None:
        keep = [n for n, t in enumerate(telling)
                if not (t and not mentions(statements[n], new_value))]
        rest = _value_outcome([statements[n] for n in keep], old_value, new_value,
                              [(marked or [False] * len(statements))[n] for n in keep])
        out["current_first_telling_neutral"] = rest["current_first"]
        out["stale_hidden_or_marked_telling_neutral"] = rest["stale_hidden_or_marked"]
    return out


def _value_outcome(statements: list[str], old_value: str, new_value: str,
                   marked: list[bool] | None) -> dict[str, Any]:
    first_rank = None
    first_is_new = False
    new_ranks: list[int] = []
    stale_ranks: list[int] = []
    for rank, text in enumerate(statements, start=1):
        has_new = mentions(text, new_value)
        has_old = mentions(text, old_value)
        if has_new:
            new_ranks.append(rank)
        elif has_old:
            stale_ranks.append(rank)
        if first_rank is None and (has_new or has_old):
            first_rank, first_is_new = rank, has_new
    marks = marked or [False] * len(statements)
    return {"current_first": first_rank is not None and first_is_new,
            "stale_hidden": not stale_ranks,
            "stale_hidden_or_marked": all(marks[r - 1] for r in stale_ranks),
            "marked_ranks": [r for r in stale_ranks if marks[r - 1]],
            "first_value_rank": first_rank, "new_ranks": new_ranks,
            "stale_ranks": stale_ranks, "n": len(statements)}


def rate(flags: list[bool]) -> float | None:
    return round(sum(1 for f in flags if f) / len(flags), 4) if flags else None


def _all_texts(data: dict[str, Any]) -> list[tuple[str, str]]:
    out = [(f"message {m['id']}", m["text"]) for m in data.get("messages", [])]
    for u in data.get("updates", []):
        out += [(f"update {u['id']} old", u["old"]["text"]),
                (f"update {u['id']} new", u["new"]["text"])]
    return out


def _parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def validate_dataset(data: dict[str, Any]) -> list[str]:
    """Every rule the fixture breaks, as sentences (empty: the fixture is usable)."""
    problems: list[str] = []
    peers = {p["key"]: p for p in data.get("peers", [])}
    for p in data.get("peers", []):
        if p.get("kind") not in ("human", "agent"):
            problems.append(f"peer {p.get('key')}: kind must be human or agent")
    if not str(data.get("scope", "")).startswith("/"):
        problems.append("scope must be a path such as /kq")
    ids = [m.get("id") for m in data.get("messages", [])] + \
          [u.get("id") for u in data.get("updates", [])]
    for dup in sorted(i for i, n in Counter(ids).items() if n > 1):
        problems.append(f"id {dup} is used more than once")
    for m in data.get("messages", []):
        if m.get("label") not in LABELS:
            problems.append(f"message {m.get('id')}: label must be junk or keep (or a "
                            "placement check: about_other, personal)")
        if m.get("speaker") not in peers:
            problems.append(f"message {m.get('id')}: unknown speaker {m.get('speaker')!r}")
        if not str(m.get("text", "")).strip() or not m.get("category"):
            problems.append(f"message {m.get('id')}: needs a text and a category")
    texts = _all_texts(data)
    for u in data.get("updates", []):
        uid = u.get("id")
        if u.get("case") not in CASES:
            problems.append(f"update {uid}: case must be one of {', '.join(CASES)}")
        new_speaker = u.get("new", {}).get("speaker") or u.get("speaker")
        for who in (u.get("speaker"), new_speaker):
            if who not in peers:
                problems.append(f"update {uid}: unknown speaker {who!r}")
        if u.get("case") == "third_party" and new_speaker == u.get("speaker"):
            problems.append(f"update {uid}: third_party needs new.speaker != speaker")
        if u.get("case") != "third_party" and new_speaker != u.get("speaker"):
            problems.append(f"update {uid}: only third_party has another new.speaker")
        old_t, new_t = u["old"]["text"], u["new"]["text"]
        ov, nv = u["old_value"], u["new_value"]
        if not u.get("question"):
            problems.append(f"update {uid}: needs a question")
        if not mentions(old_t, ov):
            problems.append(f"update {uid}: old_value {ov!r} not in the old text")
        if not mentions(new_t, nv):
            problems.append(f"update {uid}: new_value {nv!r} not in the new text")
        if mentions(old_t, nv):
            problems.append(f"update {uid}: new_value {nv!r} also in the old text")
        if mentions(ov, nv) or mentions(nv, ov):
            problems.append(f"update {uid}: one value contains the other")
        if _parse_time(u["new"]["occurred_at"]) <= _parse_time(u["old"]["occurred_at"]):
            problems.append(f"update {uid}: new.occurred_at must be after old.occurred_at")
        own = {f"update {uid} old", f"update {uid} new"}
        for where, text in texts:
            if where in own:
                continue
            for name, value in (("old_value", ov), ("new_value", nv)):
                if mentions(text, value):
                    problems.append(f"update {uid}: {name} {value!r} also occurs in {where}")
    return problems


def load_dataset(path: str | Path, limit_messages: int | None = None,
                 limit_updates: int | None = None) -> dict[str, Any]:
    """The fixture, validated; the limits take the first N junk and first N keep
    messages, and the first N updates of every case (a balanced slice for debugging)."""
    data = json.loads(Path(path).read_text())
    problems = validate_dataset(data)
    if problems:
        raise SystemExit("dataset problems:\n  " + "\n  ".join(problems))
    if limit_messages is not None:
        taken: Counter[str] = Counter()
        kept = []
        for m in data["messages"]:
            if taken[m["label"]] < limit_messages:
                taken[m["label"]] += 1
                kept.append(m)
        data["messages"] = kept
    if limit_updates is not None:
        taken = Counter()
        kept = []
        for u in data["updates"]:
            if taken[u["case"]] < limit_updates:
                taken[u["case"]] += 1
                kept.append(u)
        data["updates"] = kept
    base = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    for n, m in enumerate(data["messages"]):
        m.setdefault("occurred_at", (base + timedelta(minutes=7 * n)).isoformat())
    return data


def ingest_plan(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Requests in order: every message, then round 1 of the updates (old, or new for a
    late arrival), then round 2. Each: client id, session, speaker, text, occurred_at."""
    plan = [{"client_id": f"kq:{m['id']}", "session": f"kq:{m['id']}", "speaker": m["speaker"],
             "text": m["text"], "occurred_at": m["occurred_at"], "item": m["id"],
             "role": m["label"]} for m in data["messages"]]
    rounds: list[list[dict[str, Any]]] = [[], []]
    for u in data["updates"]:
        parts = {
            "old": {"speaker": u["speaker"], **u["old"]},
            "new": {**u["new"], "speaker": u["new"].get("speaker") or u["speaker"]},
        }
        order = ("new", "old") if u["case"] == "late_arrival" else ("old", "new")
        for i, role in enumerate(order):
            p = parts[role]
            rounds[i].append({"client_id": f"kq:{u['id']}:{role}",
                              "session": f"kq:{u['id']}:{role}", "speaker": p["speaker"],
                              "text": p["text"], "occurred_at": p["occurred_at"],
                              "item": u["id"], "role": role})
    return plan + rounds[0] + rounds[1]


def refused_by(m: dict[str, Any]) -> str:
    """What took a junk message out of use: `kept` (it was not), `nothing_proposed` (no
    statement drawn from it), `classifier` (Gate A's learned model, every refusal of it
    f4_gate_a_classifier) or `rules` (Gate A's rules or another refusal)."""
    if not m["ok"]:
        return "kept"
    if not m["reasons"]:
        return "nothing_proposed"
    return "classifier" if set(m["reasons"]) == {"f4_gate_a_classifier"} else "rules"


def settled_by(u: dict[str, Any]) -> str:
    """How intake took the old value of an update out of use: `superseded` (the rule was
    sure, at write time), `contradicts` (not sure: a contradicts relation that reads
    settle, newer first and older marked) or `neither`."""
    lc = u["lifecycle"]
    if lc["old_left_use"] or lc["supersedes_link"]:
        return "superseded"
    return "contradicts" if lc["contradicts"] else "neither"


def by_mechanism(updates: list[dict[str, Any]]) -> dict[str, Any]:
    """Per mechanism: how many updates it settled and how often reads then got them
    right (current first, and the old value hidden or marked), in search and in ask."""
    out: dict[str, Any] = {}
    for name in ("superseded", "contradicts", "neither"):
        items = [u for u in updates if settled_by(u) == name]
        out[name] = {"n": len(items), **{via: {
            "current_first_rate": rate([u[via]["current_first"] for u in items]),
            "stale_hidden_or_marked_rate": rate([
                u[via].get("stale_hidden_or_marked", u[via]["stale_hidden"]) for u in items]),
        } for via in ("search", "ask")}}
    return out


def summarise(messages: list[dict[str, Any]], updates: list[dict[str, Any]]
              ) -> dict[str, Any]:
    """Rates from the per-item results (see bench/README.md for the keys)."""
    junk = [m for m in messages if m["label"] == "junk"]
    keep = [m for m in messages if m["label"] == "keep"]
    out: dict[str, Any] = {
        "junk_rejected_rate": rate([m["ok"] for m in junk]),
        "valid_kept_rate": rate([m["ok"] for m in keep]),
        "junk_by_category": {}, "keep_by_category": {},
    }
    for label, group in (("junk_by_category", junk), ("keep_by_category", keep)):
        by: dict[str, list[bool]] = defaultdict(list)
        for m in group:
            by[m["category"]].append(m["ok"])
        out[label] = {c: {"n": len(v), "rate": rate(v)} for c, v in sorted(by.items())}
    for label, key in (("about_other", "third_party_placement"),
                       ("personal", "clause_sensitivity")):
        group = [m for m in messages if m["label"] == label]
        out[key] = {"n": len(group), "rate": rate([m["ok"] for m in group])}
    out["junk_by_mechanism"] = dict(sorted(Counter(refused_by(m) for m in junk).items()))
    out["keep_refused_by_classifier"] = sum(
        "f4_gate_a_classifier" in m["reasons"] for m in keep)

    def block(items: list[dict[str, Any]]) -> dict[str, Any]:
        res: dict[str, Any] = {"n": len(items)}
        for via in ("search", "ask"):
            res[via] = {
                "current_first_rate": rate([i[via]["current_first"] for i in items
                                            if via in i]),
                "stale_hidden_rate": rate([i[via]["stale_hidden"] for i in items
                                           if via in i]),
                "stale_hidden_or_marked_rate": rate([
                    i[via].get("stale_hidden_or_marked", i[via]["stale_hidden"])
                    for i in items if via in i]),
                # lines of the update's own message that tell the change passed over
                "current_first_telling_neutral_rate": rate([
                    i[via]["current_first_telling_neutral"] for i in items
                    if "current_first_telling_neutral" in i.get(via, {})]),
                "stale_hidden_or_marked_telling_neutral_rate": rate([
                    i[via]["stale_hidden_or_marked_telling_neutral"] for i in items
                    if "stale_hidden_or_marked_telling_neutral" in i.get(via, {})]),
                "both_rate": rate([i[via]["current_first"] and i[via].get(
                    "stale_hidden_or_marked", i[via]["stale_hidden"])
                    for i in items if via in i]),
            }
        return res

    sup = [u for u in updates if u["case"] in SUPERSEDING_CASES]
    out["updates"] = block(sup)
    out["updates_all_cases"] = block(updates)
    out["updates_by_case"] = {}
    for case in CASES:
        items = [u for u in updates if u["case"] == case]
        b = block(items)
        lc = [u["lifecycle"] for u in items]
        if case in SUPERSEDING_CASES:
            b["lifecycle"] = {
                "old_left_use_rate": rate([x["old_left_use"] for x in lc]),
                "new_usable_rate": rate([x["new_usable"] for x in lc]),
                "supersedes_link_rate": rate([x["supersedes_link"] for x in lc]),
            }
        else:
            b["lifecycle"] = {
                "not_silently_retired_rate": rate([x["not_silently_retired"] for x in lc]),
                "review_or_contradicts_rate": rate([x["review_or_contradicts"] for x in lc]),
                "old_still_usable_rate": rate([x["old_usable"] for x in lc]),
            }
        out["updates_by_case"][case] = b
    out["updates_by_mechanism"] = by_mechanism(sup)
    out["updates_by_cue"] = {
        "with_cue": block([u for u in sup if u.get("cue")]),
        "no_cue": block([u for u in sup if not u.get("cue")]),
    }
    headline = {
        "junk_rejected_rate": out["junk_rejected_rate"],
        "valid_kept_rate": out["valid_kept_rate"],
        "search_current_first_rate": out["updates"]["search"]["current_first_rate"],
        "search_stale_hidden_rate": out["updates"]["search"]["stale_hidden_rate"],
        "ask_current_first_rate": out["updates"]["ask"]["current_first_rate"],
        "ask_stale_hidden_rate": out["updates"]["ask"]["stale_hidden_rate"],
        "search_stale_hidden_or_marked_rate":
            out["updates"]["search"]["stale_hidden_or_marked_rate"],
        "ask_stale_hidden_or_marked_rate": out["updates"]["ask"]["stale_hidden_or_marked_rate"],
        "third_party_not_silently_retired_rate":
            out["updates_by_case"]["third_party"]["lifecycle"]["not_silently_retired_rate"],
        "third_party_placement_rate": out["third_party_placement"]["rate"],
        "clause_sensitivity_rate": out["clause_sensitivity"]["rate"],
    }
    out["headline"] = headline
    out["goal"] = GOAL
    out["goals_met"] = all(v is None or v >= GOAL for v in headline.values())
    return out


# ---------------------------------------------------------------------------------------
# Setup, server, ingest (HTTP)
# ---------------------------------------------------------------------------------------


def setup_account(data: dict[str, Any]) -> tuple[Any, str, dict[str, Any]]:
    import inspect

    from django.db import connections, transaction

    from knowledge import services
    from memhouse.core.tenancy import account_context

    with transaction.atomic():
        account = services.account_create(name="Knowledge quality bench", slug="kq-bench")
    grant: dict[str, Any] = {}
    with account_context(account.id):
        services.scope_ensure(account_id=account.id, path=data["scope"])
        agent = services.peer_create(account_id=account.id, key="kq-agent", kind="agent",
                                     display_name="knowledge quality bench agent")
        for p in data["peers"]:
            services.peer_create(account_id=account.id, key=p["key"], kind=p["kind"],
                                 display_name=p.get("display_name", p["key"]),
                                 aliases=list(p.get("aliases", [])))
        params = inspect.signature(services.credential_create).parameters
        if "act_for_all" in params:
            grant = {"act_for_all": True}
        elif "act_for" in params:
            grant = {"act_for": [p["key"] for p in data["peers"]]}
        _, api_key = services.credential_create(account_id=account.id, peer=agent,
                                                name="knowledge quality bench", **grant)
    connections.close_all()
    return account.id, api_key, {"act_for_grant": sorted(grant) or None}


def start_server(kind: str, port: int, env: dict[str, str], logdir: Path
                 ) -> tuple[subprocess.Popen[bytes], str]:
    from bench.load import gunicorn_extra_flags, have_gunicorn

    addr = f"127.0.0.1:{port}"
    if kind == "gunicorn" or (kind == "auto" and have_gunicorn()):
        version, extra = gunicorn_extra_flags()
        cmd = [PYTHON, "-m", "gunicorn", "memhouse.wsgi", "--bind", addr, "--workers", "1",
               "--timeout", "300", *extra]
        label = f"gunicorn {version} (1 sync worker)"
    else:
        cmd = [PYTHON, "manage.py", "runserver", addr, "--noreload"]
        label = "runserver --noreload"
    out = open(logdir / "server.log", "wb")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    return proc, label


def server_env(settings_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": os.pathsep.join([settings_dir, str(REPO)]
                                      + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])),
        "DJANGO_SETTINGS_MODULE": "memhouse_kq_settings",
        "MEMHOUSE_CELERY_EAGER": "true",   # the pipeline runs inside the ingest request
        "MEMHOUSE_RATE_LIMIT_PER_MINUTE": "0",
        "MEMHOUSE_RATE_LIMIT_PER_ACCOUNT_PER_MINUTE": "0",
        "MEMHOUSE_LLM_BASE_URL": "",       # model-free: rule extractor, model-free ask
        "PYTHONUNBUFFERED": "1",
        # The server listens on loopback only; the public built-in key is refused otherwise.
        "MEMHOUSE_ALLOW_INSECURE_LOCAL": "1",
    })
    return env


def ingest(base: str, key: str, scope: str, plan: list[dict[str, Any]]
           ) -> tuple[list[dict[str, Any]], float]:
    from memhouse.client import MemHouseClient, Message

    errors: list[dict[str, Any]] = []
    t0 = time.monotonic()
    with MemHouseClient(base, key, timeout=300, retries=0) as mh:
        for n, step in enumerate(plan, start=1):
            msg = Message(step["text"], peer_key=step["speaker"],
                          occurred_at=step["occurred_at"], id=step["client_id"],
                          metadata={"kq_item": step["item"], "kq_role": step["role"]})
            try:
                body = mh.ingest_messages(scope, [msg], session=step["session"])
                status = body["messages"][0]["status"]
                if status not in ("created", "duplicate"):
                    errors.append({"client_id": step["client_id"], "status": status})
            except Exception as exc:  # counted, never fatal
                errors.append({"client_id": step["client_id"], "error": repr(exc)[:300]})
            if n % 25 == 0:
                common.log(f"ingested {n}/{len(plan)} ({time.monotonic() - t0:.1f}s)")
    return errors, time.monotonic() - t0


def wait_extracted(account_id: Any, client_ids: list[str], timeout: float
                   ) -> dict[str, Any]:
    """Poll until every stored message of the plan is extracted (eager: at once)."""
    from django.db import connections

    from knowledge.models import Message
    from memhouse.core.tenancy import account_context

    t0 = time.monotonic()
    while True:
        try:
            with account_context(account_id):
                rows = Message.objects.filter(client_message_id__in=client_ids)
                stored = rows.count()
                extracted = rows.filter(extracted_at__isnull=False).count()
        finally:
            connections.close_all()
        if stored == extracted or time.monotonic() - t0 > timeout:
            return {"stored": stored, "extracted": extracted, "expected": len(client_ids),
                    "waited_seconds": round(time.monotonic() - t0, 1)}
        time.sleep(2)


# ---------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------


def rows_by_message(account_id: Any, client_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Knowledge rows (any state) whose sources include each message, with lifecycle
    evidence: open validations, relations, supersedes."""
    from django.db import connections

    from governance.models import Validation
    from knowledge.models import KnowledgeSource, Relation
    from memhouse.core.tenancy import account_context

    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    try:
        with account_context(account_id):
            srcs = (KnowledgeSource.objects
                    .filter(message__client_message_id__in=client_ids)
                    .select_related("knowledge", "knowledge__subject_peer", "message"))
            kids = set()
            for s in srcs:
                k = s.knowledge
                kids.add(k.id)
                if s.message is None or s.message.client_message_id is None:
                    continue
                out[s.message.client_message_id].append({
                    "id": str(k.id), "statement": k.statement, "state": k.state,
                    "state_reason": k.state_reason,
                    "subject": k.subject_peer.key if k.subject_peer else None,
                    "sensitivity": k.sensitivity, "named_entity": k.named_entity or "",
                    "supersedes": str(k.supersedes_id) if k.supersedes_id else None})
            vals: dict[str, list[str]] = defaultdict(list)
            for v in Validation.objects.filter(knowledge_id__in=kids, status="open"):
                vals[str(v.knowledge_id)].append(f"{v.kind}:{v.reason}")
            rels: dict[str, list[tuple[str, str]]] = defaultdict(list)
            for r in Relation.objects.filter(source_id__in=kids) | \
                    Relation.objects.filter(target_id__in=kids):
                rels[str(r.source_id)].append((r.type, str(r.target_id)))
                rels[str(r.target_id)].append((r.type, str(r.source_id)))
    finally:
        connections.close_all()
    for rows in out.values():
        for row in rows:
            row["open_validations"] = vals.get(row["id"], [])
            row["relations"] = sorted(set(rels.get(row["id"], [])))
    return out


def _message_row_line(r: dict[str, Any]) -> str:
    extra = "".join(f" {k}={r[k]}" for k in ("sensitivity", "subject", "named_entity")
                    if r.get(k))
    return f"[{r['state']}{extra}] {r['statement']}"


def judge_messages(data: dict[str, Any], rows: dict[str, list[dict[str, Any]]]
                   ) -> list[dict[str, Any]]:
    out = []
    for m in data["messages"]:
        mine = rows.get(f"kq:{m['id']}", [])
        states = Counter(r["state"] for r in mine)
        if m["label"] == "junk":
            usable = [r for r in mine if r["state"] in JUNK_VISIBLE_STATES]
            ok = not usable
        elif m["label"] == "about_other":
            # third-party placement: never an active fact about the speaker (held for a
            # curator, provisional for the person named, or not kept at all)
            ok = bool(mine) and not any(r["state"] == "active" and r["subject"] == m["speaker"]
                                        for r in mine)
        elif m["label"] == "personal":
            # clause sensitivity: every clause of the sentence that is kept is private
            kept = [r for r in mine if r["state"] != "rejected"]
            ok = bool(kept) and all(r.get("sensitivity") in PRIVATE_SENSITIVITIES
                                    for r in kept)
        else:
            usable = [r for r in mine if r["state"] in KEPT_STATES]
            ok = bool(usable)
        out.append({"id": m["id"], "label": m["label"], "category": m["category"],
                    "ok": ok, "states": dict(states),
                    "reasons": sorted({r["state_reason"] for r in mine}),
                    "statements": [_message_row_line(r) for r in mine]})
    return out


def _pick(rows: list[dict[str, Any]], value: str) -> list[dict[str, Any]]:
    hit = [r for r in rows if mentions(r["statement"], value)]
    return hit or rows


def judge_lifecycle(u: dict[str, Any], rows: dict[str, list[dict[str, Any]]]
                    ) -> dict[str, Any]:
    old = _pick(rows.get(f"kq:{u['id']}:old", []), u["old_value"])
    new = _pick(rows.get(f"kq:{u['id']}:new", []), u["new_value"])
    old_ids = {r["id"] for r in old}
    new_ids = {r["id"] for r in new}
    old_usable = any(r["state"] in KEPT_STATES | {"held"} for r in old)
    new_usable = any(r["state"] in KEPT_STATES for r in new)
    link = any(r["supersedes"] in old_ids for r in new) or \
        any(r["supersedes"] in new_ids for r in old)
    contradicts = any(t == "contradicts" and other in (new_ids | old_ids)
                      for r in old + new for t, other in r["relations"])
    # curator-facing work on either row; a subject confirmation question is not a review
    review = any(v.split(":", 1)[0] in CURATOR_VALIDATIONS
                 for r in old + new for v in r["open_validations"])
    keys = ("id", "state", "state_reason", "subject", "statement", "supersedes",
            "open_validations", "relations")
    return {
        "old_rows": [{k: r[k] for k in keys} for r in old],
        "new_rows": [{k: r[k] for k in keys} for r in new],
        "old_extracted": bool(old), "new_extracted": bool(new),
        "old_usable": old_usable, "new_usable": new_usable,
        "old_left_use": bool(old) and not old_usable,
        "supersedes_link": link, "contradicts": contradicts,
        "review_or_contradicts": review or contradicts,
        # third party: the old fact stays usable, or its retirement left a trace a curator
        # sees (an open validation or a contradicts relation)
        "not_silently_retired": bool(old) and (old_usable or review or contradicts),
    }


def query_updates(base: str, key: str, scope: str, updates: list[dict[str, Any]],
                  profile: str, top_k: int,
                  rows: dict[str, list[dict[str, Any]]] | None = None
                  ) -> list[dict[str, Any]]:
    from memhouse.client import MemHouseClient

    out = []
    with MemHouseClient(base, key, timeout=300, retries=0) as mh:
        for u in updates:
            res: dict[str, Any] = {"id": u["id"], "case": u["case"], "cue": u.get("cue"),
                                   "attribute": u["attribute"], "question": u["question"],
                                   "old_value": u["old_value"], "new_value": u["new_value"]}
            # rows drawn from the update's own new message (see value_outcome `telling`)
            own = {r["id"] for r in (rows or {}).get(f"kq:{u['id']}:new", [])}
            try:
                found = mh.search(u["question"], scope=scope, peer_key=u["speaker"],
                                  profile=profile, limit=top_k)
                stmts = [c["statement"] for c in found["candidates"]]
                marked = [bool(c.get("possibly_outdated")) for c in found["candidates"]]
                telling = [str(c.get("id")) in own for c in found["candidates"]]
                res["search"] = {**value_outcome(stmts, u["old_value"], u["new_value"],
                                                 marked, telling), "top": stmts[:5]}
            except Exception as exc:
                res["search"] = {"current_first": False, "stale_hidden": False,
                                 "error": repr(exc)[:300]}
            try:
                body: dict[str, Any] = mh.ask(u["question"], scope=scope,
                                              peer_key=u["speaker"])
                stmts = [str(x) for x in body.get("supporting_statements") or []]
                answer = str(body.get("answer") or "")
                cited = body.get("citations") or []
                marked = [bool(c.get("possibly_outdated")) for c in cited] if len(
                    cited) == len(stmts) else None
                telling = [str(c.get("id")) in own for c in cited] if len(
                    cited) == len(stmts) else None
                outcome = value_outcome(stmts, u["old_value"], u["new_value"], marked,
                                        telling)
                if not stmts and answer:  # an answer without its statements: the text
                    outcome = value_outcome([answer], u["old_value"], u["new_value"])
                res["ask"] = {**outcome, "answer": answer,
                              "abstained": body.get("abstained"),
                              "new_in_answer": mentions(answer, u["new_value"])}
            except Exception as exc:
                res["ask"] = {"current_first": False, "stale_hidden": False,
                              "error": repr(exc)[:300]}
            out.append(res)
    return out


def _row_line(r: dict[str, Any]) -> str:
    extra = "".join(f" {x}" for x in r["open_validations"])
    extra += "".join(f" {t}->{o[:8]}" for t, o in r["relations"])
    return f"[{r['state']} {r['state_reason']} subject={r['subject']}{extra}] {r['statement']}"


def failures(messages: list[dict[str, Any]], updates: list[dict[str, Any]]
             ) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["ok"]:
            continue
        what = ("junk kept as " + ", ".join(f"{n} {s}" for s, n in sorted(m["states"].items()))
                if m["label"] == "junk" else
                "a claim about someone else is an active fact about the speaker (or none kept)"
                if m["label"] == "about_other" else
                "a clause of a personal sentence is not private (or none kept)"
                if m["label"] == "personal" else
                ("keep message produced no statement" if not m["states"] else
                 "keep message has no active/provisional statement (states "
                 + ", ".join(f"{n} {s}" for s, n in sorted(m["states"].items())) + ")"))
        out.append({"id": m["id"], "kind": m["label"], "category": m["category"],
                    "what": what, "statements": m["statements"]})
    for u in updates:
        lc = u["lifecycle"]
        problems: list[str] = []
        notes: list[str] = []  # third party: reads may keep the old value; see lifecycle
        for via in ("search", "ask"):
            r = u[via]
            if r.get("error"):
                problems.append(f"{via}: error {r['error']}")
                continue
            sink = notes if u["case"] == "third_party" else problems
            if not r["current_first"]:
                sink.append(f"{via}: " + ("neither value in the results"
                                          if r.get("first_value_rank") is None else
                                          f"old value first (rank {r['first_value_rank']})"))
            if not r["stale_hidden"]:
                sink.append(f"{via}: stale statement at rank(s) {r.get('stale_ranks')}")
        if u["case"] == "third_party":
            if not lc["not_silently_retired"]:
                problems.append("lifecycle: old fact " + ("never extracted" if not
                                lc["old_extracted"] else "retired silently (no review, no "
                                "contradicts relation)"))
        else:
            if not lc["old_extracted"]:
                problems.append("lifecycle: old message produced no statement")
            if not lc["new_usable"]:
                problems.append("lifecycle: no usable statement of the new value")
        if problems or notes:
            out.append({"id": u["id"], "kind": "update", "case": u["case"],
                        "attribute": u["attribute"], "what": problems, "notes": notes,
                        "search_top": u["search"].get("top", []),
                        "ask_answer": u["ask"].get("answer"),
                        "old_rows": [_row_line(r) for r in lc["old_rows"]],
                        "new_rows": [_row_line(r) for r in lc["new_rows"]]})
    return out


def print_table(summary: dict[str, Any], counts: dict[str, Any]) -> None:
    def f(v: Any) -> str:
        return "  -  " if v is None else f"{v:.3f}"

    u, by = summary["updates"], summary["updates_by_case"]
    lines = [
        f"messages: {counts['junk']} junk, {counts['keep']} keep; updates: "
        + ", ".join(f"{counts['updates_by_case'].get(c, 0)} {c}" for c in CASES),
        f"junk rejected {f(summary['junk_rejected_rate'])}   valid kept "
        f"{f(summary['valid_kept_rate'])}   (goal >= {GOAL})",
        "updates              n   search cur-first  stale-hidden   ask cur-first  stale-hidden",
        f"  superseding      {u['n']:3d}   {f(u['search']['current_first_rate'])}"
        f"            {f(u['search']['stale_hidden_rate'])}          "
        f"{f(u['ask']['current_first_rate'])}          {f(u['ask']['stale_hidden_rate'])}",
    ]
    for case in CASES:
        b = by[case]
        lines.append(f"  {case:<15}{b['n']:4d}   {f(b['search']['current_first_rate'])}"
                     f"            {f(b['search']['stale_hidden_rate'])}          "
                     f"{f(b['ask']['current_first_rate'])}          "
                     f"{f(b['ask']['stale_hidden_rate'])}")
    tp = by["third_party"]["lifecycle"]
    lines.append(f"third party: not silently retired {f(tp['not_silently_retired_rate'])}, "
                 f"review or contradicts {f(tp['review_or_contradicts_rate'])}, old still "
                 f"usable {f(tp['old_still_usable_rate'])}")
    for case in SUPERSEDING_CASES:
        lc = by[case]["lifecycle"]
        lines.append(f"{case}: old left use {f(lc['old_left_use_rate'])}, new usable "
                     f"{f(lc['new_usable_rate'])}, supersedes link "
                     f"{f(lc['supersedes_link_rate'])}")
    for via in ("search", "ask"):
        v = u[via]
        lines.append(f"{via}: old hidden or marked {f(v['stale_hidden_or_marked_rate'])}, "
                     f"current first and old hidden or marked {f(v['both_rate'])}; lines "
                     f"telling the change passed over: current first "
                     f"{f(v['current_first_telling_neutral_rate'])}, old hidden or marked "
                     f"{f(v['stale_hidden_or_marked_telling_neutral_rate'])}")
    mech = summary["updates_by_mechanism"]
    lines.append("settled by: " + ", ".join(
        f"{k} {v['n']} (search {f(v['search']['current_first_rate'])}/"
        f"{f(v['search']['stale_hidden_or_marked_rate'])}, ask "
        f"{f(v['ask']['current_first_rate'])}/{f(v['ask']['stale_hidden_or_marked_rate'])})"
        for k, v in mech.items()))
    lines.append(f"junk by mechanism: {summary['junk_by_mechanism']}; third-party placement "
                 f"{f(summary['third_party_placement']['rate'])} "
                 f"(n={summary['third_party_placement']['n']}); clause sensitivity "
                 f"{f(summary['clause_sensitivity']['rate'])} "
                 f"(n={summary['clause_sensitivity']['n']})")
    lines.append(f"goals met: {summary['goals_met']}")
    for line in lines:
        print(line, flush=True)


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def build_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=str(DEFAULT_DATASET), help="the fixture (JSON)")
    ap.add_argument("--out", required=True, help="result JSON")
    ap.add_argument("--profile", default="balanced", help="search profile")
    ap.add_argument("--top-k", type=int, default=10, help="search results judged")
    ap.add_argument("--limit-messages", type=int, default=None,
                    help="first N junk and first N keep messages only")
    ap.add_argument("--limit-updates", type=int, default=None,
                    help="first N updates of each case only")
    ap.add_argument("--extract-timeout", type=float, default=300)
    ap.add_argument("--db-name", default="kq")
    ap.add_argument("--keep-db", action="store_true")
    ap.add_argument("--port", type=int, default=0, help="server port (0 = a free one)")
    ap.add_argument("--server", choices=("auto", "gunicorn", "runserver"), default="auto")
    ap.add_argument("--check-dataset", action="store_true",
                    help="validate the fixture, print its counts and exit (no database)")
    return ap.parse_args(argv)


def dataset_counts(data: dict[str, Any]) -> dict[str, Any]:
    labels = Counter(m["label"] for m in data["messages"])
    return {"messages": len(data["messages"]), "junk": labels.get("junk", 0),
            "keep": labels.get("keep", 0), "about_other": labels.get("about_other", 0),
            "personal": labels.get("personal", 0), "updates": len(data["updates"]),
            "updates_by_case": dict(Counter(u["case"] for u in data["updates"])),
            "updates_without_cue": sum(1 for u in data["updates"] if not u.get("cue")),
            "junk_categories": dict(Counter(m["category"] for m in data["messages"]
                                            if m["label"] == "junk")),
            "keep_categories": dict(Counter(m["category"] for m in data["messages"]
                                            if m["label"] == "keep"))}


def main(argv: list[str] | None = None) -> int:
    from bench.load import free_port, git_commit, stop_process, wait_for

    args = build_args(argv)
    data = load_dataset(args.dataset, args.limit_messages, args.limit_updates)
    counts = dataset_counts(data)
    if args.check_dataset:
        print(json.dumps(counts, indent=2))
        return 0
    started = time.monotonic()
    generated_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    port = args.port or free_port()
    dbname = common.bootstrap(args.db_name, keep_db=args.keep_db)
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    account_id, api_key, grant = setup_account(data)
    plan = ingest_plan(data)

    tmp = Path(tempfile.mkdtemp(prefix="memhouse_kq_"))
    (tmp / "memhouse_kq_settings.py").write_text(SUBPROCESS_SETTINGS)
    base = f"http://127.0.0.1:{port}"
    server, server_kind = start_server(args.server, port, server_env(str(tmp)), tmp)
    payload: dict[str, Any] = {}
    try:
        import httpx

        from memhouse.client import MemHouseClient

        t = time.monotonic()
        wait_for(lambda: httpx.get(base + "/healthz", timeout=2).status_code == 200,
                 240, "server", [server])
        with MemHouseClient(base, api_key, timeout=300, retries=0) as mh:
            mh.search("warm up", scope=data["scope"])  # loads the embedder in the server
        startup_s = time.monotonic() - t
        common.log(f"server ({server_kind}) ready in {startup_s:.1f}s; ingesting "
                   f"{len(plan)} messages one request each")

        ingest_errors, ingest_s = ingest(base, api_key, data["scope"], plan)
        extraction = wait_extracted(account_id, [p["client_id"] for p in plan],
                                    args.extract_timeout)
        common.log(f"ingest {ingest_s:.1f}s, errors {len(ingest_errors)}; {extraction}")

        rows = rows_by_message(account_id, [p["client_id"] for p in plan])
        msg_results = judge_messages(data, rows)
        t = time.monotonic()
        upd_results = query_updates(base, api_key, data["scope"], data["updates"],
                                    args.profile, args.top_k, rows)
        query_s = time.monotonic() - t
        by_id = {u["id"]: u for u in data["updates"]}
        for r in upd_results:
            r["lifecycle"] = judge_lifecycle(by_id[r["id"]], rows)
        summary = summarise(msg_results, upd_results)
        fails = failures(msg_results, upd_results)
        all_states = Counter(r["state"] for rs in rows.values() for r in rs)
        payload = {
            "benchmark": "knowledge_quality",
            "dataset": str(Path(args.dataset).resolve()),
            "dataset_format": data.get("format"),
            "generated_at": generated_at,
            "git_commit": git_commit(),
            "counts": {**counts, "ingest_requests": len(plan),
                       "ingest_errors": len(ingest_errors), "extraction": extraction,
                       "knowledge_rows_by_state": dict(all_states)},
            **{k: summary[k] for k in ("headline", "goal", "goals_met", "junk_rejected_rate",
                                       "valid_kept_rate", "junk_by_mechanism",
                                       "third_party_placement", "clause_sensitivity",
                                       "updates_by_mechanism",
                                       "keep_refused_by_classifier", "junk_by_category",
                                       "keep_by_category", "updates", "updates_all_cases",
                                       "updates_by_case", "updates_by_cue")},
            "lifecycle": common.lifecycle_report(account_id),
            "failures": fails,
            "ingest_errors": ingest_errors,
            "messages": msg_results,
            "update_results": upd_results,
            "elapsed_seconds": {"total": round(time.monotonic() - started, 1),
                                "server_startup": round(startup_s, 1),
                                "ingest": round(ingest_s, 1), "queries": round(query_s, 1)},
            "config": {"database": dbname, "kept_database": args.keep_db,
                       "server": server_kind, "address": base, "profile": args.profile,
                       "top_k": args.top_k, "celery_eager": True, "llm_provider": None,
                       "limit_messages": args.limit_messages,
                       "limit_updates": args.limit_updates, **grant,
                       "cpu_count": os.cpu_count(), "loadavg_end": os.getloadavg()},
        }
        common.write_json(args.out, payload)
        print_table(summary, counts)
        common.log(f"{len(fails)} failing items listed under 'failures' in {args.out}")
    finally:
        stop_process(server)
        if payload:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            common.log(f"failed; server log kept in {tmp}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
