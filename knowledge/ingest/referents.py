"""Referents of "he/she", "it", "there", "this place" and "that name" from the turns just
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

from knowledge.ingest.lexicon import (
    _ADVERBS,
    _FINITE,
    _IRREGULAR_PAST,
    _STOPWORDS,
    _VERB_BASES,
    _is_regular_past,
    _wordset,
)

__all__ = ["ReferentWindow", "Referents", "find_referents", "resolve_referents"]

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


# "it" and the thing it stands for. A thing is offered only by a question another speaker
# asks ("Is it the migration again?" - "Yes, it failed on staging"; "Where's the renderer
# code?" - "Mei wrote most of it"; "The Overstory? What did you think?" - "I loved it"):
# the answer is about what was asked. The nearest turn offering any noun phrase decides,
# and it must be a question with exactly one: a statement ("My laptop broke") or a second
# noun phrase ("did the vendor send the new contract?") leaves "it" as said.
_NOUN_PHRASE = re.compile(
    r"\b(?P<det>the|this|that|these|those|my|your|our|his|her|their)\s+"
    r"(?=(?P<words>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,3}))",
    re.I,
)
_TITLE_QUESTION = re.compile(r"(?:^|(?<=[.!?]\s))(?P<title>(?:The\s+)?[A-Z][\w'-]*"
                             r"(?:\s+[A-Z][\w'-]*){0,3})\?")
_QUOTED = re.compile(r'"(?P<title>[A-Z][^"]{0,60}?)"')
# not a thing "it" can be: times, and nouns too vague to stand for anything
_NOT_THING = _wordset(
    """day days week weeks weekend month months year years morning afternoon evening night
    time times moment way ways thing things stuff lot bit end beginning start rest first
    last next same other whole idea point reason one ones kind sort"""
)
_NP_STOP = _STOPWORDS | _ADVERBS | _FINITE | _wordset(
    """while because if when until since before after like than again anyway today tonight
    tomorrow yesterday lately recently please"""
)
# "it" that stands for nothing ("it's great", "it seems", "make it", "got it") or for a
# clause ("it pushed me to..."): only an object after these verbs or a preposition, or a
# subject before a verb of doing, is replaced
_DUMMY_SUBJECT_VERB = _wordset(
    """seems seemed looks looked feels felt sounds sounded takes took makes made means meant
    gets got goes went depends depended turns turned happens happened helps helped reminds
    reminded worked works was is 's has had will would can could might must should may
    doesn't didn't isn't wasn't won't wouldn't can't couldn't"""
)
_IDIOM_OBJECT_VERB = _wordset(
    """make made makes making get got gets getting take took takes taking go for is was do did
    done doing say said call called mean meant let hate love like enjoy enjoyed"""
)
_IT_WORD = re.compile(r"(?<![\w'\u2019-])it(?![\w'\u2019-])", re.I)


def _noun_phrases(sentence: str) -> list[str | None]:
    """Noun phrases of ``sentence`` as "the <words>" (None: one that is not a thing or
    cannot be said from another speaker's mouth, such as "your dog")."""
    found: list[str | None] = []
    for match in _QUOTED.finditer(sentence):
        found.append(match.group("title"))
    for match in _TITLE_QUESTION.finditer(sentence):
        found.append(match.group("title"))
    for match in _NOUN_PHRASE.finditer(sentence):
        words: list[str] = []
        for word in match.group("words").split():
            low = word.lower()
            if low in _NP_STOP or (words and (low in _VERB_BASES or low in _IRREGULAR_PAST
                                              or _is_regular_past(low))):
                break
            words.append(word)
        if not words:
            continue
        det = match.group("det").lower()
        head = words[-1].lower()
        if head in _NOT_THING:
            continue
        # "that"/"this" may be no determiner at all ("is that recent?", "a moment that
        # stands out"), and "your dog" is not how the speaker would say it: such a phrase
        # counts as a candidate but is never taken
        if det != "the" or _PERSON_NOUN.search(" ".join(words)):
            found.append(None)
        else:
            found.append("the " + " ".join(words))
    return found


def _thing_of(unit: str) -> tuple[bool, str | None]:
    """(whether ``unit`` offers any noun phrase, the one thing its question asks about)."""
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", unit) if s.strip()]
    asked: list[str | None] = []
    stated = False
    for sentence in sentences:
        phrases = _noun_phrases(sentence)
        if sentence.endswith("?"):
            asked.extend(phrases)
        elif phrases:
            stated = True
    if not asked and not stated:
        return False, None
    if stated or len(set(asked)) != 1 or asked[0] is None:
        return True, None
    return True, asked[0]


@dataclass(frozen=True)
class Referents:
    person: tuple[str, str] | None = None  # (peer key, name as the turn wrote it)
    place: str | None = None
    # "this place" is where the speaker is: only a place the speaker named ("here" is left
    # alone: "he's not here anymore" is often no place at all)
    own_place: bool = False
    name: str | None = None
    thing: str | None = None  # what "it" stands for (see _thing_of)


def find_referents(units: Sequence[tuple[str, str]],
                   peers: Callable[[str], list[tuple[str, str]]],
                   speaker: str, exclude: frozenset[str]) -> Referents:
    """Referents offered by ``units`` ((speaker key, text), oldest first), nearest unit
    first per kind.

    ``peers(text)`` lists the known peers the text names as (key, surface form); keys in
    ``exclude`` (the speaker, the addressee) are not third parties."""
    window = ReferentWindow(peers, speaker, exclude)
    for unit_speaker, unit in units:
        window.add(unit_speaker, unit)
    return window.referents()


class ReferentWindow:
    """``find_referents`` kept up to date unit by unit: what each unit offers is read once
    when it is added, and the nearest offer per kind is remembered. The extractor adds
    every sentence of a message in turn, so asking again after each sentence costs the
    new sentence only (searching all earlier units again made a long message quadratic)."""

    def __init__(self, peers: Callable[[str], list[tuple[str, str]]], speaker: str,
                 exclude: frozenset[str]) -> None:
        self._peers = peers
        self._speaker = speaker
        self._exclude = exclude
        self._person: tuple[str, str] | None = None
        self._place: str | None = None
        self._own_place = False
        self._name: str | None = None
        self._thing: str | None = None

    def referents(self) -> Referents:
        return Referents(self._person, self._place, self._own_place, self._name, self._thing)

    def add(self, unit_speaker: str, unit: str) -> None:
        """Take ``unit`` as the nearest one: each kind it offers replaces the earlier."""
        surfaces = self._peers(unit)
        named = [(k, s) for k, s in surfaces if k not in self._exclude]
        others = _PERSON_NOUN.search(unit) or _NAMED.search(unit)
        if named or others:
            self._person = (named[0] if not others and len({k for k, _ in named}) == 1
                            else None)
        peer_words = {w.lower() for _, s in surfaces for w in s.split()}
        places = {m.group("place") for m in _PLACE.finditer(unit)
                  if m.group("place").split()[0].lower() not in _NOT_PLACE
                  and not {w.lower() for w in m.group("place").split()} & peer_words}
        if places:
            self._place = places.pop() if len(places) == 1 else None
            self._own_place = unit_speaker == self._speaker
        names = {m.group("name") for m in _NAMED.finditer(unit)}
        lone = _LONE_NAME.fullmatch(unit)
        if lone and lone.group("name").lower() not in _NOT_PLACE:
            names.add(lone.group("name"))
        if names:
            self._name = names.pop() if len(names) == 1 else None
        offers, thing = _thing_of(unit)
        if offers:  # the speaker's own words ask nothing of the listener
            self._thing = thing if unit_speaker != self._speaker else None


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
    if refs.thing is not None:
        clause = _resolve_it(clause, refs.thing)
    return clause


def _resolve_it(clause: str, thing: str) -> str:
    """``clause`` with its first "it" replaced by ``thing`` when that "it" is an object
    ("found it", "on it") or the subject of a verb of doing ("it failed"); unchanged when
    it stands for nothing ("it's great", "make it", "it seems")."""
    for match in _IT_WORD.finditer(clause):
        before = clause[:match.start()].split()
        after = clause[match.end():].split()
        prev = before[-1].lower().strip(",") if before else ""
        nxt = after[0].lower().strip(",.!?") if after else ""
        if prev in ("", "and", "but", "so", "because", "yes", "yeah") or (
                bool(before) and before[-1].endswith(",")):
            # subject: a verb of doing follows ("it failed", "it expires"), not "it's"
            if not nxt or nxt in _DUMMY_SUBJECT_VERB or nxt in _ADVERBS or not (
                    nxt.endswith("s") or nxt.endswith("ed") or nxt in _IRREGULAR_PAST):
                return clause
            word = thing[0].upper() + thing[1:] if not before else thing
        else:
            if prev in _IDIOM_OBJECT_VERB or nxt in ("that", "up", "out", "off", "over",
                                                     "easy", "all"):
                return clause
            word = thing
        return clause[:match.start()] + word + clause[match.end():]
    return clause
