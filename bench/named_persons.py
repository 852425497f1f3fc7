"""Claims about other people: how often a chat turn about someone else keeps every claim
off the speaker (held for a curator, or provisional for a registered person), and how
often a turn about the speaker stays theirs, with the real rule-based extractor and the
intake's rule (governance.intake.named.settle_subject); no database, no server.

    .venv/bin/python -m bench.named_persons [--dataset bench/fixtures/named_persons.json] \
        [--locomo /work/shared/eval/locomo/locomo_dev.json] [--out bench/results/named_persons.json]

With --locomo it also counts the LoCoMo dev claims whose placement the rule changes (every
speaker of every conversation registered, as bench/common.ingest_locomo registers them).
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import django

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATASET = REPO / "bench" / "fixtures" / "named_persons.json"


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memhouse.settings")
    django.setup()


def settled(text: str, *, speaker: Any, known: dict[str, str], when: datetime
            ) -> list[tuple[str, str | None, str]]:
    """(statement, subject key, named entity) of each claim the intake would propose."""
    from governance.intake.named import settle_subject
    from knowledge.ingest.extraction import ObservedMessage
    from knowledge.ingest.rule_extractor import RuleBasedExtractor

    message = ObservedMessage(message_id="m", text=text, speaker_key=speaker.key,
                              speaker_name=speaker.display_name, occurred_at=when,
                              known_peers=known)
    out = []
    for claim in RuleBasedExtractor().extract(message):
        claim, named = settle_subject(claim, speaker=speaker, names=known,
                                      context=text[:claim.evidence_span[0]])
        out.append((claim.statement, claim.subject_peer_key, named))
    return out


def run_set(texts: dict[str, list[str]], *, speaker: Any, known: dict[str, str]
            ) -> dict[str, Any]:
    when = datetime(2026, 12, 5, 12, tzinfo=UTC)
    other, own = [], []
    for text in texts.get("about_other", []):
        claims = settled(text, speaker=speaker, known=known, when=when)
        off = bool(claims) and all(subject != speaker.key for _, subject, _ in claims)
        other.append({"text": text, "kept_off_speaker": off, "claims": claims})
    for text in texts.get("own", []):
        claims = settled(text, speaker=speaker, known=known, when=when)
        stays = all(subject == speaker.key for _, subject, _ in claims)
        own.append({"text": text, "stays_with_speaker": stays, "claims": claims})
    return {
        "about_other_kept_off_speaker": sum(r["kept_off_speaker"] for r in other),
        "about_other": len(other),
        "own_stays_with_speaker": sum(r["stays_with_speaker"] for r in own),
        "own": len(own),
        "items": other + own,
    }


def locomo_changes(path: str) -> dict[str, Any]:
    from bench.common import load_locomo
    from governance.intake.named import prior_text, settle_subject
    from knowledge.ingest.extraction import ObservedMessage
    from knowledge.ingest.rule_extractor import RuleBasedExtractor
    from knowledge.models import Peer

    convs = load_locomo(path)
    known = {n.lower(): n.lower() for c in convs for n in c.speakers}
    extractor = RuleBasedExtractor()
    total = changed = 0
    examples: list[dict[str, Any]] = []
    for conv in convs:
        recent: list[tuple[str, str]] = []
        for turn in conv.turns:
            speaker = Peer(key=turn.speaker.lower(), display_name=turn.speaker)
            message = ObservedMessage(
                message_id="m", text=turn.text, speaker_key=speaker.key,
                speaker_name=turn.speaker, occurred_at=turn.occurred_at, known_peers=known,
                recent_turns=tuple(recent[-2:]),
                # the other speaker, as intake's conversation_addressee finds them: "you"
                # is written as their name
                addressee_key=next((s.lower() for s in conv.speakers
                                    if s.lower() != speaker.key), None))
            recent.append((speaker.key, turn.text))
            for claim in extractor.extract(message):
                total += 1
                after, named = settle_subject(
                    claim, speaker=speaker, names=known,
                    context=prior_text(message.recent_turns,
                                       turn.text[:claim.evidence_span[0]]))
                if after.subject_peer_key != claim.subject_peer_key:
                    changed += 1
                    examples.append({"statement": claim.statement,
                                     "from": claim.subject_peer_key,
                                     "to": after.subject_peer_key, "named": named})
    return {"claims": total, "placement_changed": changed, "examples": examples}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default=str(DEFAULT_DATASET))
    ap.add_argument("--locomo", default="")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    _setup()
    from knowledge.models import Peer

    data = json.loads(Path(args.dataset).read_text())
    speaker = Peer(key=data["speaker"]["key"], display_name=data["speaker"]["display_name"])
    known = {speaker.key: speaker.key, speaker.display_name.lower(): speaker.key,
             **{name.lower(): key for key, name in data.get("registered", {}).items()}}
    report: dict[str, Any] = {name: run_set(texts, speaker=speaker, known=known)
                              for name, texts in data["sets"].items()}
    if args.locomo:
        report["locomo_dev"] = locomo_changes(args.locomo)
    for name, r in report.items():
        if name == "locomo_dev":
            print(f"locomo_dev: {r['placement_changed']} of {r['claims']} claims change placement")
            continue
        print(f"{name}: about others kept off the speaker {r['about_other_kept_off_speaker']}"
              f"/{r['about_other']}; own kept {r['own_stays_with_speaker']}/{r['own']}")
        for item in r["items"]:
            if not item.get("kept_off_speaker", item.get("stays_with_speaker")):
                print("   miss:", item["text"], [c[0] for c in item["claims"]])
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
