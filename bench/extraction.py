"""Extraction quality: the extractor's claims against a hand-annotated gold set.

    .venv/bin/python bench/extraction.py --dataset bench/fixtures/extraction_gold.json \
        --out bench/results/extraction.json [--extractor rules|llm|all] \
        [--locomo ../shared/eval/locomo/locomo_dev.json] [--threshold 0.7] \
        [--limit N] [--sample-pairs 30] [--verbose]

No database and no server: each gold turn becomes the `ObservedMessage` ingest would
build (`governance.intake.pipeline.process_message`): the speaker's key and display
name, `occurred_at`, the known peers of the turn's group (display names and aliases,
lower-cased, as `known_peer_names` gives them) and the addressee as
`conversation_addressee` finds it: the other speaker when the turn and the earlier turns
given with it come from exactly two peers, and the context turns themselves as
`recent_turns` (ingest passes the session's previous messages the same way,
`governance.intake.pipeline.recent_turns`). Document turns go through
`document_claims`, the sentence path ingest uses for every document whatever extractor
is configured. The LLM extractor runs only when a provider is configured
(`MEMHOUSE_LLM_BASE_URL`); a failing call falls back to the rules as ingest does, and is
counted.

Matching (per turn): a predicted claim matches a gold claim when its subject is the gold
subject (or one of the gold claim's `alt_subjects`) and the cosine of the two statements
with the default embedder (`retrieval.embedding.get_embedder`) is at least the
threshold; pairs are taken one-to-one, greedily, highest cosine first. Subject accuracy
uses the same greedy matching with the subject ignored: of those pairs, the share whose
subject is right. Format of the gold set and keys of --out: bench/README.md
("Extraction quality").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
from bench.common import fix_sys_path  # noqa: E402

fix_sys_path()

FORMAT = "memhouse-extraction-gold/1"
DEFAULT_DATASET = REPO_ROOT / "bench" / "fixtures" / "extraction_gold.json"
DEFAULT_LOCOMO = REPO_ROOT.parent / "shared" / "eval" / "locomo" / "locomo_dev.json"
# Checked by hand on 30 pairs around it (bench/README.md, "Extraction quality").
DEFAULT_THRESHOLD = 0.6
SOURCES = ("locomo", "everyday", "work", "document")
KINDS = ("fact", "preference", "relation", "skill", "event")
SENSITIVITIES = ("public", "internal", "personal", "restricted")
# a, b: the first gold set; c: turns written and annotated after rule-v4, before any
# extractor ran on them (the honest check that a rule generalises)
SPLITS = ("a", "b", "c")
SCOPE = None  # gold and predicted subject of a claim about the scope
MESSAGE_ID = "00000000-0000-4000-8000-00000000e001"


# ---------------------------------------------------------------------------------------
# The gold set
# ---------------------------------------------------------------------------------------


def _parse_day(value: str | None) -> str | None:
    if value is None:
        return None
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(value)):
        raise ValueError(value)
    return date.fromisoformat(value).isoformat()


def validate_gold(data: dict[str, Any]) -> list[str]:
    """Every rule the gold set breaks, as sentences (empty: usable)."""
    problems: list[str] = []
    if data.get("format") != FORMAT:
        problems.append(f"format must be {FORMAT}")
    peers = data.get("peers", [])
    keys = [p.get("key") for p in peers]
    for dup in sorted(k for k, n in Counter(keys).items() if n > 1):
        problems.append(f"peer key {dup} is used more than once")
    groups: dict[str, set[str]] = defaultdict(set)
    for p in peers:
        groups[p.get("group", "")].add(p.get("key"))
    ids = [t.get("id") for t in data.get("turns", [])]
    for dup in sorted(i for i, n in Counter(ids).items() if n > 1):
        problems.append(f"turn id {dup} is used more than once")
    for t in data.get("turns", []):
        tid = t.get("id")
        if t.get("source") not in SOURCES:
            problems.append(f"turn {tid}: source must be one of {', '.join(SOURCES)}")
        if t.get("split") not in SPLITS:
            problems.append(f"turn {tid}: split must be one of {', '.join(SPLITS)}")
        members = groups.get(t.get("group", ""), set())
        if t.get("source") == "locomo":
            ref = t.get("locomo") or {}
            if not ref.get("sample_id") or not ref.get("dia_id"):
                problems.append(f"turn {tid}: a locomo turn needs locomo.sample_id and dia_id")
        else:
            if not str(t.get("text", "")).strip():
                problems.append(f"turn {tid}: needs a text")
            try:
                _aware(t.get("occurred_at"))
            except (TypeError, ValueError):
                problems.append(f"turn {tid}: occurred_at must be an ISO time with a zone")
        if t.get("source") == "document":
            if t.get("speaker") is not None:
                problems.append(f"turn {tid}: a document has no speaker")
        elif t.get("speaker") not in members:
            problems.append(f"turn {tid}: speaker {t.get('speaker')!r} is not a peer of "
                            f"group {t.get('group')!r}")
        for c in t.get("context", []) or []:
            if c.get("speaker") not in members:
                problems.append(f"turn {tid}: context speaker {c.get('speaker')!r} unknown")
        for n, c in enumerate(t.get("claims", [])):
            where = f"turn {tid} claim {n}"
            for subject in [c.get("subject"), *c.get("alt_subjects", [])]:
                if subject is not SCOPE and subject not in members:
                    problems.append(f"{where}: subject {subject!r} is not a peer of the group")
            if not str(c.get("statement", "")).strip():
                problems.append(f"{where}: needs a statement")
            if c.get("kind") not in KINDS:
                problems.append(f"{where}: kind must be one of {', '.join(KINDS)}")
            if c.get("sensitivity") not in SENSITIVITIES:
                problems.append(f"{where}: sensitivity must be one of "
                                f"{', '.join(SENSITIVITIES)}")
            try:
                vf, vu = _parse_day(c.get("valid_from")), _parse_day(c.get("valid_until"))
            except (TypeError, ValueError):
                problems.append(f"{where}: valid_from/valid_until must be YYYY-MM-DD or null")
            else:
                if vf and vu and vf >= vu:
                    problems.append(f"{where}: valid_from must be before valid_until")
            # the gold statement itself must pass the checks a prediction is held to
            if c.get("claim_date") and not contains_form(c["statement"], c["claim_date"]):
                problems.append(f"{where}: the statement has none of its claim_date forms")
            if c.get("must_mention") and not mentions_all(c["statement"], c["must_mention"]):
                problems.append(f"{where}: the statement lacks a must_mention term")
    return problems


def _aware(value: Any) -> datetime:
    when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if when.tzinfo is None:
        raise ValueError("naive")
    return when


def _locomo_index(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(sample_id, dia_id) -> text, speaker, occurred_at and the two earlier turns of its
    session (LoCoMo times are naive; UTC as in bench/common.py)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for conv in json.loads(path.read_text()):
        c = conv["conversation"]
        n = 1
        while f"session_{n}" in c:
            when = datetime.strptime(c[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y"
                                     ).replace(tzinfo=UTC)
            turns = c[f"session_{n}"]
            for i, turn in enumerate(turns):
                out[(conv["sample_id"], turn["dia_id"])] = {
                    "text": turn["text"], "speaker_name": turn["speaker"],
                    "occurred_at": when.isoformat(),
                    "context": [{"speaker_name": t["speaker"], "text": t["text"]}
                                for t in turns[max(0, i - 2):i]]}
            n += 1
    return out


def load_gold(path: str | Path, locomo: str | Path | None = None,
              limit: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The gold set, validated, with LoCoMo turns' text, time and context filled in from
    the LoCoMo file (the fixture holds only their ids: the data set is not ours to copy).
    Without that file the LoCoMo turns are left out and the note says so. Returns
    (data, note)."""
    data = json.loads(Path(path).read_text())
    problems = validate_gold(data)
    if problems:
        raise SystemExit("gold set problems:\n  " + "\n  ".join(problems))
    names = {p["key"]: p for p in data["peers"]}
    by_group_name: dict[tuple[str, str], str] = {
        (p["group"], p["name"]): p["key"] for p in data["peers"]}
    note: dict[str, Any] = {"locomo_path": str(locomo) if locomo else None}
    index: dict[tuple[str, str], dict[str, Any]] | None = None
    if locomo and Path(locomo).exists():
        index = _locomo_index(Path(locomo))
    kept = []
    missing = []
    for t in data["turns"]:
        if t["source"] == "locomo":
            ref = t["locomo"]
            found = index.get((ref["sample_id"], ref["dia_id"])) if index else None
            if found is None:
                missing.append(t["id"])
                continue
            if not found["text"].startswith(ref.get("text_prefix", "")):
                raise SystemExit(f"turn {t['id']}: the LoCoMo text does not start with "
                                 f"{ref.get('text_prefix')!r} (another LoCoMo version?)")
            t = dict(t, text=found["text"], occurred_at=found["occurred_at"], context=[
                {"speaker": by_group_name[(t["group"], c["speaker_name"])], "text": c["text"]}
                for c in found["context"]])
            if names[t["speaker"]]["name"] != found["speaker_name"]:
                raise SystemExit(f"turn {t['id']}: speaker is {found['speaker_name']} in LoCoMo")
        kept.append(t)
    note["locomo_turns_missing"] = len(missing)
    if missing:
        note["locomo_skipped"] = ("LoCoMo file not found" if index is None
                                  else "dia_id not in the LoCoMo file")
    data = dict(data, turns=kept[:limit] if limit else kept)
    return data, note


def gold_counts(data: dict[str, Any]) -> dict[str, Any]:
    turns = data["turns"]
    return {
        "turns": len(turns),
        "claims": sum(len(t["claims"]) for t in turns),
        "turns_without_claims": sum(1 for t in turns if not t["claims"]),
        "by_source": dict(Counter(t["source"] for t in turns)),
        "by_split": dict(Counter(t["split"] for t in turns)),
        "by_class": dict(sorted(Counter(c for t in turns for c in t.get("classes", [])).items())),
        "date_is_claim": sum(1 for t in turns for c in t["claims"] if c.get("claim_date")),
        "with_valid_time": sum(1 for t in turns for c in t["claims"]
                               if c.get("valid_from") or c.get("valid_until")),
        "sensitivity": dict(Counter(c["sensitivity"] for t in turns for c in t["claims"])),
        "kind": dict(Counter(c["kind"] for t in turns for c in t["claims"])),
    }


# ---------------------------------------------------------------------------------------
# Pure parts: normalising, matching, metrics (tests/bench/test_extraction_bench.py)
# ---------------------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Lower case, ordinal suffixes dropped (23rd -> 23), am/pm joined to the hour
    (7 am -> 7am), every run of non-alphanumerics one space, padded with spaces."""
    text = unicodedata.normalize("NFC", text or "").lower()
    text = re.sub(r"\b(\d+)(?:st|nd|rd|th)\b", r"\1", text)
    text = re.sub(r"\b(\d+)\s+(am|pm)\b", r"\1\2", text)
    return " " + " ".join("".join(ch if ch.isalnum() else " " for ch in text).split()) + " "


def contains_form(statement: str, forms: Iterable[str]) -> bool:
    """Does the statement contain one of the forms as whole words (normalised; the last
    word may take a plural "s": "Thursday" matches "on Thursdays")?"""
    hay = normalise(statement)
    return any(re.search(" " + re.escape(normalise(f).strip()) + "s? ", hay) is not None
               for f in forms if normalise(f).strip())


def mentions_all(statement: str, terms: Iterable[str]) -> bool:
    """Every term occurs in the statement as a word prefix ("turtle" matches "turtles");
    a term "a|b" is satisfied by either alternative."""
    hay = normalise(statement)
    for term in terms:
        if not any(normalise(alt).strip() and (" " + normalise(alt).strip()) in hay
                   for alt in term.split("|")):
            return False
    return True


def subject_ok(gold: dict[str, Any], pred: dict[str, Any]) -> bool:
    return pred["subject"] == gold["subject"] or pred["subject"] in gold.get("alt_subjects", [])


def greedy_match(gold: list[dict[str, Any]], pred: list[dict[str, Any]],
                 sims: list[list[float]], threshold: float, *, use_subject: bool = True
                 ) -> list[tuple[int, int, float]]:
    """One-to-one pairs (gold index, predicted index, cosine), highest cosine first,
    each at or above the threshold; with use_subject the subject must agree too."""
    candidates = [(sims[g][p], g, p) for g in range(len(gold)) for p in range(len(pred))
                  if sims[g][p] >= threshold
                  and (not use_subject or subject_ok(gold[g], pred[p]))]
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    used_g: set[int] = set()
    used_p: set[int] = set()
    pairs = []
    for sim, g, p in candidates:
        if g in used_g or p in used_p:
            continue
        used_g.add(g)
        used_p.add(p)
        pairs.append((g, p, round(sim, 4)))
    return pairs


def prf(matched: int, gold: int, pred: int) -> dict[str, Any]:
    precision = matched / pred if pred else None
    recall = matched / gold if gold else None
    f1 = (2 * precision * recall / (precision + recall)
          if precision is not None and recall is not None and precision + recall else
          (0.0 if precision is not None and recall is not None else None))
    return {"precision": _r(precision), "recall": _r(recall), "f1": _r(f1)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _day(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value.astimezone(UTC).date().isoformat()


def valid_time_equal(gold: dict[str, Any], pred: dict[str, Any]) -> bool:
    """Both ends equal at day precision in UTC (None == None); `until` is exclusive."""
    return (_day(gold.get("valid_from")) == _day(pred.get("valid_from"))
            and _day(gold.get("valid_until")) == _day(pred.get("valid_until")))


def has_valid_time(claim: dict[str, Any]) -> bool:
    return claim.get("valid_from") is not None or claim.get("valid_until") is not None


def score_turn(turn: dict[str, Any], pred: list[dict[str, Any]], sims: list[list[float]],
               threshold: float) -> dict[str, Any]:
    """Everything measured on one turn; `summarise` adds these up."""
    gold = turn["claims"]
    pairs = greedy_match(gold, pred, sims, threshold)
    loose = greedy_match(gold, pred, sims, threshold, use_subject=False)
    matched_g = {g: p for g, p, _ in pairs}
    matched_p = {p for _, p, _ in pairs}
    out: dict[str, Any] = {
        "id": turn["id"], "source": turn["source"], "split": turn["split"],
        "classes": turn.get("classes", []), "gold": len(gold), "pred": len(pred),
        "matched": len(pairs), "pairs": pairs,
        "subject_pairs": len(loose),
        "subject_right": sum(1 for g, p, _ in loose if subject_ok(gold[g], pred[p])),
        "subject_exact": sum(1 for g, p, _ in loose if pred[p]["subject"] == gold[g]["subject"]),
        "wrong_subject": [{"gold": gold[g]["statement"], "gold_subject": gold[g]["subject"],
                           "pred": pred[p]["statement"], "pred_subject": pred[p]["subject"],
                           "cosine": s}
                          for g, p, s in loose if not subject_ok(gold[g], pred[p])],
        "date_claims": 0, "date_kept": 0, "date_matched": 0,
        "mention_claims": 0, "mention_kept": 0,
        "vt_pairs": 0, "vt_right": 0, "vt_all_right": 0,
        "kind_right": 0, "sensitivity": [], "kind": [],
        "missed": [gold[g] for g in range(len(gold)) if g not in matched_g],
        "spurious": [pred[p] for p in range(len(pred)) if p not in matched_p],
        "date_dropped": [], "vt_wrong": [], "unresolved": [],
    }
    for g, claim in enumerate(gold):
        p = matched_g.get(g)
        got = pred[p] if p is not None else None
        if claim.get("claim_date"):
            out["date_claims"] += 1
            if got is not None:
                out["date_matched"] += 1
                if contains_form(got["statement"], claim["claim_date"]):
                    out["date_kept"] += 1
                else:
                    out["date_dropped"].append({"gold": claim["statement"],
                                                "pred": got["statement"]})
        if claim.get("must_mention"):
            out["mention_claims"] += 1
            if got is not None and mentions_all(got["statement"], claim["must_mention"]):
                out["mention_kept"] += 1
            elif got is not None:
                out["unresolved"].append({"gold": claim["statement"], "pred": got["statement"],
                                          "must_mention": claim["must_mention"]})
        if got is None:
            continue
        same_vt = valid_time_equal(claim, got)
        out["vt_all_right"] += same_vt
        if has_valid_time(claim) or has_valid_time(got):
            out["vt_pairs"] += 1
            out["vt_right"] += same_vt
            if not same_vt:
                out["vt_wrong"].append({
                    "gold": claim["statement"], "pred": got["statement"],
                    "gold_vt": [claim.get("valid_from"), claim.get("valid_until")],
                    "pred_vt": [_day(got.get("valid_from")), _day(got.get("valid_until"))]})
        out["kind_right"] += claim["kind"] == got["kind"]
        out["kind"].append((claim["kind"], got["kind"]))
        out["sensitivity"].append((claim["sensitivity"], got["sensitivity"]))
    return out


def confusion(pairs: Iterable[tuple[str, str]], labels: tuple[str, ...]
              ) -> dict[str, dict[str, int]]:
    """gold label -> predicted label -> count, every label present (zeros kept)."""
    table = {g: dict.fromkeys(labels, 0) for g in labels}
    for g, p in pairs:
        table[g][p] += 1
    return table


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates over scored turns (see bench/README.md for the keys)."""
    def total(key: str) -> int:
        return sum(r[key] for r in rows)

    gold, pred, matched = total("gold"), total("pred"), total("matched")
    silent = [r for r in rows if r["gold"] == 0]
    sens = [pair for r in rows for pair in r["sensitivity"]]
    kinds = [pair for r in rows for pair in r["kind"]]
    out: dict[str, Any] = {
        "turns": len(rows), "gold_claims": gold, "predicted_claims": pred, "matched": matched,
        **prf(matched, gold, pred),
        "subject_accuracy": _r(total("subject_right") / total("subject_pairs"))
        if total("subject_pairs") else None,
        "subject_pairs": total("subject_pairs"),
        # alt_subjects not accepted: how often the claim sits on the gold subject itself
        "subject_exact_rate": _r(total("subject_exact") / total("subject_pairs"))
        if total("subject_pairs") else None,
        "wrong_subject": total("subject_pairs") - total("subject_right"),
        "date_is_claim": {"n": total("date_claims"), "matched": total("date_matched"),
                          "kept": total("date_kept"),
                          "kept_rate": _r(total("date_kept") / total("date_claims"))
                          if total("date_claims") else None,
                          "kept_rate_of_matched": _r(total("date_kept") / total("date_matched"))
                          if total("date_matched") else None},
        "valid_time": {"pairs_with_valid_time": total("vt_pairs"), "right": total("vt_right"),
                       "accuracy": _r(total("vt_right") / total("vt_pairs"))
                       if total("vt_pairs") else None,
                       "accuracy_all_matched": _r(total("vt_all_right") / matched)
                       if matched else None},
        "referent_kept": {"n": total("mention_claims"), "kept": total("mention_kept"),
                          "rate": _r(total("mention_kept") / total("mention_claims"))
                          if total("mention_claims") else None},
        "kind_accuracy": _r(total("kind_right") / matched) if matched else None,
        "sensitivity_accuracy": _r(sum(1 for g, p in sens if g == p) / len(sens))
        if sens else None,
        "sensitivity_confusion": confusion(sens, SENSITIVITIES),
        "kind_confusion": confusion(kinds, KINDS),
        "no_claim_turns": {"n": len(silent),
                           "silent": sum(1 for r in silent if r["pred"] == 0),
                           "silent_rate": _r(sum(1 for r in silent if r["pred"] == 0)
                                             / len(silent)) if silent else None},
    }
    return out


def report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall, per source, per split, per source and split, per failure class."""
    sources = [s for s in SOURCES if any(r["source"] == s for r in rows)]
    classes = sorted({c for r in rows for c in r["classes"]})
    brief = ("turns", "gold_claims", "predicted_claims", "matched", "precision", "recall",
             "f1", "wrong_subject")
    by_class = {}
    for c in classes:
        figures = summarise([r for r in rows if c in r["classes"]])
        by_class[c] = {k: figures[k] for k in brief}
    return {
        "overall": summarise(rows),
        "by_source": {s: summarise([r for r in rows if r["source"] == s]) for s in sources},
        "by_split": {h: summarise([r for r in rows if r["split"] == h]) for h in SPLITS},
        "by_source_split": {f"{s}/{h}": summarise([r for r in rows if r["source"] == s
                                                    and r["split"] == h])
                            for s in sources for h in SPLITS},
        "by_class": by_class,
    }


# ---------------------------------------------------------------------------------------
# Running an extractor
# ---------------------------------------------------------------------------------------


def known_peers(data: dict[str, Any], group: str) -> dict[str, str]:
    """Lower-cased display names and aliases -> key, for the peers of one group (one
    scope: ingest resolves a name shared by several peers to the one who spoke there)."""
    names: dict[str, str] = {}
    for p in data["peers"]:
        if p["group"] == group:
            for name in [p["name"], *p.get("aliases", [])]:
                names[name.lower()] = p["key"]
    return names


def addressee(turn: dict[str, Any]) -> str | None:
    """As governance.intake.pipeline.conversation_addressee: the other speaker when this
    turn and its context come from exactly two peers."""
    keys = {c["speaker"] for c in turn.get("context", [])} | {turn["speaker"]}
    others = keys - {turn["speaker"]}
    return others.pop() if len(keys) == 2 and len(others) == 1 else None


def observed_message(data: dict[str, Any], turn: dict[str, Any]) -> Any:
    from knowledge.ingest.extraction import ObservedMessage

    speaker = next(p for p in data["peers"] if p["key"] == turn["speaker"])
    return ObservedMessage(
        message_id=MESSAGE_ID, text=turn["text"], speaker_key=speaker["key"],
        speaker_name=speaker["name"], occurred_at=_aware(turn["occurred_at"]),
        known_peers=known_peers(data, turn["group"]), addressee_key=addressee(turn),
        recent_turns=tuple((c["speaker"], c["text"]) for c in turn.get("context", [])))


def _as_dict(claim: Any) -> dict[str, Any]:
    return {"subject": claim.subject_peer_key, "statement": claim.statement,
            "kind": claim.kind, "sensitivity": claim.sensitivity,
            "valid_from": _day(claim.relevant_from), "valid_until": _day(claim.relevant_until)}


def run_extractor(name: str, data: dict[str, Any]) -> tuple[dict[str, list[dict[str, Any]]],
                                                            dict[str, Any]]:
    """Predicted claims per turn id, and how they were made."""
    from governance.intake.pipeline import document_claims
    from knowledge.ingest.extraction import ExtractionError
    from knowledge.ingest.rule_extractor import RuleBasedExtractor

    if name == "rules":
        extractor: Any = RuleBasedExtractor()
    else:
        from knowledge.ingest.llm_extractor import LLMExtractor
        from memhouse.core.llm import get_provider

        provider = get_provider()
        if provider is None:
            raise LookupError("no model provider configured (MEMHOUSE_LLM_BASE_URL is empty)")
        extractor = LLMExtractor(provider)
    fallback = RuleBasedExtractor()
    out: dict[str, list[dict[str, Any]]] = {}
    fell_back = 0
    chat_seconds = 0.0
    chat_turns = 0
    for turn in data["turns"]:
        if turn["source"] == "document":
            claims = document_claims(turn["text"], names=known_peers(data, turn["group"]),
                                     occurred_at=_aware(turn["occurred_at"]))
            out[turn["id"]] = [_as_dict(c) for c, _ in claims]
            continue
        observed = observed_message(data, turn)
        started = time.perf_counter()
        try:
            got = extractor.extract(observed)
        except ExtractionError:
            fell_back += 1
            got = fallback.extract(observed)
        chat_seconds += time.perf_counter() - started
        chat_turns += 1
        out[turn["id"]] = [_as_dict(c) for c in got]
    how = {"extractor": f"{extractor.name}/{extractor.version}",
           "documents": "governance.intake.pipeline.document_claims (document/sentences-v1)",
           "fell_back_to_rules": fell_back,
           "chat_turns_per_second": round(chat_turns / chat_seconds, 1) if chat_seconds else None}
    return out, how


def similarities(data: dict[str, Any], predicted: dict[str, list[dict[str, Any]]]
                 ) -> dict[str, list[list[float]]]:
    """Per turn, gold x predicted statement cosines with the default embedder (one
    batch; the vectors are normalised here so any embedder works)."""
    from retrieval.embedding import get_embedder

    texts: list[str] = []
    for turn in data["turns"]:
        texts += [c["statement"] for c in turn["claims"]]
        texts += [c["statement"] for c in predicted[turn["id"]]]
    unique = list(dict.fromkeys(texts))
    vectors = get_embedder().embed_documents(unique) if unique else []
    unit = {}
    for text, vec in zip(unique, vectors, strict=True):
        norm = math.sqrt(sum(x * x for x in vec)) or 1.0
        unit[text] = [x / norm for x in vec]
    out = {}
    for turn in data["turns"]:
        pred = predicted[turn["id"]]
        out[turn["id"]] = [[sum(a * b for a, b in zip(unit[g["statement"]],
                                                      unit[p["statement"]], strict=True))
                            for p in pred] for g in turn["claims"]]
    return out


def sample_pairs(data: dict[str, Any], predicted: dict[str, list[dict[str, Any]]],
                 sims: dict[str, list[list[float]]], threshold: float, n: int
                 ) -> list[dict[str, Any]]:
    """For the hand check of the threshold: each gold claim's closest same-subject
    prediction, the n whose cosine is nearest the threshold (both sides of it)."""
    rows = []
    for turn in data["turns"]:
        pred = predicted[turn["id"]]
        for g, claim in enumerate(turn["claims"]):
            best = max(((sims[turn["id"]][g][p], p) for p in range(len(pred))
                        if subject_ok(claim, pred[p])), default=None)
            if best is not None:
                rows.append({"turn": turn["id"], "cosine": round(best[0], 4),
                             "gold": claim["statement"], "pred": pred[best[1]]["statement"]})
    rows.sort(key=lambda r: abs(r["cosine"] - threshold))
    return sorted(rows[:n], key=lambda r: -r["cosine"])


def evaluate(name: str, data: dict[str, Any], threshold: float, sample: int = 0
             ) -> dict[str, Any]:
    started = time.monotonic()
    predicted, how = run_extractor(name, data)
    sims = similarities(data, predicted)
    rows = [score_turn(t, predicted[t["id"]], sims[t["id"]], threshold) for t in data["turns"]]
    result: dict[str, Any] = {**how, **report(rows)}
    result["errors"] = [
        {"id": r["id"], "source": r["source"], "classes": r["classes"],
         "text": t["text"], "speaker": t.get("speaker"),
         "missed": [{"subject": c["subject"], "statement": c["statement"]} for c in r["missed"]],
         "spurious": [{"subject": c["subject"], "statement": c["statement"]}
                      for c in r["spurious"]],
         **{k: r[k] for k in ("wrong_subject", "date_dropped", "vt_wrong", "unresolved")
            if r[k]}}
        for r, t in zip(rows, data["turns"], strict=True)
        if r["missed"] or r["spurious"] or r["wrong_subject"] or r["date_dropped"]
        or r["vt_wrong"] or r["unresolved"]]
    result["predictions"] = {t["id"]: predicted[t["id"]] for t in data["turns"]}
    if sample:
        result["threshold_sample"] = sample_pairs(data, predicted, sims, threshold, sample)
    result["elapsed_seconds"] = round(time.monotonic() - started, 1)
    return result


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memhouse.settings")
    import django

    django.setup()


def headline(result: dict[str, Any]) -> dict[str, Any]:
    o = result["overall"]
    return {"precision": o["precision"], "recall": o["recall"], "f1": o["f1"],
            "subject_accuracy": o["subject_accuracy"], "wrong_subject": o["wrong_subject"],
            "date_kept_rate": o["date_is_claim"]["kept_rate"],
            "valid_time_accuracy": o["valid_time"]["accuracy"],
            "sensitivity_accuracy": o["sensitivity_accuracy"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=str(DEFAULT_DATASET))
    ap.add_argument("--out", help="write the result JSON here")
    ap.add_argument("--extractor", choices=("rules", "llm", "all"), default="all",
                    help="all: rules, and llm when a provider is configured")
    ap.add_argument("--locomo", default=str(DEFAULT_LOCOMO),
                    help="LoCoMo JSON holding the gold set's LoCoMo turns")
    ap.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    ap.add_argument("--limit", type=int, default=None, help="first N turns (debugging)")
    ap.add_argument("--sample-pairs", type=int, default=30,
                    help="pairs nearest the threshold to print for a hand check")
    ap.add_argument("--verbose", action="store_true", help="print every error")
    args = ap.parse_args(argv)
    _setup()
    from django.conf import settings

    data, note = load_gold(args.dataset, args.locomo, args.limit)
    out: dict[str, Any] = {"benchmark": "extraction", "dataset": args.dataset,
                           "threshold": args.threshold, "gold": gold_counts(data), **note,
                           "embedder": getattr(settings, "MEMHOUSE_EMBEDDER", None),
                           "extractors": {}}
    names = ["rules", "llm"] if args.extractor == "all" else [args.extractor]
    for name in names:
        try:
            result = evaluate(name, data, args.threshold, args.sample_pairs)
        except LookupError as exc:
            out["extractors"][name] = {"skipped": str(exc)}
            print(f"{name}: skipped ({exc})")
            continue
        out["extractors"][name] = result
        print(f"{name} ({result['extractor']}):", json.dumps(headline(result)))
        for key in ("by_source", "by_split"):
            for part, figures in result[key].items():
                print(f"  {part:>9}: P {figures['precision']} R {figures['recall']} "
                      f"F1 {figures['f1']} subject {figures['subject_accuracy']} "
                      f"date kept {figures['date_is_claim']['kept_rate']}")
        if args.verbose:
            for pair in result.get("threshold_sample", []):
                print(f"  PAIR {pair['cosine']:.3f} | {pair['gold']} | {pair['pred']}")
            for err in result["errors"]:
                print("  ERR", json.dumps(err, ensure_ascii=False))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
