"""Referents of "he/she", "there", "this place" and "that name" from the turns just
before a clause (model-free; used by the rule extractor).

A chat turn leans on what was said just before it: "Mei got promoted!" - "Well deserved,
she carried the migration"; "I'm moving to Lisbon" - "I lived there for two years";
"Her name is Biscuit" - "Love that name!". The units searched are the conversation's
recent turns (``ObservedMessage.recent_turns``, oldest first) and then the sentences of
the message before the clause; the nearest unit that offers a candidate of a kind
decides for that kind, and only a single candidate is taken. Anything else (two
candidates, a person noun such as "my mom" or "the cat" that could be the referent, a
pronoun that is not the subject) leaves the words as they are, so the claim is kept as
what the speaker said rather than given to the wrong person.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from knowledge.ingest.lexicon import _wordset

__all__ = ["Referents", "find_referents", "resolve_referents"]

# Who or what else "he"/"she" may point at: a relative, a colleague, a pet. A unit naming
# one of these and a peer is ambiguous, so neither is taken.
_PERSON_NOUN = re.compile(
    r"\b(?:husband|wife|spouse|partner|boyfriend|girlfriend|fianc[eé]e?|son|daughter|kid"
    r"|child|baby|mom|mum|mother|dad|father|parent|sister|brother|sibling|aunt|uncle|cousin"
    r"|niece|nephew|grand(?:ma|pa|mother|father|son|daughter)|friend|neighbou?r|boss"
    r"|manager|colleague|coworker|co-worker|teammate|classmate|roommate|teacher|coach|doctor"
    r"|nurse|therapist|landlord|client|customer|guy|girl|boy|woman|man|lady|cat|dog|puppy"
    r"|kitten|pet|horse|bird|rabbit|hamster|turtle|baby)s?\b",
    re.I,
)
_NAMED = re.compile(
    r"\b(?:(?:named|called)(?:\s+(?:the|a|an|my|our|his|her|their|its)\s+[a-z]+)?"
    r"|(?:(?:his|her|its|their|the)\s+)?name\s+is|name's)\s+"
    r"(?P<name>[A-Z][\w'\u2019-]*)"
)
_LONE_NAME = re.compile(r"\s*(?P<name>[A-Z][a-z][\w'\u2019-]*)\s*[.!]*\s*")
# "to" names a place only after a verb of going ("moved to Lisbon"), not "said bye to Max"
_PLACE = re.compile(
    r"(?:\b(?:in|at|from|near|visit(?:ed|ing|s)?|around)|\b(?:go|goes|going|went|move|moves"
    r"|moving|moved|fly|flies|flying|flew|travel(?:l?ed|l?ing|s)?|trip|drive|drove|driving"
    r"|back|head(?:ed|ing|s)?|return(?:ed|ing|s)?|relocat(?:e|ed|ing)|come|came|coming|been"
    r"|gone|get|got|getting|trips|vacation|holiday)\s+to)\s+"
    r"(?P<place>[A-Z][\w'\u2019-]*(?:\s+[A-Z][\w'\u2019-]*){0,2})"
)
_NOT_PLACE = _wordset(
    """i i'm i've i'll i'd monday tuesday wednesday thursday friday saturday sunday january
    february march april may june july august september october november december the a an
    my our your his her their this that it christmas easter"""
)
# "there" as a place, not "there is/was..." (existential) nor "over there"/"here and there"
_THERE = re.compile(
    r"(?<![\w'])(?<!over )(?<!out )(?<!up )(?<!in )(?P<word>here|there)\b"
    r"(?!\s*(?:is|are|was|were|will|would|has|have|had|'s|\u2019s|'re|'ll|and\s+there)\b)",
    re.I,
)
_MOTION_BEFORE = re.compile(
    r"\b(?:go|goes|going|went|gone|come|comes|coming|came|move|moves|moving|moved|get|gets"
    r"|got|getting|fly|flying|flew|travel(?:l?ed|l?ing|s)?|drive|driving|drove|head(?:ed|ing)?"
    r"|back|been|trip|return(?:ed|ing)?)\s+(?:\w+ly\s+)?$",
    re.I,
)
_THIS_PLACE = re.compile(r"\b(?:this|that)\s+(?:place|city|town)\b", re.I)
_THAT_NAME = re.compile(r"\b(?:that|the|this)\s+name\b(?!\s+of\b)", re.I)
_LEADING_PRONOUN = re.compile(
    r"^(?P<pro>he|she)(?P<contraction>'s|\u2019s|'ll|\u2019ll)?(?=\W|$)", re.I)


@dataclass(frozen=True)
class Referents:
    person: tuple[str, str] | None = None  # (peer key, name as the turn wrote it)
    place: str | None = None
    # "this place" is where the speaker is: only a place the speaker named ("here" is left
    # alone: "he's not here anymore" is often no place at all)
    own_place: bool = False
    name: str | None = None


def find_referents(units: Sequence[tuple[str, str]],
                   peers: Callable[[str], list[tuple[str, str]]],
                   speaker: str, exclude: frozenset[str]) -> Referents:
    """Referents offered by ``units`` ((speaker key, text), oldest first), nearest unit
    first per kind.

    ``peers(text)`` lists the known peers the text names as (key, surface form); keys in
    ``exclude`` (the speaker, the addressee) are not third parties."""
    person: tuple[str, str] | None = None
    place: str | None = None
    own_place = False
    name: str | None = None
    person_done = place_done = name_done = False
    for unit_speaker, unit in reversed(units):
        if not person_done:
            named = [(k, s) for k, s in peers(unit) if k not in exclude]
            others = _PERSON_NOUN.search(unit) or _NAMED.search(unit)
            if named or others:
                person_done = True
                if not others and len({k for k, _ in named}) == 1:
                    person = named[0]
        if not place_done:
            peer_words = {w.lower() for _, s in peers(unit) for w in s.split()}
            places = {m.group("place") for m in _PLACE.finditer(unit)
                      if m.group("place").split()[0].lower() not in _NOT_PLACE
                      and not {w.lower() for w in m.group("place").split()} & peer_words}
            if places:
                place_done = True
                place = places.pop() if len(places) == 1 else None
                own_place = unit_speaker == speaker
        if not name_done:
            names = {m.group("name") for m in _NAMED.finditer(unit)}
            lone = _LONE_NAME.fullmatch(unit)
            if lone and lone.group("name").lower() not in _NOT_PLACE:
                names.add(lone.group("name"))
            if names:
                name_done = True
                name = names.pop() if len(names) == 1 else None
        if person_done and place_done and name_done:
            break
    return Referents(person, place, own_place, name)


def resolve_referents(clause: str, refs: Referents) -> str:
    """``clause`` with a subject "he/she", place words and "that name" replaced by their
    referents where ``refs`` has one; unchanged otherwise."""
    if refs.person is not None:
        match = _LEADING_PRONOUN.match(clause)
        if match is not None:
            contraction = (match.group("contraction") or "").replace("\u2019", "'").lower()
            verb = {"'s": " is", "'ll": " will"}.get(contraction, "")
            clause = refs.person[1] + verb + clause[match.end():]
    if refs.place is not None:
        place = refs.place
        if refs.own_place:
            clause = _THIS_PLACE.sub(place, clause, count=1)

        def _place(match: re.Match[str]) -> str:
            if match.group("word").lower() == "here":
                return match.group()  # "he's not here anymore": often no place at all
            before = clause[:match.start()]
            return ("to " if _MOTION_BEFORE.search(before) else "in ") + place

        clause = _THERE.sub(_place, clause, count=1)
    if refs.name is not None:
        clause = _THAT_NAME.sub(f"the name {refs.name}", clause, count=1)
    return clause
