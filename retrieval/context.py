"""get_context: a budgeted, reasoning-free context payload an agent pastes into its prompt.

A read at scope S for a reader needs, for S and each of its ancestors (the scopes a
search at S selects): the scope card of the reader's audience, the reader's own peer
profile (peer readers only) and, when a session is named, that session's summary. Those
projections are loaded; any that is missing, dirty or stale is created or dirtied and
rebuilt in the background after commit (`projection_cache_hit` false, `fast_fallback`
true), and the clean ones fill their sections.

* **Knowledge head.** With a query, the scope's search profile (balanced unless the scope
  sets `retrieval_profile`) ranks it, as deep as the budget can use (`_head_limit`): what
  the agent reads is what search ranks best, whatever the projections hold. Without a
  query, the projections' statements by confidence and recency; on a miss the `fast`
  profile's salience-recency fills it live (`blank_fallback`).
* **Lines.** Every line is dated (`retrieval.evidence.when_label`); a ranked statement
  whose source turn holds enough detail it lost gets that turn's excerpt under it, dated
  and with its speaker, when the reader may see the whole turn (`evidence.source_turns`).
* **Budget.** Sections are filled in priority order - knowledge head, entity cards of the
  names the query gives (retrieval.entity_cards), session summary, peer profile, scope
  cards nearest first; with a query, a projection's lines earn their place only by sharing
  its terms. Every statement appears once, a line the text already says is left out, and
  `left_out` says what did not make it. The rendered `context` never exceeds
  `budget_chars`; the structured sections hold exactly what the text holds.

No generation model is called on this path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from knowledge.models import Peer, Scope, Session
from knowledge.selectors import scope_ancestors
from memhouse.core.principal import Reader
from retrieval import conflicts, engine, entity_cards, evidence
from retrieval.lexical import analyze, normalize_term
from retrieval.profiles import resolve_profile
from retrieval.projections import Audience, Key, Kind, load

DEFAULT_BUDGET = 4000
MIN_BUDGET = 200
MAX_BUDGET = 50_000
HEAD_LIMIT = 12
QUERY_PROFILE = "balanced"
_WORD = re.compile(r"[\w']+")


@dataclass
class _Section:
    name: str
    title: str
    entries: list[dict[str, Any]]


def _words(text: str) -> set[str]:
    return {normalize_term(w) for w in _WORD.findall(text.lower())}


def _terms(query: str) -> set[str]:
    out: set[str] = set()
    for term in analyze(query).terms:
        out |= _words(term)
    return out


def _salience_key(e: dict[str, Any]) -> tuple[float, str, str]:
    # Higher confidence first, then newer, then id (inserted_at is ISO-8601, so the
    # string order is the time order; negate it by sorting the whole key descending).
    return (float(e.get("confidence") or 0), str(e.get("inserted_at") or ""), e["id"])


def _head_from_projections(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A blank read's head: the projected statements by confidence and recency."""
    unique = list({e["id"]: e for e in entries}.values())
    return sorted(unique, key=_salience_key, reverse=True)[:HEAD_LIMIT]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _entry_from_candidate(c: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": c["id"], "statement": c["statement"], "kind": c["kind"], "level": c["level"],
        "sensitivity": c["sensitivity"], "state": c["state"], "confidence": c["confidence"],
        "subject_peer_key": c["subject_peer_key"], "scope": c["scope"],
        "relevant_from": _iso(c["relevant_from"]), "relevant_until": _iso(c["relevant_until"]),
        "inserted_at": _iso(c["inserted_at"]), "when": c["when"],
        conflicts.FIELD: c.get(conflicts.FIELD),
    }


@dataclass
class _Placed:
    text: str = ""
    words: set[str] = field(default_factory=set)
    messages: set[Any] = field(default_factory=set)
    omitted: int = 0
    duplicates: int = 0
    excerpts: int = 0
    excerpts_left_out: int = 0


def _date_of(when: str) -> str:
    """The date part of a when label ("said 8 May 2023" -> "8 May 2023")."""
    return when.removeprefix("said ").removeprefix("recorded ")


def _line(e: dict[str, Any]) -> str:
    when = e.get("when")
    text = e["statement"] + conflicts.suffix(e.get(conflicts.FIELD))
    return f"- [{when}] {text}\n" if when else f"- {text}\n"


def _fit(sections: list[_Section], budget: int, turns: dict[str, evidence.Turn],
         query: str) -> tuple[_Placed, dict[str, list[dict[str, Any]]]]:
    """Greedy, priority-ordered packing of lines into the character budget.

    A statement already said by what is placed (its content words and its date are in the
    text: a repeat, or a turn excerpt that holds it) is left out as a duplicate. A ranked
    statement whose source turn holds enough detail it lost (CONTEXT_MIN_LOST_WORDS) gets
    the turn's excerpt under it when both fit, once per message; else it goes alone."""
    placed = _Placed()
    ids: set[str] = set()
    kept: dict[str, list[dict[str, Any]]] = {}
    for section in sections:
        header = f"## {section.title}\n"
        kept[section.name] = []
        for e in section.entries:
            if e["id"] in ids:
                continue
            words = evidence.stems(e["statement"])
            if words and words <= placed.words and (
                    not e.get("when") or _date_of(e["when"]) in placed.text):
                placed.duplicates += 1
                continue
            line = _line(e)
            cost = len(line) + (0 if kept[section.name] else len(header))
            if len(placed.text) + cost > budget:
                placed.omitted += 1
                continue
            source = None
            turn = turns.get(e["id"])
            cut = (evidence.quote_for(e["statement"], turn, query=query,
                                      min_words=evidence.CONTEXT_MIN_LOST_WORDS)
                   if turn is not None and turn.message_id not in placed.messages else None)
            if turn is not None and cut is not None:
                quoted = f"  > {evidence.turn_line(turn, cut)}\n"
                if len(placed.text) + cost + len(quoted) <= budget:
                    line += quoted
                    source = {"message_id": str(turn.message_id), "speaker": turn.speaker,
                              "said_at": turn.said_at.isoformat(), "excerpt": cut}
                    placed.messages.add(turn.message_id)
                    placed.excerpts += 1
                    words |= evidence.stems(cut)
                else:
                    placed.excerpts_left_out += 1
            if not kept[section.name]:
                placed.text += header
            placed.text += line
            placed.words |= words
            kept[section.name].append({**e, "source": source} if source else e)
            ids.add(e["id"])
    return placed, kept


def _head_limit(budget: int) -> int:
    """How many ranked statements a budget can use (about 100 characters a line)."""
    return max(HEAD_LIMIT, min(engine.MAX_LIMIT, budget // 100))


def _relevant(entries: list[dict[str, Any]], terms: set[str]) -> list[dict[str, Any]]:
    """With a query, a projection's entries earn their place only by sharing its terms."""
    if not terms:
        return entries
    return [e for e in entries if terms & _words(e["statement"])]


def _dated(entries: list[dict[str, Any]], said: dict[str, datetime]) -> list[dict[str, Any]]:
    """Projection entries with their `when` (search candidates come with it)."""
    return [e if "when" in e else
            {**e, "when": evidence.when_label(_dt(e.get("relevant_from")),
                                              _dt(e.get("relevant_until")),
                                              said.get(e["id"]), _dt(e.get("inserted_at")))}
            for e in entries]


def _dt(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def get_context(*, reader: Reader, scope: Scope, session: Session | None = None,
                query: str = "", budget_chars: int = DEFAULT_BUDGET) -> dict[str, Any]:
    chain = sorted(scope_ancestors(scope).values_list("id", "path"),
                   key=lambda row: len(row[1]), reverse=True)  # nearest first
    scope_ids = [sid for sid, _ in chain]
    audience = Audience.PUBLIC if reader.posture == "public_only" else Audience.SHARED
    cards = [Key(Kind.SCOPE_CARD, audience, sid) for sid, _ in chain]
    profiles = ([Key(Kind.PEER_PROFILE, Audience.SUBJECT, sid, peer_id=reader.peer_id)
                 for sid, _ in chain] if reader.peer_id is not None else [])
    summaries = ([Key(Kind.SESSION_SUMMARY, audience, sid, session_id=session.id)
                  for sid, _ in chain] if session is not None else [])
    loaded = load(reader.account_id, [*cards, *profiles, *summaries])
    hit = loaded.complete

    def entries_of(keys: list[Key]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for k in keys:
            out += (loaded.payloads.get(k) or {}).get("entries", [])
        return out

    retrieval: dict[str, Any] | None = None
    if query.strip():
        # The question ranks the knowledge head with the scope's own search profile, deep
        # enough to fill the budget: what the agent pastes is what search found best.
        profile = resolve_profile(requested=None, scope=scope, default=QUERY_PROFILE)
        result = engine.search(reader=reader, scope=scope, query=query, profile=profile,
                               limit=_head_limit(budget_chars))
        head = [_entry_from_candidate(c) for c in result.candidates]
        retrieval = {k: v for k, v in result.as_dict().items() if k != "candidates"}
    elif hit:
        head = _head_from_projections(
            entries_of(summaries) + entries_of(profiles) + entries_of(cards))
    else:
        profile = resolve_profile(requested="fast", scope=scope, default="fast")
        result = engine.search(reader=reader, scope=scope, query=query, profile=profile,
                               limit=HEAD_LIMIT, blank_fallback=True)
        head = [_entry_from_candidate(c) for c in result.candidates]
        retrieval = {k: v for k, v in result.as_dict().items() if k != "candidates"}
    terms = _terms(query) if query.strip() else set()
    # Entity cards of the names the query gives, right after the head (entity_cards).
    named = entity_cards.cards_for_query(reader=reader, chain=chain, query=query)
    sections = [_Section("knowledge", "Knowledge", head)]
    sections += [_Section(f"entity_card:{i}", f"{c.name} ({c.kind}) in {c.scope}", c.entries)
                 for i, c in enumerate(named)]
    if session is not None:
        sections.append(_Section("session_summary", "Session summary",
                                 _relevant(entries_of(summaries), terms)))
    if profiles:
        sections.append(_Section("peer_profile", "Peer profile",
                                 _relevant(entries_of(profiles), terms)))
    path_of = dict(chain)
    for k in cards:
        sections.append(_Section(f"scope_card:{k.scope_id}", f"Scope {path_of[k.scope_id]}",
                                 _relevant(entries_of([k]), terms)))
    # The lines search did not rank carry their marks too (one query, conflicts).
    ranked = {c["id"] for c in head} if retrieval is not None else set()
    marks = conflicts.outdated_by(reader=reader, scope_ids=scope_ids, ids={
        e["id"] for sec in sections for e in sec.entries if e["id"] not in ranked})
    for sec in sections:
        sec.entries = (sec.entries if sec.name == "knowledge" and retrieval is not None
                       else conflicts.mark([dict(e) for e in sec.entries], marks))
    said = evidence.said_at_of(e["id"] for sec in sections for e in sec.entries
                               if "when" not in e)
    for sec in sections:
        sec.entries = _dated(sec.entries, said)
    # Excerpts only under statements the query ranked: a card line has no question to
    # have lost an answer to.
    turns = (evidence.source_turns(reader, scope_ids, [e["id"] for e in head])
             if query.strip() else {})
    placed, kept = _fit(sections, budget_chars, turns, query)
    text = placed.text
    peer_key = (Peer.objects.filter(pk=reader.peer_id).values_list("key", flat=True).first()
                if reader.peer_id is not None else None)
    return {
        "scope": scope.path,
        "reader_posture": reader.posture,
        "budget_chars": budget_chars,
        "used_chars": len(text),
        "truncated": placed.omitted > 0,
        "omitted_statements": placed.omitted,
        "left_out": {"over_budget": placed.omitted, "duplicates": placed.duplicates,
                     "excerpts_over_budget": placed.excerpts_left_out,
                     "sections_empty": [sec.name for sec in sections
                                        if sec.entries and not kept[sec.name]]},
        "excerpts": placed.excerpts,
        "context": text,
        "knowledge": kept["knowledge"],
        "session_summary": ({"session": session.external_id, "available":
                             all(k in loaded.payloads for k in summaries),
                             "entries": kept["session_summary"]}
                            if session is not None else None),
        "peer_profile": ({"peer_key": peer_key,
                          "available": all(k in loaded.payloads for k in profiles),
                          "entries": kept["peer_profile"]} if profiles else None),
        "scope_cards": [{"scope": path_of[k.scope_id], "available": k in loaded.payloads,
                         "entries": kept[f"scope_card:{k.scope_id}"]} for k in cards],
        "entity_cards": [{"scope": c.scope, "name": c.name, "kind": c.kind,
                          "entries": kept[f"entity_card:{i}"]}
                         for i, c in enumerate(named) if kept[f"entity_card:{i}"]],
        "projection_cache_hit": hit,
        "fast_fallback": not hit,
        "projections": {
            "required": len(cards) + len(profiles) + len(summaries),
            "reused": len(loaded.payloads), "missing": len(loaded.missing),
            "dirty": len(loaded.dirty), "stale": len(loaded.stale),
            "local_cache_hits": loaded.local_hits, "loaded_from_database": loaded.loaded,
        },
        "retrieval": retrieval,
    }
