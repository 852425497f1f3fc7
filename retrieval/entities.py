"""The entity mention index: names found in governed statements, per scope.

Entities are internal. The rows are a rebuildable, pipeline-internal cache: nothing in
this module returns an entity id, canonical name or alias to a caller outside retrieval.
The public functions return counts; the strategies in ``retrieval.strategies`` join
through the index and return knowledge ids only.

Extraction is deterministic and regex-only (:func:`extract_mentions`): capitalised name
sequences, minus closed-class words, sentence artefacts, month and weekday names and
timezone abbreviations, all listed below as explicit frozensets.

Merging. Exact aliases merge directly: one normalised key in one scope is one Entity, and
a peer's aliases (``Peer.aliases``) map to the key of the peer's display name, so "Mel"
and "Melanie" are one entity when Mel is an alias of peer Melanie. A non-exact merge
("Dana", "Dana R." and "our copy lead", or two keys whose contexts are close) is an
EntityLink between two rows of one scope, written by retrieval.entity_resolution only
after a model confirmed it; this module never merges beyond exact aliases. Role
descriptions ("our copy lead", :func:`extract_descriptions`) are mentions too, so a model
can link them to a name.

Writes have the read -> compute -> write shape of the ingest pipeline: one short
transaction reads the statements, the computation runs with no transaction open, and one
transaction replaces the old rows with the new ones, so a failed write leaves the previous
index intact.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, OuterRef, Subquery

from knowledge import lifecycle
from knowledge.models import Knowledge, Peer
from memhouse.core.tenancy import account_context
from retrieval.models import Entity, EntityMention

__all__ = [
    "EXCLUDED_STATES",
    "Mention",
    "extract_all_mentions",
    "extract_descriptions",
    "extract_mentions",
    "index_knowledge",
    "mention_key",
    "rebuild_entities",
]

# Statements in these states are not indexed (and lose their mentions on re-index). Every
# other state is indexed; reader visibility is applied at read time, inside each query.
EXCLUDED_STATES: frozenset[str] = frozenset(
    {lifecycle.REJECTED, lifecycle.REDACTED, lifecycle.RETRACTED})

# ---------------------------------------------------------------------------------------
# Stop lists. Every entry is compared with the lower-cased token. Changing a list changes
# the index: run `manage.py rebuild_entities` afterwards.
# ---------------------------------------------------------------------------------------

# Closed-class words: never (part of) a name, wherever they stand and however they are
# capitalised ("I", "The", "OK", "WOW").
PRONOUNS: frozenset[str] = frozenset({
    "i", "me", "my", "mine", "myself", "you", "your", "yours", "yourself", "yourselves",
    "he", "him", "his", "himself", "she", "her", "hers", "herself", "it", "its", "itself",
    "we", "us", "our", "ours", "ourselves", "they", "them", "their", "theirs", "themselves",
    "who", "whom", "whose", "which", "what", "whatever", "whoever", "whichever",
    "this", "that", "these", "those", "someone", "somebody", "something", "anyone",
    "anybody", "anything", "everyone", "everybody", "everything", "nobody", "nothing",
    "none", "one", "oneself", "each", "either", "neither", "both", "all", "another",
    "other", "others", "such", "y'all", "ya", "u",
})
DETERMINERS: frozenset[str] = frozenset({
    "a", "an", "the", "some", "any", "no", "every", "much", "many", "few", "several",
    "more", "most", "less", "least", "enough", "own", "same", "certain", "various",
})
PREPOSITIONS: frozenset[str] = frozenset({
    "about", "above", "across", "after", "against", "along", "amid", "among", "around",
    "as", "at", "before", "behind", "below", "beneath", "beside", "besides", "between",
    "beyond", "by", "despite", "down", "during", "except", "for", "from", "in", "inside",
    "into", "like", "near", "of", "off", "on", "onto", "out", "outside", "over", "past",
    "per", "since", "through", "throughout", "till", "to", "toward", "towards", "under",
    "underneath", "unlike", "until", "up", "upon", "via", "with", "within", "without",
})
CONJUNCTIONS: frozenset[str] = frozenset({
    "and", "but", "or", "nor", "so", "yet", "because", "although", "though", "while",
    "whereas", "if", "unless", "whether", "once", "than", "when", "whenever", "where",
    "wherever", "why", "how", "however", "therefore", "then", "also", "plus",
})
AUXILIARIES: frozenset[str] = frozenset({
    "am", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did", "done",
    "have", "has", "had", "having", "will", "would", "shall", "should", "can", "could",
    "may", "might", "must", "ought", "cannot", "gonna", "wanna", "gotta",
})
INTERJECTIONS: frozenset[str] = frozenset({
    "oh", "ah", "aha", "wow", "hey", "hi", "hello", "hiya", "yo", "yeah", "yes", "yep",
    "yup", "nope", "nah", "ok", "okay", "oops", "ugh", "hmm", "huh", "haha", "hahaha",
    "lol", "omg", "whoa", "yay", "alas", "bye", "goodbye", "cheers", "thanks", "thank",
    "thx", "please", "sorry", "congrats", "congratulations", "welcome", "aw", "aww", "oof",
    "gosh", "phew", "ouch", "um", "uh", "er", "hooray", "bravo", "woohoo", "xoxo",
})
CLOSED_CLASS: frozenset[str] = (
    PRONOUNS | DETERMINERS | PREPOSITIONS | CONJUNCTIONS | AUXILIARIES | INTERJECTIONS)

# Sentence artefacts: common words that are capitalised only because they open a sentence
# ("Yesterday we...", "Great, see you"). Rejected in sentence-initial position; the same
# word capitalised mid-sentence ("the Great Lakes") is kept.
SENTENCE_ARTEFACTS: frozenset[str] = frozenset({
    # time adverbs and relative dates
    "today", "tonight", "tomorrow", "yesterday", "now", "later", "soon", "recently",
    "lately", "earlier", "currently", "nowadays", "morning", "afternoon", "evening",
    "night", "weekend", "week", "month", "year", "last", "next", "ago",
    # discourse markers and sentence adverbs
    "actually", "anyway", "anyways", "apparently", "basically", "btw", "certainly",
    "clearly", "definitely", "especially", "eventually", "finally", "first", "firstly",
    "second", "secondly", "third", "lastly", "honestly", "hopefully", "indeed", "instead",
    "just", "literally", "luckily", "maybe", "meanwhile", "moreover", "naturally",
    "obviously", "otherwise", "perhaps", "personally", "probably", "really", "seriously",
    "similarly", "sometimes", "still", "surely", "thankfully", "thus", "totally",
    "unfortunately", "fortunately", "usually", "well", "absolutely", "always", "never",
    "often", "not", "only", "even", "almost", "again", "here", "there", "exactly", "right",
    "true", "fine", "sure", "alright", "agreed", "speaking", "overall", "together",
    # evaluative openers
    "great", "good", "nice", "cool", "awesome", "amazing", "glad", "happy", "love",
    "loved", "lovely", "beautiful", "wonderful", "fantastic", "excellent", "perfect",
    "interesting", "funny", "sad", "best", "dear", "regards", "wishing", "hope", "hoping",
    # imperative and verb openers
    "let", "let's", "remember", "check", "see", "look", "looks", "make", "take", "try",
    "keep", "tell", "give", "get", "got", "going", "went", "feeling", "thinking", "think",
    "know", "need", "want", "wish", "guess", "sounds", "seems", "seem", "said", "says",
    "note", "please", "mind", "imagine", "wait", "come", "go", "enjoy", "happened",
    # number words
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "hundred", "thousand", "million", "half", "once", "twice",
})

# Month and weekday names (and their usual abbreviations): dates, never entities. "May"
# and "Jan" are also given names; in conversational memory they are far more often dates.
MONTHS: frozenset[str] = frozenset({
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec",
})
WEEKDAYS: frozenset[str] = frozenset({
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "mon",
    "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun", "weekday",
})
# Clock markers ("10 AM", "9 p.m.").
TIME_MARKERS: frozenset[str] = frozenset({"am", "pm", "a.m", "p.m", "noon", "midnight"})

# Timezone abbreviations, rejected when written in capitals ("10:00 UTC", "9 PST").
TIMEZONES: frozenset[str] = frozenset({
    "utc", "gmt", "z", "pst", "pdt", "pt", "est", "edt", "et", "cst", "cdt", "ct", "mst",
    "mdt", "mt", "akst", "akdt", "hst", "cet", "cest", "eet", "eest", "wet", "west", "bst",
    "ist", "jst", "kst", "hkt", "sgt", "aest", "aedt", "acst", "acdt", "awst", "nzst",
    "nzdt", "msk", "sast", "wat", "eat", "brt", "art", "idt", "pht", "wib",
})

# Lower-case particles that may join two capitalised words of one name ("Bank of
# America", "Ludwig van Beethoven").
NAME_PARTICLES: frozenset[str] = frozenset({"of", "de", "van", "von", "der", "del", "da"})
# Titles that end in a period without ending the sentence ("Dr. Smith").
TITLES: frozenset[str] = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "sr", "jr", "mt"})

# Kind hints (model-free, from the wording itself).
ORGANISATION_WORDS: frozenset[str] = frozenset({
    "inc", "ltd", "llc", "plc", "corp", "corporation", "company", "co", "group",
    "university", "college", "school", "institute", "bank", "foundation", "association",
    "society", "club", "agency", "council", "ministry", "department", "labs", "studio",
    "studios", "church", "hospital", "committee", "union", "party", "press", "records",
})
PLACE_WORDS: frozenset[str] = frozenset({
    "city", "town", "village", "street", "road", "avenue", "park", "lake", "river",
    "mountain", "mountains", "beach", "island", "islands", "county", "valley", "bay", "sea",
    "ocean", "forest", "canyon", "falls", "square", "bridge", "hill", "hills", "coast",
})
PLACE_PREFIXES: frozenset[str] = frozenset({
    "new", "north", "south", "east", "west", "san", "santa", "los", "las", "saint", "st",
    "lake", "mount", "mt", "fort", "port", "cape",
})
PLACE_PREPOSITIONS: frozenset[str] = frozenset({"in", "from", "near", "visiting", "visited"})
THING_DETERMINERS: frozenset[str] = frozenset({"my", "your", "his", "her", "our", "their"})

# Role descriptions ("our copy lead", "the head of design" is not one: a role noun must end
# the phrase). Only after "our" or "the": a team-level referent in a shared scope, where
# "my sister" or "her boss" would change referent with the speaker. The description is
# indexed without its determiner, so "our copy lead" and "the copy lead" are one key; it
# never merges with a name on its own: a model must confirm that (entity_resolution).
DESCRIPTION_DETERMINERS: frozenset[str] = frozenset({"our", "the"})
ROLE_NOUNS: frozenset[str] = frozenset({
    "lead", "manager", "boss", "director", "head", "founder", "cofounder", "co-founder",
    "owner", "ceo", "cto", "cfo", "coo", "cmo", "vp", "president", "chair", "chairperson",
    "designer", "editor", "writer", "copywriter", "engineer", "developer", "analyst",
    "strategist", "coordinator", "producer", "recruiter", "accountant", "lawyer",
    "consultant", "contractor", "architect", "photographer", "planner", "officer",
    "administrator", "assistant", "secretary", "treasurer", "mentor", "coach", "advisor",
    "adviser", "intern", "landlord", "supervisor", "organizer", "organiser", "host",
    "doctor", "therapist", "dentist", "teacher", "tutor", "instructor", "principal",
})
_DESCRIPTION = re.compile(
    r"\b(?P<det>our|the)\s+(?P<phrase>(?:[a-z][a-z-]*\s+){0,2}[a-z][a-z-]*)\b",
    re.IGNORECASE)
_WORDS = re.compile(r"[a-z][a-z-]*", re.IGNORECASE)

# ---------------------------------------------------------------------------------------

# A word: starts with a letter or digit; inner hyphens and apostrophes join
# ("Jean-Luc", "O'Brien", "Caroline's"; the possessive is split off below).
# (\u2019 is the typographic apostrophe; \u2018 \u201c \u2013 \u2014 \u2022 open quotes,
# dashes and bullets.)
_TOKEN = re.compile(r"[^\W_](?:[^\W_]|[-'\u2019](?=[^\W_]))*")
_POSSESSIVE = re.compile(r"['\u2019]s$", re.IGNORECASE)
_CONTRACTION = re.compile(r"(?:['\u2019](?:m|re|ve|ll|d)|n['\u2019]t)$", re.IGNORECASE)
_SENTENCE_END = frozenset(".!?\u2026:\n")
_OPENERS = frozenset("\"'\u201c\u2018([{*-\u2022\u2013\u2014")
_MAX_TOKENS = 6
_KEY_LIMIT = 200

# Confidence of a mention by the shape of its evidence.
CONF_MULTIWORD = 0.9
CONF_MIDSENTENCE = 0.8
CONF_ACRONYM = 0.7
CONF_SENTENCE_INITIAL = 0.6
CONF_KNOWN_PEER = 1.0
CONF_DESCRIPTION = 0.5


@dataclass(frozen=True)
class Mention:
    """One name in a text: ``text[start:end] == surface``; ``key`` is its normalised form."""

    surface: str
    key: str
    start: int
    end: int
    confidence: float


def mention_key(surface: str) -> str:
    """The normalised key of a name: NFKC, case-folded, typographic apostrophes unified,
    possessive and periods stripped, whitespace collapsed ("Dana R." -> "dana r")."""
    text = unicodedata.normalize("NFKC", surface).replace("\u2019", "'").strip()
    text = _POSSESSIVE.sub("", text).rstrip("'")
    text = text.replace(".", " ")
    return " ".join(text.casefold().split())[:_KEY_LIMIT]


@dataclass
class _Tok:
    text: str
    start: int
    end: int
    initial: bool  # sentence-initial
    abbrev: bool  # a single capital or a title followed by a period ("R.", "Dr.")


def _is_sentence_initial(text: str, pos: int) -> bool:
    i = pos - 1
    while i >= 0 and (text[i] in " \t" or text[i] in _OPENERS):
        i -= 1
    return i < 0 or text[i] in _SENTENCE_END or text[i] == "\r"


def _is_capitalised(word: str) -> bool:
    return word[0].isupper()


def _rejected(tok: _Tok) -> bool:
    word = tok.text
    low = word.casefold()
    if low in CLOSED_CLASS or low in MONTHS or low in WEEKDAYS or low in TIME_MARKERS:
        return True
    if word.isupper() and len(word) > 1:
        # Capitals: a timezone, or shouting a common word ("LOVE IT").
        return low in TIMEZONES or low in SENTENCE_ARTEFACTS
    if _CONTRACTION.search(word):
        return True  # "I'm", "Don't", "We'll": sentence furniture, never a name
    return tok.initial and low in SENTENCE_ARTEFACTS


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    for m in _TOKEN.finditer(text):
        word, start, end = m.group(0), m.start(), m.end()
        poss = _POSSESSIVE.search(word)
        if poss and len(word) > 2:
            word, end = word[: poss.start()], start + poss.start()
        abbrev = (end < len(text) and text[end] == "."
                  and ((len(word) == 1 and word.isupper()) or word.casefold() in TITLES))
        out.append(_Tok(word, start, end, _is_sentence_initial(text, start), abbrev))
    return out


def _joined(text: str, left: _Tok, right: _Tok) -> bool:
    """True when nothing but a space (or an abbreviation's period) separates two tokens."""
    gap = text[left.end:right.start]
    if left.abbrev and gap.startswith("."):
        gap = gap[1:]
    return gap in (" ", "\u00a0")


def extract_mentions(text: str) -> list[Mention]:
    """Capitalised name sequences in `text`, in order of appearance."""
    toks = _tokens(text)
    mentions: list[Mention] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        if not _is_capitalised(tok.text) or _rejected(tok):
            i += 1
            continue
        seq = [tok]
        j = i + 1
        while j < len(toks) and len(seq) < _MAX_TOKENS:
            nxt = toks[j]
            if not _joined(text, seq[-1], nxt):
                break
            if _is_capitalised(nxt.text) and not _rejected(nxt):
                seq.append(nxt)
                j += 1
                continue
            # "Bank of America": a particle between two capitalised words of one name.
            if (nxt.text in NAME_PARTICLES and j + 1 < len(toks)
                    and _joined(text, nxt, toks[j + 1])
                    and _is_capitalised(toks[j + 1].text) and not _rejected(toks[j + 1])):
                seq.extend([nxt, toks[j + 1]])
                j += 2
                continue
            break
        i = j
        if len(seq) == 1 and len(seq[0].text) == 1:
            continue  # a lone letter ("A", "B.") is not a name
        start = seq[0].start
        end = seq[-1].end + (1 if seq[-1].abbrev and len(seq) > 1 else 0)
        surface = text[start:end]
        key = mention_key(surface)
        if not key:
            continue
        if len(seq) > 1:
            confidence = CONF_MULTIWORD
        elif seq[0].text.isupper():
            confidence = CONF_ACRONYM
        elif seq[0].initial:
            confidence = CONF_SENTENCE_INITIAL
        else:
            confidence = CONF_MIDSENTENCE
        mentions.append(Mention(surface, key, start, end, confidence))
    return mentions


def extract_descriptions(text: str) -> list[Mention]:
    """Role descriptions ("our copy lead") in `text`: after "our" or "the", up to two
    lower-case modifiers and a lower-case role noun. The span excludes the determiner."""
    out: list[Mention] = []
    for m in _DESCRIPTION.finditer(text):
        words = list(_WORDS.finditer(m.group("phrase")))
        # The longest phrase that ends in a role noun and holds only content words ("the
        # lead designer met" -> "lead designer"; "the most senior engineer" -> none).
        end_at = next((i for i in range(len(words) - 1, -1, -1)
                       if words[i].group(0) in ROLE_NOUNS
                       and not any(w.group(0).casefold() in CLOSED_CLASS
                                   or w.group(0).casefold() in SENTENCE_ARTEFACTS
                                   for w in words[:i])), None)
        if end_at is None:
            continue
        start, end = m.start("phrase"), m.start("phrase") + words[end_at].end()
        surface = text[start:end]
        if surface.islower():  # "the Copy Lead" is a name, found by extract_mentions
            out.append(Mention(surface, mention_key(surface), start, end, CONF_DESCRIPTION))
    return out


def extract_all_mentions(text: str) -> list[Mention]:
    """Names and role descriptions, in order of appearance (what the index holds)."""
    return sorted([*extract_mentions(text), *extract_descriptions(text)],
                  key=lambda m: (m.start, m.end))


# --- aliases and kinds -----------------------------------------------------------------


@dataclass(frozen=True)
class AliasMap:
    """Exact alias merges from the Account's peers: key -> canonical key."""

    keys: Mapping[str, str]
    people: frozenset[str]

    def resolve(self, key: str) -> str:
        return self.keys.get(key, key)


def alias_map(rows: Iterable[tuple[str, Any]]) -> AliasMap:
    """Build the map from (display_name, aliases) pairs. A display name always maps to
    itself; an alias maps to its peer's display name unless it is another peer's display
    name or an alias of two peers (ambiguous: then it stays its own key)."""
    displays: set[str] = set()
    claims: dict[str, set[str]] = defaultdict(set)
    for display, aliases in rows:
        d = mention_key(display or "")
        if not d:
            continue
        displays.add(d)
        for alias in aliases if isinstance(aliases, list) else []:
            a = mention_key(alias) if isinstance(alias, str) else ""
            if a and a != d:
                claims[a].add(d)
    keys = {d: d for d in displays}
    for a, targets in claims.items():
        if a not in displays and len(targets) == 1:
            keys[a] = next(iter(targets))
    return AliasMap(keys=keys, people=frozenset(displays))


def peer_alias_map(account_id: uuid.UUID | str) -> AliasMap:
    """The Account's alias map (call inside its account_context)."""
    return alias_map(Peer.objects.filter(account_id=account_id)
                     .values_list("display_name", "aliases"))


def resolve_mentions(mentions: Iterable[Mention], aliases: AliasMap) -> list[Mention]:
    """Mentions with alias keys replaced by their peer's key; a peer name is certain."""
    out = []
    for m in mentions:
        key = aliases.resolve(m.key)
        conf = CONF_KNOWN_PEER if key in aliases.people else m.confidence
        out.append(Mention(m.surface, key, m.start, m.end, conf))
    return out


def _kind_hint(text: str, mention: Mention, aliases: AliasMap) -> str:
    if mention.key in aliases.people:
        return Entity.Kind.PERSON
    words = mention.key.split()
    surface_words = mention.surface.replace(".", " ").split()
    if mention.confidence == CONF_DESCRIPTION and words[-1] in ROLE_NOUNS:
        return Entity.Kind.PERSON  # "our copy lead"
    if words[-1] in ORGANISATION_WORDS:
        return Entity.Kind.ORGANISATION
    if words[-1] in PLACE_WORDS or (len(words) > 1 and words[0] in PLACE_PREFIXES):
        return Entity.Kind.PLACE
    if words[0] in TITLES or (len(surface_words) > 1 and len(surface_words[-1]) == 1):
        return Entity.Kind.PERSON  # "Dr. Smith", "Dana R."
    before = text[:mention.start].split()
    prev = before[-1].casefold() if before else ""
    if prev in PLACE_PREPOSITIONS:
        return Entity.Kind.PLACE
    if prev in THING_DETERMINERS:
        return Entity.Kind.THING
    return Entity.Kind.UNKNOWN


_KIND_ORDER = [Entity.Kind.PERSON, Entity.Kind.ORGANISATION, Entity.Kind.PLACE,
               Entity.Kind.THING]


def _entity_kind(hints: Iterable[str]) -> str:
    """Person if any mention says so; otherwise the most frequent known hint."""
    counts = Counter(h for h in hints if h != Entity.Kind.UNKNOWN)
    if not counts:
        return Entity.Kind.UNKNOWN
    if Entity.Kind.PERSON in counts:
        return Entity.Kind.PERSON
    return max(counts, key=lambda k: (counts[k], -_KIND_ORDER.index(Entity.Kind(k))))


# --- computing an index ----------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    knowledge_id: uuid.UUID
    scope_id: uuid.UUID
    mention: Mention
    kind: str


def _compute(statements: Iterable[tuple[uuid.UUID, uuid.UUID, str]],
             aliases: AliasMap) -> list[_Row]:
    """Pure: statements -> resolved mention rows. One row per (key, statement, start)."""
    rows: list[_Row] = []
    for kid, scope_id, text in statements:
        seen: set[tuple[str, int]] = set()
        for m in resolve_mentions(extract_all_mentions(text), aliases):
            if (m.key, m.start) in seen:
                continue
            seen.add((m.key, m.start))
            rows.append(_Row(kid, scope_id, m, _kind_hint(text, m, aliases)))
    return rows


def _release_connection() -> None:
    # Outside any transaction the connection is idle; the next query reconnects.
    if not connection.in_atomic_block:
        connection.close()


def _lock_index(account_id: uuid.UUID) -> None:
    """Serialise entity-index writes within one Account (transaction-scoped)."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    [f"memhouse.entities:{account_id}"])


def _eligible(qs: Any) -> Any:
    return qs.exclude(state__in=sorted(EXCLUDED_STATES))


def _mention_objects(account_id: uuid.UUID, rows: Sequence[_Row],
                     entity_ids: Mapping[tuple[uuid.UUID, str], uuid.UUID]
                     ) -> list[EntityMention]:
    return [EntityMention(account_id=account_id,
                          entity_id=entity_ids[(r.scope_id, r.mention.key)],
                          knowledge_id=r.knowledge_id, surface=r.mention.surface[:200],
                          start=r.mention.start, end=r.mention.end,
                          confidence=r.mention.confidence) for r in rows]


def _catch_up(account_id: uuid.UUID, rows: list[_Row], read_ids: set[uuid.UUID],
              current: Mapping[uuid.UUID, uuid.UUID], aliases: AliasMap) -> list[_Row]:
    """Inside the write transaction: drop rows of statements that left the indexed states
    since the read, and compute the (few, regex-only) statements that entered them."""
    kept = [r for r in rows if r.knowledge_id in current]
    missing = [kid for kid in current if kid not in read_ids]
    if missing:
        late = Knowledge.objects.filter(account_id=account_id, id__in=missing).values_list(
            "id", "scope_id", "statement")
        kept.extend(_compute(late, aliases))
    return kept


def _as_uuids(ids: Iterable[Any]) -> list[uuid.UUID]:
    return list(dict.fromkeys(uuid.UUID(str(i)) for i in ids))


def rebuild_entities(account_id: uuid.UUID | str,
                     scope_id: uuid.UUID | str | None = None) -> dict[str, int]:
    """Rebuild the index of one scope (or of every scope of the Account).

    Read -> compute -> write: the statements are read in one short transaction, mentions
    are computed with no transaction open, and one final transaction deletes the old
    mentions and entities of those scopes and writes the rebuilt ones. A failure at any
    point leaves the previous index as it was. Returns counts only.
    """
    account_id = uuid.UUID(str(account_id))
    scope = uuid.UUID(str(scope_id)) if scope_id is not None else None

    def statements() -> Any:
        qs = _eligible(Knowledge.objects.filter(account_id=account_id))
        return qs.filter(scope_id=scope) if scope is not None else qs

    # 1. read
    with account_context(account_id):
        read = list(statements().values_list("id", "scope_id", "statement"))
        aliases = peer_alias_map(account_id)
    # 2. compute: no transaction open and, a whole scope being slow work, no connection held
    _release_connection()
    rows = _compute(read, aliases)
    read_ids = {kid for kid, _, _ in read}
    # 3. write: replace the old index of these scopes in one transaction
    with account_context(account_id):
        _lock_index(account_id)
        current = dict(statements().values_list("id", "scope_id"))
        rows = _catch_up(account_id, rows, read_ids, current, aliases)
        old = Entity.objects.filter(account_id=account_id)
        if scope is not None:
            old = old.filter(scope_id=scope)
        EntityMention.objects.filter(account_id=account_id, entity__in=old).delete()
        old.delete()
        grouped: dict[tuple[uuid.UUID, str], list[_Row]] = defaultdict(list)
        for r in rows:
            grouped[(r.scope_id, r.mention.key)].append(r)
        entities = [Entity(account_id=account_id, scope_id=sid, canonical=key,
                           kind=_entity_kind(r.kind for r in group),
                           mention_count=len(group))
                    for (sid, key), group in grouped.items()]
        Entity.objects.bulk_create(entities, batch_size=1000)
        entity_ids = {(e.scope_id, e.canonical): e.id for e in entities}
        EntityMention.objects.bulk_create(_mention_objects(account_id, rows, entity_ids),
                                          batch_size=1000)
    return {"statements": len(current), "entities": len(entities), "mentions": len(rows)}


def index_knowledge(account_id: uuid.UUID | str, knowledge_ids: Sequence[Any]
                    ) -> dict[str, int]:
    """Incrementally (re-)index the given statements. Idempotent.

    Each statement's mentions are replaced by freshly computed ones; a statement in an
    excluded state (rejected, redacted, retracted) keeps none. Entities are created on
    first mention, their counts recomputed, and entities left without mentions removed.
    Returns counts only.
    """
    account_id = uuid.UUID(str(account_id))
    ids = _as_uuids(knowledge_ids)
    if not ids:
        return {"statements": 0, "mentions": 0}
    # 1. read
    with account_context(account_id):
        read = list(_eligible(Knowledge.objects.filter(account_id=account_id, id__in=ids))
                    .values_list("id", "scope_id", "statement"))
        aliases = peer_alias_map(account_id)
    # 2. compute (no transaction open)
    rows = _compute(read, aliases)
    read_ids = {kid for kid, _, _ in read}
    # 3. write
    with account_context(account_id):
        _lock_index(account_id)
        current = dict(_eligible(Knowledge.objects.filter(account_id=account_id, id__in=ids))
                       .values_list("id", "scope_id"))
        rows = _catch_up(account_id, rows, read_ids, current, aliases)
        old = EntityMention.objects.filter(account_id=account_id, knowledge_id__in=ids)
        touched = set(old.values_list("entity_id", flat=True))
        old.delete()
        wanted: dict[tuple[uuid.UUID, str], list[str]] = defaultdict(list)
        for r in rows:
            wanted[(r.scope_id, r.mention.key)].append(r.kind)
        if wanted:
            Entity.objects.bulk_create(
                [Entity(account_id=account_id, scope_id=sid, canonical=key,
                        kind=_entity_kind(kinds)) for (sid, key), kinds in wanted.items()],
                ignore_conflicts=True, batch_size=1000)
        existing = Entity.objects.filter(
            account_id=account_id, scope_id__in={sid for sid, _ in wanted},
            canonical__in={key for _, key in wanted})
        entity_ids: dict[tuple[uuid.UUID, str], uuid.UUID] = {}
        for e in existing:
            if (e.scope_id, e.canonical) not in wanted:
                continue
            entity_ids[(e.scope_id, e.canonical)] = e.id
            kind = _entity_kind(wanted[(e.scope_id, e.canonical)])
            if e.kind == Entity.Kind.UNKNOWN and kind != Entity.Kind.UNKNOWN:
                Entity.objects.filter(pk=e.pk).update(kind=kind)
        EntityMention.objects.bulk_create(_mention_objects(account_id, rows, entity_ids),
                                          batch_size=1000)
        touched |= set(entity_ids.values())
        counts = dict(EntityMention.objects.filter(entity_id__in=touched)
                      .values_list("entity_id").annotate(n=Count("id")))
        # One UPDATE for every touched entity that keeps mentions (not one per entity).
        Entity.objects.filter(pk__in=[e for e in touched if counts.get(e, 0)]).update(
            mention_count=Subquery(EntityMention.objects.filter(entity_id=OuterRef("pk"))
                                   .values("entity_id").annotate(n=Count("id")).values("n")))
        Entity.objects.filter(pk__in=[e for e in touched if not counts.get(e, 0)]).delete()
    return {"statements": len(current), "mentions": len(rows)}
