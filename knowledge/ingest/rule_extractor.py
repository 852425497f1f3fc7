"""Model-free claim extraction for casual chat (``rule-based`` / ``rule-v5``; v2 added step 9,
v3 step 10, v4 step 12, v5 step 13).

The extractor is deterministic, uses only ``re`` and ``str``, and handles several thousand
turns per second. Per turn it:

1. **Splits** the text into sentences, and each sentence into atomic clauses at a
   coordinating conjunction (and, but, so, or, yet), a semicolon, a spaced dash or a comma
   splice before a pronoun subject, but only when the left side has a verb and the right
   side starts with its own subject and verb ("I like X and I hate Y" gives two claims, "I
   like tea and cake" and "my family and I went" stay one).
2. **Drops non-claims**: questions (a ``?`` or an auxiliary-first/wh-word opening),
   greetings, thanks and filler ("Hey Mel!", "Thanks!", "lol", "Wow, that's great!"),
   imperatives, conditionals ("If I win..."), clauses about "you" unless the listener is
   named in the sentence (vocative "Mel, you..." or "Thanks, Mel! You...") or known from
   the conversation (step 10), and clauses
   with fewer than two content words besides the subject (one is enough after a copula:
   "I'm vegan"). Evaluative and emotional fluff ("great", "so excited") is not content. A
   clause whose subject is an unresolved pronoun is not dropped but reported (step 9).
3. **Resolves the subject**. First person is the speaker (``self_observation=True``) and is
   rewritten in the third person with the speaker's name: ``I`` -> name, ``my``/``mine`` ->
   "Name's" (or "their" once the name was said, step 14), ``me`` -> name, ``myself`` ->
   "themself" once the name has appeared (else the name), ``I'm`` -> "Name is", ``I've`` ->
   "Name has", ``I'd`` -> "Name would" (or "had" before a participle), ``I'll`` -> "Name
   will", and the verb after the subject is conjugated (am->is, have->has, do->does,
   go->goes, study->studies; past tense and modals unchanged; adverbs such as
   really/just/also/never/always are skipped). An elided subject ("Gonna continue my edu",
   "Just got new shoes", "Love that painting!") is the speaker.
   ``we``/``our``/``us`` are the speaker with lower confidence ("Name and others",
   "Name's"). A clause whose grammatical subject is a known peer (a name or alias in
   ``known_peers``, capitalised in the text) is about that peer. A clause whose subject is
   some other noun phrase but that mentions the speaker ("The group made me feel
   accepted") is about the speaker. Nothing else is extracted: **this extractor never emits
   scope claims** (``subject_peer_key=None``) because without a parser it cannot tell a
   fact about the scope from small talk or from a claim about an unknown third party.
4. **Classifies kind** by durable meaning, in this order: relation predicates (married,
   engaged, dating, divorced, works with) -> preference (like, love, enjoy, hate, prefer,
   favorite, fan of, into, keen on) -> skill (can + skill verb, know how to, good at,
   learned to, skilled, fluent) -> event (a past action: irregular or -ed past, "was
   <verb>ing", present perfect, "had <noun>") ->
   relation nouns (my sister, our kids, have two kids) -> fact. Stative pasts (felt,
   thought, knew, wanted) are facts. A date never changes the kind: a plan is a fact
   ("I'm moving to Lisbon next month" and "I'm moving to Lisbon" alike).
5. **Valid time**. Relative expressions are resolved against ``occurred_at`` in its own time
   zone into half-open windows ``[relevant_from, relevant_until)`` and removed from the
   statement: yesterday, today, tonight (18:00-06:00), this morning (06:00-12:00), this
   afternoon, this evening, last night, tomorrow, last/this/next week (ISO weeks, Monday
   first), weekend (Saturday-Monday of that ISO week), month, year and season
   (meteorological, northern hemisphere), last/this past Monday..Sunday (the latest one
   strictly before the message day), N days/weeks/weekends/months/years ago (that day/ISO
   week/weekend/calendar month/calendar year), "a few" = 2-4 units ago, "in N days/weeks"
   (future), the past week/month/year (trailing window up to the end of the message day),
   over the weekend (Monday-Wednesday: the one just past, else the coming one). A possessive
   date is replaced by "the" ("during last week's game" -> "during the game", with last week
   as valid time); a possessive day follows its noun ("tomorrow's grand opening" -> "the
   grand opening on 20 June 2023"). Vague expressions (recently, lately, the other day, a
   while ago) are removed and give no window. ``since X``/``from X`` keep only the start,
   ``until X``/``by X`` only the end. Absolute dates ("in 2022", "in May", "on 3 May
   2022", "May 3rd", "2022-05-03", "early June") are resolved the same way; a month or
   day without a year is the latest one not after the message, or the next one not
   before it when the clause speaks about the future.

   **Frame or claim rule**: a date is *part of the claim* when it directly follows a
   copula ("is/was/'s [on|in] DATE": "My birthday is on 3 May") or follows within three
   words a date predicate (born, birthday, died, passed away, anniversary, founded,
   established, deadline, due, expires, dated). Such a date stays in the statement and
   sets no valid time (the claim is true independently of it; a relative one is rewritten
   as an absolute date, "My birthday is tomorrow" -> "Name's birthday is on 9 May 2023").
   Every other date is an observation frame: it becomes valid time and leaves the text.
   ``occurred_at`` alone never becomes valid time.
6. **Sensitivity**: ``restricted`` for secrets and identifiers (passwords, PINs, social
   security / passport / card / bank account / routing numbers, API or private keys,
   number patterns shaped like an SSN or a card), ``personal`` for special categories
   (health, diagnosis, therapy, medication; sexual orientation and gender identity;
   religion; politics; finances, debt, salary; criminal record), else ``internal``. Never
   ``public``: publication is a governance decision, not an extraction result. A clause's
   level reaches the whole sentence (``sensitivity.share_within_sentences``): every claim
   drawn from a sentence with a personal or restricted claim about the same subject is at
   least as sensitive ("I was diagnosed with diabetes, so I'm watching my sugar": both
   personal); claims from the message's other sentences keep their own level.
7. **Confidence**: speaker as explicit subject 0.8; elided subject or speaker only
   mentioned 0.7; we/our 0.6; a known peer (third person) 0.6; a hedge (I think, I guess,
   maybe, probably, perhaps, might, not sure) subtracts 0.3, so a hedged self-observation
   is 0.5. Hedge words are removed from the statement.
8. **Evidence span**: offsets of the clause in the original text, without leading
   greetings/interjections and trailing punctuation.
9. **Reported clauses**. A declarative clause whose subject cannot be resolved (he, she,
   they, it, this, that, an unknown name or any other noun phrase: "They eat vegetables",
   "It's a mix of drama and romance", "Cooking is a great way to chill") or that has no
   verb ("The Minnesota Wolves!") is kept as what the speaker said: "Nate said they eat
   vegetables", "John said: the Minnesota Wolves". Its subject is the speaker
   (``self_observation=True``: the speaker's own words are directly observed), its kind is
   always ``fact`` (a reported "she loves painting" is not the speaker's preference), its
   confidence 0.5 (0.2 hedged); first person inside it is rewritten as in step 3, valid
   time and sensitivity as in steps 5 and 6. Still dropped: imperatives, clauses about an
   unnamed "you", and clauses with fewer than two content words once names and fluff are
   set aside ("Wow Mel, that's stunning!", "That cup is so cute"). Without this step 21%
   of the LoCoMo dev evidence turns gave no knowledge at all; with it, 5%.
10. **The conversation's listener**. ``ObservedMessage.addressee_key`` names whom the
   message speaks to when the conversation leaves no doubt (the pipeline sets it for a
   two-party session). A vocative in the text still wins; otherwise an unnamed "you" is
   that peer, named by their fullest known name ("I got this pup for you" -> "Joanna got
   this pup for Nate"; "You are moving to Denver" -> a claim about Nate, which Gate B makes
   provisional as any claim about someone else). Not kept, because they say what the
   speaker wants or thinks of the listener, not what is true of anyone: advice and
   requests (an imperative, "you should/could/need to ...", "..., so ping me"),
   evaluations of the listener ("You're a lifesaver", "you are such a great painter";
   "you're moving", "you're in Berlin" stay) and reactions to what was shown ("That
   setup looks nice").
11. **Documents** (``document_statements``): a sentence (no break after "St.", "Dr.") is
   one claim per predicate of its subject ("X leads A and mentors B" gives two), with
   valid time from its frame dates, relative dates rewritten or removed as in step 5,
   absolute dates kept in the text, and kind by meaning; boilerplate ("Table of
   contents", "Thank you for reading") gives none. Bare weekdays and days of the month
   ("on Saturday", "until the 5th") point back in a past-tense clause and ahead
   otherwise; "from X to Y" is one window.
12. **Referents from the recent turns** (``knowledge.ingest.referents``): with
   ``ObservedMessage.recent_turns`` (the pipeline passes the session's two previous
   messages) and the message's earlier sentences, a subject "he/she" is the one third-party
   peer the nearest turn naming a person names ("Mei got promoted!" - "she carried the
   migration" -> "Mei carried the migration"), "there" the one place it names ("I lived
   there" -> "in Lisbon"), "this place" only a place the speaker named, "that name" the
   name just given; never a participant (speaker, listener, the previous speakers, anyone
   addressed by name). A person noun beside the peer ("her mom", "the cat"), two
   candidates or no recent turns leave the words as said (step 9), never a guess. Also
   v4: agreement, thanks and encouragement in other words ("makes sense", "your support
   means so much", "will make a difference") give no claim; speaking of "my wife/husband"
   adds "Name is married."; a verbless aside after ", so" is cut.
13. **rule-v5**: "it" (an object, or the subject of a verb of doing) is the one thing
   another speaker's question just asked about ("Is it the migration again?" - "Yes, it
   failed on staging"; ``knowledge.ingest.referents``), else left as said; a date that is
   the object of "to/at/for" is kept whatever the verb ("moving to May 28th"), and "the
   end/beginning/middle of" a month or year is read as late/early/mid; "on Thursday and
   Friday" is one window; a verbless fragment keeps its date; news asked as a
   question ("X is leaving in March, did you know?", "Did you hear X quit?") is a
   statement.
14. **Wording** (statements are pasted into prompts, so they must read well). A
   possessive that points back at someone the statement already named is "their"
   ("I'm watching my sugar" -> "Sam is watching their sugar"; "You found your true
   self" -> "Lena found their true self"), and a later "we"/"us" is "they"/"them" once
   "Sam and others" is said. No gender is guessed: nothing the extractor is given (no
   pronouns field on a peer, and a first name is no signal) says how a person is referred
   to, so the pronoun is the singular "their", as "themself" is for "myself". The name
   stays whenever a pronoun could mean someone else: the name was said only as a
   possessive ("Sam's mom loves Sam's cooking"), another peer, a he/she/they, a person
   noun (mom, coach, dog) or a plural stands between ("Sam told Omar about Sam's new
   job", "the kids loved Sam's pottery"), "my" after "Sam and others", or "my family and
   I". Discourse fillers leave ("by the way", "I mean,", ", you know,", "actually",
   "speaking of X,", "oof", "mm", "here you go"; "what you know" and "the way to" stay),
   and so do emoji and a doubled word ("a a"). Showing something is what it shows:
   "Here's a pic I snapped during practice" -> "Sam snapped a picture during practice",
   "Check out this photo from my trip to Kyoto" -> "Sam shared a photo from their trip
   to Kyoto", "Here's the cake I made" -> "Sam made the cake", "Here's my latest
   painting" -> "Sam showed their latest painting"; a picture with nothing said about it
   ("Here's a pic!", "here's a photo of him", "check this out") and a fan of nothing
   named ("I'm a huge fan.") give no claim (Gate A refuses them as
   ``f4_gate_a_fragment`` whichever extractor proposes them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from itertools import pairwise

from knowledge.ingest.dates import (
    _REL,
    RELATIVE_DATE_EXPRESSIONS,
    _choose_window,
    _find_dates,
    _format_window,
    _local,
    _remove_dates,
    resolve_relative_date,
    strip_relative_dates,
)
from knowledge.ingest.extraction import ExtractedClaim, ObservedMessage, validate_claim
from knowledge.ingest.lexicon import (
    _ADVERBS,
    _AMBIGUOUS_PAST,
    _BE_FORMS,
    _ED_ADJECTIVES,
    _FINITE,
    _FLUFF,
    _IRREGULAR_PAST,
    _MODALS,
    _PARTICIPLES,
    _PREFERENCE_BLOCK_BEFORE,
    _PREFERENCE_PHRASE,
    _PREFERENCE_VERBS,
    _RELATION_NOUN_USE,
    _RELATION_PREDICATE,
    _SKILL,
    _STATIVE,
    _STOPWORDS,
    _VERB_BASES,
    _WORD_SPLIT,
    _inflected,
    _is_adverb,
    _is_regular_past,
    _tidy,
    _wordset,
)
from knowledge.ingest.referents import (
    _PERSON_NOUN,
    Referents,
    ReferentWindow,
    resolve_referents,
)
from knowledge.ingest.sensitivity import (
    classify_sensitivity,
    share_within_sentences,
)

__all__ = [
    "RELATIVE_DATE_EXPRESSIONS",
    "DocumentStatement",
    "RuleBasedExtractor",
    "classify_sensitivity",
    "document_statements",
    "resolve_relative_date",
    "sentence_spans",
    "strip_relative_dates",
]

# ============================================================================================
# Text utilities
# ============================================================================================

_QUOTE_MAP = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"',
                            "\u00a0": " ", "\u2032": "'"})
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")
_PIECE = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?|\s+|.", re.S)


_SENTENCE_END = re.compile(r"[.!?\u2026]+[\"')\]]*(?=\s|$)|\n+")
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "e.g",
                            "i.e", "prof", "mt", "approx", "no", "fig"})


def _sentences(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        mark = match.group()
        if mark == ".":
            before = text[start:match.start()].rsplit(None, 1)
            word = before[-1].lower() if before else ""
            if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                continue
        spans.append((start, match.end()))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [span for span in spans if text[span[0]:span[1]].strip()]


_INTERJECTIONS = (
    r"oh+|ooh+|ah+|aw+|wow+|whoa|woah|hey+|hi+|hello|yo|yay|yeah|yea|yep|yup|yes|no|nope|nah|ok"
    r"|okay|well|hmm+|um+|uh+|omg|lol|haha\w*|hehe\w*|lmao|thanks|thank\s+you|thx|ty|congrats"
    r"|congratulations|bye|goodbye|cheers|anyway|anyways|btw|by\s+the\s+way|on\s+(?:another"
    r"|a\s+different|a\s+side|a\s+related|that|a\s+brighter|a\s+lighter)\s+note|speaking\s+of"
    r"\s+which|also|plus|and|but|so|honestly|actually|seriously|basically|guess\s+what"
    r"|believe\s+it\s+or\s+not|funny\s+enough|fun\s+fact|to\s+be\s+honest|tbh|in\s+fact"
    r"|you\s+know\s+what|you\s+know|then|still|now|oh\s+yeah|oh\s+my\s+god|gosh|geez|ha+"
    r"|fyi|fair\s+enough|oof|oops|whoops|mm+|ugh+|yikes|phew|whew|woo+(?:hoo+)?|yum+y?|alright"
    r"|aight|huh|meh|sheesh|dang|darn|here\s+(?:ya|you)\s+go|there\s+(?:ya|you)\s+go"
)
_PUNCT_INTERJECTIONS = (
    r"great|awesome|cool|nice|sweet|sure|true|right|exactly|totally|absolutely|definitely"
    r"|indeed|agreed|man|dude|bro|buddy|fair\s+enough|sure\s+thing|of\s+course|for\s+sure"
    r"|amazing|wonderful|fantastic|perfect|gotcha|interesting|fair|noted|i\s+mean|\w+ly"
)
_LEADING_MARKER = re.compile(
    rf"^(?:(?:{_INTERJECTIONS})(?=[\s,!.:;-]|$)|(?:{_PUNCT_INTERJECTIONS})(?=\s*(?:[,!.:;-]|$)))"
    rf"[\s,!.:;-]*",
    re.I,
)
_TRAILING_FILLER = re.compile(
    r"[\s,]*\b(?:too|as\s+well|though|tho|lol|haha\w*|hehe\w*|lmao|for\s+sure|btw"
    r"|honestly|anyway|anyways|right|tbh|take\s+a\s+look|check\s+it\s+out|see"
    r"|by\s+the\s+way|actually|basically|or\s+something|and\s+stuff)\s*$"
    # "..., you know": set off by a comma ("what you know" is no filler)
    r"|\s*,\s*(?:you\s+know|i\s+mean)\s*$",
    re.I,
)
_INLINE_FILLER = re.compile(
    r"\s*\b(?:lol|lmao|haha\w*|hehe\w*)\b"
    r"|(?P<before>^|,\s*)(?:you\s+know(?:\s+what)?|i\s+mean|like|honestly|basically|actually"
    r"|to\s+be\s+honest|tbh|btw|by\s+the\s+way|anyway|anyways)\s*(?P<after>,\s*|$)"
    # "but hey, that's...": the interjection after a conjunction
    r"|(?<=\bbut)\s+hey\s*,"
    # a sentence adverb of speech, not of the claim: "I actually started", "is literally"
    r"|\s+\b(?:actually|literally|basically)\b(?=\s+\w)",
    re.I)


_NEW_CLAUSE = re.compile(r"(?:I|we|he|she|they|it|there|that|this|the|my|our)\b", re.I)


def _inline_filler(match: re.Match[str]) -> str:
    """A filler set off by commas goes with its commas ("I was, like, so tired" -> "I was
    so tired"), unless a new clause follows ("we loved it, you know, the vibe was great"
    keeps one comma)."""
    if not (match.group("before") and match.group("after") and match.group("after").strip()):
        return ""
    rest = match.string[match.end():]
    return ", " if _NEW_CLAUSE.match(rest) else " "
_WHICH_TAIL = re.compile(r",?\s*\bwhich\s+(?:is|was|'s|has\s+been|will\s+be)\b[^,]{0,60}$",
                         re.I)
_CASUAL = re.compile(
    r"\b(?P<gonna>[Gg]onna)\b|\b(?P<wanna>[Ww]anna)\b|\b(?P<gotta>[Gg]otta)\b"
    r"|\b(?P<kinda>[Kk]inda)\b|\b(?P<sorta>[Ss]orta)\b|(?P<cause>\b'cause\b|\bcuz\b)"
    r"|\b(?P<im>Im|im(?=\s+[a-z]))\b|\b(?P<ive>[Ii]ve)\b|\b(?P<i>i)\b"
    r"|\b(?P<nt>(?:[Dd]o|[Dd]oes|[Dd]id|[Ii]s|[Aa]re|[Ww]as|[Ww]ere|[Hh]as|[Hh]ave|[Hh]ad"
    r"|[Cc]ould|[Ww]ould|[Ss]hould|[Ww]o)nt|[Cc]ant)\b|\b(?P<u>u)\b|\b(?P<ur>ur)\b"
)
_CASUAL_FIXED = {"gonna": "going to", "wanna": "want to", "gotta": "have to",
                 "kinda": "kind of", "sorta": "sort of", "cause": "because", "im": "I'm",
                 "ive": "I've", "i": "I", "u": "you", "ur": "your"}


def _casual(match: re.Match[str]) -> str:
    group = match.lastgroup or ""
    if group == "nt":
        word = match.group()
        return word[:-1] + "'t" if word.lower() == "cant" else word[:-2] + "n't"
    replacement = _CASUAL_FIXED[group]
    first = match.group()[0]
    if first.isupper() and replacement[0].islower():
        return replacement[0].upper() + replacement[1:]
    return replacement


_HEDGE_REMOVE = re.compile(
    r"\b[Ii]\s+(?:think|guess|believe|suppose|reckon|feel\s+like|assume|bet|hope)(?:\s+that)?,?\s+"
    r"(?=(?:I|I'm|I've|I'd|I'll|we|he|she|it|it's|they|my|My|our|the|The|this|that|there"
    r"|[A-Z][a-z]))"
    r"|\b(?:I'm\s+)?pretty\s+sure(?:\s+that)?\s+(?=[A-Za-z])"
    r"|\b(?:[Mm]aybe|[Pp]robably|[Pp]erhaps|[Pp]ossibly)\b,?\s*"
)
_HEDGE_DETECT = re.compile(r"\bmight\b|\bnot\s+(?:entirely\s+|totally\s+|really\s+)?sure\b"
                           r"|\bmay\s+(?:be|have)\b|\bi\s+(?:think|guess|bet)\b", re.I)
_WRAPPER = re.compile(
    r"^(?:I\s+)?(?:just\s+)?(?:wanted|want|wanna)\s+to\s+(?:let\s+you\s+know|tell\s+you|share"
    r"(?:\s+with\s+you)?|say|mention|update\s+you)\s*(?:that\s+|,\s*)?"
    r"|^(?:I\s+)?(?:have|must|gotta|got\s+to|'ve\s+got\s+to|can)\s+(?:to\s+)?(?:say|tell\s+you|admit)"
    r"\s*(?:that\s+|,\s*)?"
    r"|^(?:guess\s+what|you\s+know\s+what|fun\s+fact|news\s+flash)\s*[,:!-]*\s*"
    # "Speaking of special moments, we just left for Rome": a bridge from the last turn
    r"|^speaking\s+of\s+[^,]{1,40},\s*"
    # "Please remember that I don't eat pork": the fact is what follows.
    r"|^(?:please\s+)?(?:remember|note|keep\s+in\s+mind|don't\s+forget|do\s+not\s+forget)"
    r"\s+(?:that\s+)?(?=(?:I|my|we|our)\b)"
    # A label in front of the news: "Change of plans: ...", "Heads up - ...".
    r"|^(?:(?:a\s+)?(?:small\s+|slight\s+|quick\s+)?change\s+of\s+plans?|plans?\s+changed"
    r"|heads[\s-]+up|(?:quick\s+|small\s+)?update|fyi|btw|by\s+the\s+way|correction|reminder"
    r"|(?:good|bad|big)\s+news|update\s+on\s+\w+)\s*[,:!.-]+\s*",
    re.I,
)
# Requests that state a fact about the speaker, said as an instruction to the listener:
# "Please call me Kate" is the speaker's name, "use jun@x.dev for email" their address.
_AT_ONCE = r"(?:(?:from\s+now\s+on|going\s+forward|in\s+future),?\s+)?(?:please\s+)?"
_REQUESTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"^{_AT_ONCE}(?:please\s+)?call\s+me\s+(?!at\b|on\b|back\b|later\b)", re.I),
     "I prefer to be called "),
    (re.compile(rf"^{_AT_ONCE}(?:you\s+can\s+|please\s+)?(?:reach|email|e-mail|write\s+to|"
                r"contact)\s+me\s+(?:by\s+e-?mail\s+)?(?:at|on|via)\s+(?=[\w.+-]+@)", re.I),
     "My email address is "),
    (re.compile(rf"^{_AT_ONCE}(?:you\s+can\s+|please\s+)?(?:reach|call|text|ring|contact)\s+me"
                r"\s+(?:at|on)\s+(?=\+?\d)", re.I),
     "My phone number is "),
    (re.compile(rf"^{_AT_ONCE}(?:please\s+)?use\s+(?=[\w.+-]+@[\w.-]+\s+for\s+(?:my\s+)?"
                r"e-?mails?\b)", re.I),
     "My email address is "),
    (re.compile(rf"^{_AT_ONCE}(?:please\s+)?(?:make|set|put\s+down|list)\s+(?=.{{2,60}}?\s+as\s+"
                r"my\s+)", re.I), ""),
)
_REQUEST_TAILS = (
    (re.compile(r"^(My email address is [\w.+-]+@[\w.-]+\w)\s+for\s+(?:my\s+)?e-?mails?\b",
                re.I), r"\1"),
    (re.compile(r"^(.{2,60}?)\s+as\s+(my\s+)", re.I), r"\1 is \2"),
)


# A clause announcing that a thing changed names what a following "it's ..." is about.
_CHANGED_THING = re.compile(
    r"\s*(?P<thing>(?:(?-i:[A-Z])[\w'-]*(?:'s|\u2019s)|my|our|his|her|their|the)"
    r"(?: [a-z][\w-]*){1,3}?) (?:has |have |had |was |got |just |also )?(?:been )?"
    r"(?:changed|moved|switched|rescheduled|updated|changed again)\b[\s,;]*$", re.I)
_IT_IS = re.compile(r"^it(?=(?:'s|\u2019s| is| was| will be|'ll be)\b)", re.I)


def _request_as_statement(text: str) -> str:
    for pattern, replacement in _REQUESTS:
        match = pattern.match(text)
        if match is None:
            continue
        text = replacement + text[match.end():]
        for tail, repl in _REQUEST_TAILS:
            text = tail.sub(repl, text, count=1)
        return text
    return text


_DROP_START = re.compile(r"^(?:if|unless|let's|lets|let\s+me|imagine|hope\s+you|in\s+case)\b",
                         re.I)
_DROP_ANY = re.compile(
    r"\bwonder(?:ing)?\s+(?:if|whether)\b|\bcan\s+(?:just\s+|only\s+)?imagine\b"
    # thanks in other words: "I really appreciate your help"
    r"|\bappreciate(?:s|d)?\s+(?:your|you|it|that|this|all\s+(?:your|the|of))\b"
    # a passing mood with nothing it is about: "I'm feeling hopeful and optimistic"
    r"|^I(?:'m|\s+am)\s+(?:\w+ly\s+|so\s+|just\s+)*feeling\s+\w+(?:\s*,?\s*(?:and|but)\s+\w+)?\W*$"
    r"|\bgot\s+(?:your|ya)\s+back\b|\bhave\s+(?:your|ya)\s+back\b"
    # agreement and thanks in other words: "Doing research first makes sense", "Your
    # support means so much"
    r"|\b(?:makes?|made)\s+(?:(?:total|perfect|a\s+lot\s+of|so\s+much)\s+)?sense\b"
    r"|^(?:your\s+[\w'-]+(?:\s+[\w'-]+)?|it|that|this)\s+(?:really\s+|truly\s+)?means?\s+"
    r"(?:so\s+much|a\s+lot|the\s+world|everything)\b",
    re.I,
)
# Cheering the listener on: "Even small steps will make a difference", "it'll be worth
# it": said to encourage, not to report what is the case.
_ENCOURAGEMENT = re.compile(
    r"\b(?:will|'ll)\s+(?:\w+ly\s+)?make\s+(?:a|all\s+the)\s+difference\b"
    r"|\b(?:will|'ll)\s+(?:\w+ly\s+)?be\s+(?:so\s+|totally\s+)?worth\s+it\b"
    r"|\b(?:you|you've|you\s+have)\s+got\s+this\b|\b(?:never|don't)\s+give\s+up\b",
    re.I,
)
# A verbless reply that only places something in time or space ("Sure, after lunch"):
# without the question it answers it says nothing.
_BARE_PREPOSITIONAL = re.compile(
    r"^(?:after|before|around|about|at|by|in|on|from|until|till|near|since)\s+[^,;]{0,40}$",
    re.I)
_QUESTION_START = re.compile(
    r"^(?:(?:what|how|why|where|who|which|whose|when)(?:'s|'re|'d)?\s+(?:is|are|was|were|do"
    r"|does|did|have|has|can|could|would|will|should|about|kind|kinda|made|makes|happened)\b"
    r"|(?:what|how|why|where|who)'s\b|(?:do|does|did|are|is|was|were|can|could|would|will"
    r"|have|has|should|shall|may|might|ain't|isn't|aren't|don't|didn't|doesn't|won't|wouldn't"
    r"|haven't)\s+(?:you|u|ya|i|we|they|he|she|it|there|your|that|this|anyone)\b)",
    re.I,
)
_YOU = re.compile(r"\b(?:you|your|yours|yourself|yourselves|you're|you've|you'd|you'll|ya"
                  r"|y'all|youre)\b", re.I)
# "You should ...", "you could ...": advice to the listener (step 10).
_ADVICE_MODAL = re.compile(
    r"^(?:you|ya|u)\s+(?:(?:really|just|totally|definitely|def|seriously|honestly|so|also|"
    r"still|absolutely)\s+)*(?:should|shoulda|could|can(?!')|might\s+want\s+to|may\s+want\s+to|"
    r"need\s+to|have\s+to|gotta|ought\s+to|oughta)\b",
    re.I)
# "You're a lifesaver", "you are such a great painter", "you must be so proud": how the
# speaker sees the listener, not a fact about them. "You're moving", "you're in Berlin",
# "you're off" stay.
_LISTENER_EVALUATION = re.compile(
    r"^(?:you|ya|u)(?:'re|\s+are|\s+were|\s+must\s+be|\s+look|\s+sound|\s+seem)\s+"
    r"(?!(?:\w+ing|in|at|from|on|off|away|back|with|into|not\s+\w+ing)\b)"
    # "you'll love it", "you'd like it there": a guess at the listener's taste
    r"|^(?:you|ya|u)(?:'ll|\s+will|'d|\s+would|\s+are\s+going\s+to|'re\s+going\s+to)\s+"
    r"(?:(?:really|totally|definitely|absolutely|so)\s+)*(?:love|like|enjoy|adore|hate)\b",
    re.I)
# "It would be awesome to go", "that'd be fun": a wish, not what is the case.
_HYPOTHETICAL = re.compile(r"^(?:it|that|this)(?:\s+would|'d)\s+be\b", re.I)
# "That work setup looks nice", "Painting looks like a great outlet": a reaction to what
# was shown or said, not a claim.
_EVALUATION = re.compile(
    r"^(?:[\w'-]+\s+){0,4}?(?:looks?|sounds?|seems?|looked|sounded|seemed)\b", re.I)
_FIRST_PERSON_MENTION = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself)\b")
_CLAUSE_SEPARATOR = re.compile(
    r"\s*,?\s*\b(?:and|but|so|or|yet)\b\s+|\s*;\s*|\s+[-\u2013\u2014]+\s+|\s*\u2014\s*|\s*-{2,}\s*"
    r"|(?P<comma>\s*,\s+)(?=(?:I|I'm|I've|I'd|I'll|[Ww]e|[Ww]e're|[Ww]e've|[Hh]e|[Ss]he|[Tt]hey"
    r"|[Tt]hey're|[Ii]t|[Ii]t's|[Hh]e's|[Ss]he's|[Yy]ou'll|[Yy]ou'd|[Yy]ou're|[Yy]ou've"
    # "Geraint retired, my new boss is Yolanda": the speaker's own clause after someone
    # else's is its own claim (the named-person gate holds the other one)
    r"|[Mm]y|[Oo]ur)\s)"
)
_SUBORDINATOR = re.compile(
    r"^\W*(?:when|while|because|since|although|though|after|before|as|once|until|if|unless"
    r"|whenever|whether|even\s+if|even\s+though|so\s+that)\b",
    re.I,
)
_LEADING_YOU_PHRASE = re.compile(
    r"^(?!(?:when|while|because|since|although|though|after|before|as|once|until)\b)"
    r"[^,]*\b(?:you|your|yours)\b[^,]*,\s*(?=(?:I|I'm|I've|I'd|I'll|we|my|My|our|Our)\b)",
    re.I,
)

_I_FORMS = frozenset({"i", "i'm", "i've", "i'd", "i'll"})
_WE_FORMS = frozenset({"we", "we're", "we've", "we'd", "we'll", "our", "ours", "us"})
_UNRESOLVED = _wordset(
    """he she they it this that these those there his her their its it's that's there's
    he's she's they're they've they'll they'd he'll she'll he'd she'd it'll it'd everyone
    everybody someone somebody nobody noone people who what which here here's nothing
    everything something anyone anybody all both each some many most none such other others
    one whoever whatever that'll this'll those'd"""
)
_IMPERATIVES = _wordset(
    """take check keep look let have stay enjoy go come give tell try make get be remember
    don't do thank congrats talk catch say send show sounds seems looks hope imagine stop
    picture consider feel call text ask bring grab hang hold mind trust believe listen read
    watch wish please dont good nice glad happy sorry welcome same"""
)
# Imperative verbs that give advice or ask something of the listener (not "thank",
# "congrats", "sounds", "hope" and the other fluff openers in _IMPERATIVES).
_ADVICE_VERBS = _wordset(
    """take check keep look stay enjoy go come give tell try make get be remember don't
    dont do talk catch say send show stop consider call text ask bring grab hang hold mind
    trust believe listen read watch follow find start join visit use put focus avoid
    practice practise write plan buy pick set leave spend share ping dm email message"""
)
_ELLIPTICAL = {
    "gonna": "I'm", "going": "I'm", "been": "I've", "got": "I", "just": "I", "went": "I",
    "had": "I", "love": "I", "loved": "I", "loving": "I'm", "finally": "I", "started": "I",
    "finished": "I", "working": "I'm", "heading": "I'm", "off": "I'm", "thinking": "I'm",
    "hoping": "I'm", "planning": "I'm", "trying": "I'm", "feeling": "I'm", "spent": "I",
    "bought": "I", "made": "I", "took": "I", "visited": "I", "tried": "I", "saw": "I",
    "met": "I", "joined": "I", "learned": "I", "learnt": "I", "picked": "I", "adopted": "I",
    "enjoying": "I'm", "enjoyed": "I", "currently": "I'm", "recently": "I", "totally": "I",
    "really": "I", "actually": "I", "also": "I", "can't": "I", "cannot": "I", "never": "I",
    "didn't": "I", "haven't": "I",
}








def _third_person_s(low: str) -> str | None:
    """The base form of a 3rd-person -s verb in ``_VERB_BASES``, if ``low`` is one."""
    if not low.endswith("s") or len(low) < 3:
        return None
    for base in (low[:-1], low[:-2], low[:-3] + "y" if low.endswith("ies") else ""):
        if base and base in _VERB_BASES:
            return base
    return None


def _is_finite_verb(low: str) -> bool:
    return (
        low in _FINITE
        or _is_regular_past(low)
        or _third_person_s(low) is not None
        or low in _VERB_BASES
        or low.endswith(("'m", "'re", "'ve", "'ll", "'d"))
    )


_EXPAND_STEPS = (
    (re.compile(r"\bcan't\b"), "can not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"'(m|re|ve|ll|d|s)\b"), r" '\1"),
)


def _expand(text: str) -> str:
    """Lower-cased analysis copy with contractions split off."""
    low = text.lower()
    for pattern, replacement in _EXPAND_STEPS:
        low = pattern.sub(replacement, low)
    return low


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


# ============================================================================================
# Peers
# ============================================================================================


@dataclass(frozen=True)
class _Peers:
    pattern: re.Pattern[str] | None
    by_name: Mapping[str, str]
    speaker_key: str

    def key_for(self, name: str) -> str | None:
        return self.by_name.get(" ".join(name.lower().split()))

    def match_at(self, text: str, pos: int = 0) -> re.Match[str] | None:
        if self.pattern is None:
            return None
        match = self.pattern.match(text, pos)
        if match is None or not match.group()[0].isupper():
            return None
        return match

    def find_all(self, text: str) -> list[re.Match[str]]:
        if self.pattern is None:
            return []
        return [m for m in self.pattern.finditer(text) if m.group()[0].isupper()]


def _name_words(peers: _Peers) -> frozenset[str]:
    return frozenset(part for name in peers.by_name for part in name.split())


@lru_cache(maxsize=512)
def _peers(items: tuple[tuple[str, str], ...], speaker_name: str, speaker_key: str) -> _Peers:
    by_name = {" ".join(name.lower().split()): key for name, key in items if name.strip()}
    if speaker_name.strip():
        by_name.setdefault(" ".join(speaker_name.lower().split()), speaker_key)
    if not by_name:
        return _Peers(None, by_name, speaker_key)
    names = sorted(by_name, key=len, reverse=True)
    alternation = "|".join(r"\s+".join(re.escape(part) for part in n.split()) for n in names)
    pattern = re.compile(rf"(?<![A-Za-z'])(?:{alternation})(?![A-Za-z])", re.I)
    return _Peers(pattern, by_name, speaker_key)


# ============================================================================================
# Rewriting
# ============================================================================================

_CONJ_SPECIAL = {
    "am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "go": "goes",
    "don't": "doesn't", "haven't": "hasn't", "aren't": "isn't", "ain't": "isn't",
    "weren't": "wasn't", "be": "is",
}
_NO_CONJ = _MODALS | _IRREGULAR_PAST | _AMBIGUOUS_PAST | _wordset(
    """was did had used didn't wasn't hadn't gotten 'm not and or too also alone myself here
    there now then who that which to of in on at for with as if but so"""
)


def _match_case(template: str, word: str) -> str:
    return word[:1].upper() + word[1:] if template[:1].isupper() else word


def _conjugate(word: str, strict: bool) -> str:
    low = word.lower()
    if low in _CONJ_SPECIAL:
        return _match_case(word, _CONJ_SPECIAL[low])
    if low in _NO_CONJ or _is_regular_past(low) or low.endswith("ing") or not low.isalpha():
        return word
    if strict and low not in _VERB_BASES:
        return word
    if low in _STOPWORDS and low not in _VERB_BASES:
        return word
    if word[:1].isupper() and low not in _VERB_BASES:
        return word
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return word + "es"
    if low.endswith("y") and len(low) > 1 and low[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


_PREPOSITIONS = _wordset(
    "to for with about of at on in by from into upon onto toward towards against without "
    "within among after before behind beside between beyond like than as"
)
_SUBJECT_POSITION = frozenset(
    {"", "and", "but", "or", "so", "that", "because", "when", "if", "since", "while", "as",
     "though", "although", "where", "how", "what", "why", "cause", "until", "once",
     "sure", "hope"}
)


# A possessive that points back at the statement's subject is a pronoun ("Sam is watching
# their sugar", not "Sam is watching Sam's sugar"). Nothing the extractor is given says
# how a person is referred to (a peer has no pronouns field, and a first name is no
# signal), so the pronoun is the singular "their", as "themself" is for "myself".
_POSSESSIVE_PRONOUN = "their"
# Words after the subject that a "their" could point at instead: another person, a
# group, a plural ("Rosa's mom loves Rosa's cooking", "Jon loves having Gina in Jon's
# corner", "the kids loved Mel's pottery" keep the name).
_OTHER_REFERENTS = _wordset(
    """he she him her his hers they them their theirs themselves himself herself who whom
    whose people children kids men women folks guys everyone everybody someone somebody
    anyone anybody nobody family fam team group crew class band club company community
    squad gang staff couple parents friends"""
)
# Before a capitalised word, words after which it is likely a person ("told Sarah").
_BEFORE_PERSON = _wordset(
    """with told tell tells asked ask asks and met meet meets saw see sees called call calls
    texted text texts to for from by like than thanked invited helped visited hugged"""
)
_NOT_PLURAL = _wordset(
    """was has is does this its yes us always perhaps sometimes plus thus series news
    whereas besides towards afterwards upstairs downstairs outdoors indoors nowadays
    across less unless chaos bus gas lens bonus focus campus status virus"""
)


_SINGULAR_SUBJECTS = frozenset({"it", "he", "she", "that", "this", "which", "who", "what",
                                "<name>"})


def _plural_noun(low: str, previous: str) -> bool:
    if len(low) < 4 or not low.endswith("s") or low.endswith(("ss", "us", "is", "'s", "ous")):
        return False
    if low in _STOPWORDS or low in _NOT_PLURAL or _is_adverb(low):
        return False
    if previous in _SINGULAR_SUBJECTS:
        return False  # "it reminds", "Sam gives": a verb
    # "talks", "loves": a verb unless a determiner or a possessive comes before it
    return (_third_person_s(low) is None or previous in _DETERMINERS
            or previous.endswith("'s"))


def _coreferent(so_far: str, name: str, group: bool, names: frozenset[str],
                plural: bool = False) -> bool:
    """Does a possessive of ``name`` (``group``: "our", not "my") written after
    ``so_far`` point back at someone the statement already named? Only when the name
    was said (not just as a possessive: "Rosa's mom loves Rosa's cooking" stays) and
    nobody and nothing else in the statement could be what a pronoun points at.
    ``plural``: a "we" or "us", which may point back only at "Name and others"."""
    mentions = re.compile(rf"(?<![\w']){re.escape(name)}(?P<own>'s)?(?P<others> and others)?"
                          rf"(?![\w'])")
    last = None
    for match in mentions.finditer(so_far):
        if not match.group("own"):
            last = match
    if last is None or (last.group("others") and not group) or (
            plural and not last.group("others")):
        return False  # "Sam and others went to Sam's parents' place": my is not our
    if _PERSON_NOUN.search(mentions.sub(" ", so_far)):
        return False  # "the coach told Sam to bring Sam's gear"
    own = {part.lower() for part in name.split()}
    said = [match.span() for match in mentions.finditer(so_far)]
    previous = ""
    for match in _TOKEN.finditer(so_far):
        token, low = match.group(), match.group().lower()
        if low.removesuffix("'s") in own or any(a <= match.start() < b for a, b in said):
            previous = "<name>" if low in own else low
            continue
        # a plural is a nearer referent only after the name's last mention ("Moments
        # like this remind Jon why Jon is chasing his dream")
        nearer = match.start() >= last.end()
        if (low.split("'")[0] in _OTHER_REFERENTS or low.removesuffix("'s") in names
                or (nearer and _plural_noun(low, previous))
                or (token[:1].isupper() and previous in _BEFORE_PERSON)):
            return False
        previous = low
    return True


def _rewrite(text: str, speaker: str, addressee: str | None, lead: str = "",
             names: frozenset[str] = frozenset()) -> str:
    """Rewrite first person (and, with an addressee, second person) in the third person.
    ``lead`` is what the statement will put before the text ("Sam said "), ``names`` the
    lower-cased words of the known peers' names (who else a possessive might mean)."""
    pieces = _PIECE.findall(text)
    words = [i for i, p in enumerate(pieces) if _TOKEN.fullmatch(p)]
    out = list(pieces)
    # a pronoun put for a name is read back as the name by _coreferent
    said_as: dict[int, str] = {}

    def so_far(index: int) -> str:
        return lead + "".join(said_as.get(i, out[i]) for i in range(index))

    pending: str | None = None  # "first" / "second": conjugate the next verb
    name_seen = False
    previous_word = ""
    word_positions = {pos: n for n, pos in enumerate(words)}
    for index, piece in enumerate(pieces):
        if index not in word_positions:
            if not piece.isspace():
                pending = None
            continue
        low = piece.lower()
        if pending is not None:
            if _is_adverb(low) or low == "not":
                previous_word = low
                continue
            if pending == "first" or low in _VERB_BASES or low in _CONJ_SPECIAL:
                out[index] = _conjugate(piece, strict=pending == "second")
            pending = None
            previous_word = low
            continue
        replacement: str | None = None
        # part of a longer word: "me-time", and an address ("marta@kowalczyk.me")
        hyphenated = (
            index + 2 < len(pieces) and pieces[index + 1] in ("-", "@")
            and _TOKEN.fullmatch(pieces[index + 2]) is not None
        ) or (
            index > 1 and pieces[index - 1] in ("-", ".", "@", "/")
            and _TOKEN.fullmatch(pieces[index - 2]) is not None
        )
        if hyphenated:
            previous_word = low
            continue
        if low == "i" and piece in ("I", "i"):
            replacement = speaker
            if previous_word not in ("and", "or", "than"):
                pending = "first"
        elif low == "i'm":
            replacement = f"{speaker} is"
        elif low == "i've":
            replacement = f"{speaker} has"
        elif low == "i'll":
            replacement = f"{speaker} will"
        elif low == "i'd":
            nxt = _next_non_adverb(pieces, words, word_positions[index])
            had = nxt is not None and (nxt == "been" or _is_regular_past(nxt)
                                       or (nxt in _PARTICIPLES and nxt not in _VERB_BASES))
            replacement = f"{speaker} {'had' if had else 'would'}"
        elif low == "me":
            replacement = speaker
        elif low == "my" and not _named_soon(pieces, words, word_positions[index]) and (
                _coreferent(so_far(index), speaker, False, names)):
            replacement = _POSSESSIVE_PRONOUN
            said_as[index] = f"{speaker}'s"
        elif low in ("my", "mine"):
            replacement = f"{speaker}'s"
        elif low == "myself":
            if not name_seen:
                replacement = speaker
            elif (
                previous_word in _PREPOSITIONS
                or previous_word in _VERB_BASES
                or previous_word in _IRREGULAR_PAST
                or previous_word in _AMBIGUOUS_PAST
                or _is_regular_past(previous_word)
                or previous_word.endswith("ing")
            ):
                replacement = "themself"
            else:  # emphatic ("I did it myself"): drop it
                out[index] = ""
                if index > 0 and pieces[index - 1].isspace():
                    out[index - 1] = ""
                previous_word = low
                continue
        elif low in ("we", "us", "we're", "we've", "we'd", "we'll"):
            if _coreferent(so_far(index), speaker, True, names, plural=True):
                # "Sam and others went out and they had fun": named once is enough
                replacement = {"we": "they", "us": "them"}.get(low, "they" + low[2:])
                said_as[index] = f"{speaker} and others"
            elif low in ("we", "us"):
                replacement = f"{speaker} and others"
            else:
                aux = {"we're": "are", "we've": "have", "we'd": "would", "we'll": "will"}[low]
                replacement = f"{speaker} and others {aux}"
        elif low == "our" and _coreferent(so_far(index), speaker, True, names):
            replacement = _POSSESSIVE_PRONOUN
            said_as[index] = f"{speaker}'s"
        elif low in ("our", "ours"):
            replacement = f"{speaker}'s"
        elif low == "ourselves":
            replacement = "themselves"
        elif addressee is not None:
            if low == "you":
                replacement = addressee
                nxt = _next_non_adverb(pieces, words, word_positions[index])
                if previous_word in _SUBJECT_POSITION or nxt in _CONJ_SPECIAL:
                    pending = "second"
            elif low == "your" and _coreferent(so_far(index), addressee, False, names):
                replacement = _POSSESSIVE_PRONOUN
                said_as[index] = f"{addressee}'s"
            elif low in ("your", "yours"):
                replacement = f"{addressee}'s"
            elif low in ("you're", "youre"):
                replacement = f"{addressee} is"
            elif low == "you've":
                replacement = f"{addressee} has"
            elif low == "you'd":
                replacement = f"{addressee} would"
            elif low == "you'll":
                replacement = f"{addressee} will"
            elif low in ("yourself", "yourselves"):
                replacement = "themself"
        if replacement is not None:
            out[index] = replacement
            name_seen = True
        elif speaker and low == speaker.lower():
            name_seen = True
        previous_word = low
    return "".join(out)


def _named_soon(pieces: list[str], words: list[int], n: int) -> bool:
    """"my family and I": the speaker is named again right after the possessive's noun,
    and a pronoun just before the name reads as someone else's."""
    following = [pieces[pos].lower() for pos in words[n + 1:n + 6]]
    return any(a == "and" and b in ("i", "me") for a, b in pairwise(following))


def _next_non_adverb(pieces: list[str], words: list[int], n: int) -> str | None:
    for pos in words[n + 1:]:
        low = pieces[pos].lower()
        if not _is_adverb(low):
            return low
    return None


# ============================================================================================
# Clause analysis
# ============================================================================================


@dataclass(frozen=True)
class _Subject:
    mode: str  # self | implied | mention | group | peer
    peer_key: str
    prefix: str = ""  # implied subject to prepend


def _starts_with_subject(right: str, peers: _Peers) -> bool:
    toks = _tokens(right)
    i = 0
    while i < len(toks) and toks[i].lower() in ("then", "also", "now", "still", "really",
                                                "just", "even", "honestly", "actually"):
        i += 1
    if i >= len(toks):
        return False
    first = toks[i].lower()
    nxt = toks[i + 1].lower() if i + 1 < len(toks) else ""
    if first in ("i'm", "i've", "i'd", "i'll", "we're", "we've", "we'd", "we'll", "it's",
                 "he's", "she's", "they're", "they've", "you're", "you've", "you'll", "you'd",
                 "that's",
                 "there's"):
        return True
    if first in ("i", "we", "he", "she", "they", "it", "you", "this", "that", "there"):
        return bool(nxt) and (_is_finite_verb(nxt) or _is_adverb(nxt))
    if nxt in ("is", "was", "are", "were", "has") and first not in _STOPWORDS:
        return True
    if first in ("my", "our", "your", "his", "her", "their", "the", "a", "an", "these",
                 "those"):
        return any(_is_finite_verb_strict(t.lower()) for t in toks[i + 2:i + 5])
    match = peers.match_at(right, _offset_of_token(right, i))
    if match is not None:
        rest = _tokens(right[match.end():])[:2]
        return any(_is_finite_verb_strict(t.lower()) for t in rest)
    return False


def _is_finite_verb_strict(low: str) -> bool:
    """Finite verbs for the split decision (bare base forms count only after a plural)."""
    return (
        low in _FINITE
        or _is_regular_past(low)
        or _third_person_s(low) is not None
        or low.endswith(("'s", "'re", "'ve", "'ll", "'d"))
        or low in _VERB_BASES
    )


def _offset_of_token(text: str, n: int) -> int:
    for index, match in enumerate(_TOKEN.finditer(text)):
        if index == n:
            return match.start()
    return len(text)


def _has_verb(left: str) -> bool:
    return any(_is_finite_verb(t.lower()) for t in _tokens(left))


_CONJOINABLE = frozenset({"you", "me", "him", "her", "them", "us", "i"})


_VERB_AFTER = _wordset(
    "i we you they to will would can could should might must may do don't did didn't does "
    "doesn't never always also really just still"
)


_TOKEN_OR_STOP = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?|[,;:()\"]")


def _verbless(text: str) -> bool:
    """No verb of any form ("Three years", not "explore more and volunteer at shelters",
    "Planning a trip there", "see you")."""
    for token in _TOKEN_OR_STOP.findall(text):
        low = token.lower()
        if (low in _FINITE or low in _VERB_BASES or low in ("gonna", "wanna", "gotta")
                or _is_regular_past(low) or _third_person_s(low) is not None
                or (low.endswith("ing") and len(low) > 4)
                or low.endswith(("'s", "'m", "'re", "'ve", "'ll", "'d"))):
            return False
    return True


# After "'s", what makes it "is" rather than a possessive: "My car's a beat-up Ford
# Fiesta", "my phone's still broken" (not "my car's engine").
_IS_AFTER = _wordset("""a an the not now still no never always really just so very too
also pretty quite finally officially back over done broken gone going been got getting
in on at with from off out""")
_POSSESSIVE_IS = re.compile(
    r"\b((?:my|our|his|her|their|your) [\w-]+)'s (?=(?:" + "|".join(sorted(_IS_AFTER))
    + r")\b)", re.I)


def _has_or_is(match: re.Match[str]) -> str:
    """The verb a contracted 's after a possessive stands for: "has" before a participle."""
    after = match.string[match.end():].split(None, 1)
    return "has" if after and after[0].lower() in ("been", "got", "gone") else "is"


# Nouns used as verbs after a subject ("I bank with Barclays", "we carpool to work").
_NOUN_VERBS = _wordset("bank banks carpool carpools boulder boulders cycle cycles row rows")


def _has_finite_clause(text: str) -> bool:
    """A finite verb: inflected, auxiliary, or a base form after a subject ('I', 'we',
    'they', a plural noun), a modal, 'to' or 'do'; adverbs in between are skipped."""
    previous = ""
    tokens = _TOKEN_OR_STOP.findall(text)
    for n, token in enumerate(tokens):
        low = token.lower()
        if low.endswith("'s") and n + 1 < len(tokens) and tokens[n + 1].lower() in _IS_AFTER \
                and previous in ("my", "our", "his", "her", "their", "your"):
            return True  # "my car's a Fiesta": a contracted "is"
        if low in _NOUN_VERBS and previous in ("i", "we", "they"):
            return True
        if low in ",;:()\"":
            previous = ","
            continue
        if (
            low in _FINITE
            or _is_regular_past(low)
            or _third_person_s(low) is not None
            or low.endswith(("'m", "'re", "'ve", "'ll", "'d"))
            or (low.endswith("'s") and previous in ("", "it", "he", "she", "that", "there"))
            or (low in _VERB_BASES and (
                previous in _VERB_AFTER
                or token[:1].isupper()
                or (previous.endswith("s") and previous not in _STOPWORDS
                    and previous not in _FINITE)
            ))
        ):
            return True
        if not _is_adverb(low):
            previous = low
    return False


def _clauses(text: str, start: int, end: int, peers: _Peers) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    cursor = start
    for match in _CLAUSE_SEPARATOR.finditer(text, start, end):
        if match.start() <= cursor:
            continue
        left = text[cursor:match.start()]
        right = text[match.end():end]
        if match.group("comma") and _SUBORDINATOR.match(left):
            continue
        left_tail = left.rsplit(",", 1)[-1]
        left_words = _tokens(left_tail)
        if not left_words or not _has_verb(left_tail):
            continue  # "my family and I went": a compound subject, not two clauses
        if left_words[-1].lower() in _CONJOINABLE or peers.match_at(
            left_tail, _offset_of_token(left_tail, len(left_words) - 1)
        ):
            continue  # "Hope you and your family like it"
        right_words = _tokens(right)
        request = (match.group().strip(" ,").lower() == "so" and bool(right_words)
                   and right_words[0].lower() in _ADVICE_VERBS)  # "..., so ping me"
        if request or _starts_with_subject(right, peers):
            spans.append((cursor, match.start()))
            cursor = match.end()
    spans.append((cursor, end))
    return spans


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and (text[start].isspace() or text[start] in "\"'([-,;:*~"):
        start += 1
    while end > start and (text[end - 1].isspace() or text[end - 1] in ".!?,;:\"')]*~\u2026-"):
        end -= 1
    return start, end


_AFTER_VOCATIVE = re.compile(r"\s*(?:[,!.:;]|$)")
_TAIL_VOCATIVE = re.compile(r",\s*([A-Z][\w' ]{0,30}?)\s*[.!?]*$")
_VOCATIVE_PUNCT = re.compile(r"\s*[,!:;]+\s*")
_TAIL_NAME = re.compile(r",\s*([A-Z][\w' ]{0,30}?)$")
_COMPOUND_I = re.compile(r"^(?:[\w']+\s+){1,3}and\s+(?:I|me)\b")
_NON_WORD = re.compile(r"[^a-z0-9'-]")
_LEADING_CONJ = re.compile(r"^(?:and|but|so|or|then)\s+", re.I)


def _vocatives(sentence: str, peers: _Peers) -> list[str]:
    """Peer keys addressed by name in a sentence (at its start or end)."""
    keys: list[str] = []
    body = sentence.strip()
    rest = body
    while True:
        match = _LEADING_MARKER.match(rest)
        if not match or not match.group():
            break
        rest = rest[match.end():]
    head = peers.match_at(rest)
    if head is not None and _AFTER_VOCATIVE.match(rest, head.end()):
        keys.append(peers.key_for(head.group()) or "")
    tail = _TAIL_VOCATIVE.search(body)
    if tail is not None:
        name_match = peers.match_at(tail.group(1))
        if name_match is not None and name_match.end() == len(tail.group(1)):
            keys.append(peers.key_for(name_match.group()) or "")
    return [k for k in keys if k]


def _strip_leading(text: str, peers: _Peers) -> tuple[str, int, str | None]:
    """Remove leading interjections and a vocative; return (text, removed chars, vocative)."""
    removed = 0
    vocative: str | None = None
    while True:
        match = _LEADING_MARKER.match(text)
        if match and match.group():
            text, removed = text[match.end():], removed + match.end()
            continue
        name = peers.match_at(text)
        if name is not None:
            after = _VOCATIVE_PUNCT.match(text, name.end())
            if after is not None:
                vocative = peers.key_for(name.group())
                cut = after.end()
                text, removed = text[cut:], removed + cut
                continue
        break
    return text, removed, vocative


def _strip_trailing(text: str, peers: _Peers) -> tuple[str, str | None]:
    vocative: str | None = None
    while True:
        stripped = text.rstrip(" .!?,;:\u2026\"')")
        match = _TRAILING_FILLER.search(stripped)
        if match and match.start() > 0:
            text = stripped[:match.start()]
            continue
        tail = _TAIL_NAME.search(stripped)
        if tail is not None:
            name = peers.match_at(tail.group(1))
            if name is not None and name.end() == len(tail.group(1)):
                vocative = peers.key_for(name.group())
                text = stripped[:tail.start()]
                continue
        return stripped, vocative


_NON_NP_STARTERS = _wordset(
    "almost as so such even just very much more less quite pretty super kind like than too "
    "not never only also because when while if although though after before since until"
)
_COMMA_FIRST_PERSON = re.compile(r",\s+(?:I|I'm|I've|I'd|I'll|my|My)\b")


def _classify_subject(text: str, peers: _Peers) -> _Subject | None:
    toks = _tokens(text)
    if not toks:
        return None
    first = toks[0]
    low = first.lower()
    speaker = peers.speaker_key
    if low in _I_FORMS:
        return _Subject("self", speaker)
    if low == "me" and len(toks) > 1 and toks[1].lower() == "and":
        return _Subject("self", speaker)
    if low == "my":
        return _Subject("self", speaker)
    if low in _WE_FORMS:
        return _Subject("group", speaker)
    if _COMPOUND_I.match(text):
        return _Subject("self", speaker)
    if _YOU.fullmatch(first):
        return _Subject("listener", "")
    name = peers.match_at(text)
    if name is not None:
        key = peers.key_for(name.group()) or ""
        if key:
            return _Subject("self" if key == speaker else "peer", key)
    if low in _UNRESOLVED or (low in _IMPERATIVES and low not in _ELLIPTICAL):
        return None
    if low not in _ELLIPTICAL and first[:1].isupper() and (
        low in _IRREGULAR_PAST - {"was", "were", "did"} or _is_regular_past(low)
    ) and len(toks) > 1 and toks[1].lower() not in _FINITE:
        return _Subject("implied", speaker, "I")
    if low in _ELLIPTICAL:
        nxt = toks[1].lower() if len(toks) > 1 else ""
        if low in _ADVERBS and not (
            nxt in _IRREGULAR_PAST or _is_regular_past(nxt) or nxt in ("been", "love", "loved")
        ):
            return None
        return _Subject("implied", speaker, _ELLIPTICAL[low])
    # "Dance is my passion", "Cooking makes me happy": a noun subject, not an imperative
    noun_subject = len(toks) > 1 and toks[1].lower() in _SUBJECT_VERBS
    if low in _VERB_BASES and low not in _PREFERENCE_VERBS and not noun_subject:
        return None  # an imperative
    if low in _PREPOSITIONS and "," in text:
        rest = text.split(",", 1)[1].strip()
        inner = _classify_subject(rest, peers) if rest else None
        if inner is None or inner.mode == "mention":
            return None
        return _Subject(inner.mode, inner.peer_key)
    if low in _NON_NP_STARTERS or _is_adverb(low):
        # "Especially after the accident, I've thought..." vs "Almost as silly as when I..."
        return _Subject("self", speaker) if _COMMA_FIRST_PERSON.search(text) else None
    if _FIRST_PERSON_MENTION.search(text):
        return _Subject("mention", speaker)
    return None


_AVAILABILITY = re.compile(
    r"(?:\b(?:am|is|are|was|were|be)|'m|'re|'s)\s+(?:\w+ly\s+|all\s+)?(?:off|away|out|back|home"
    r"|free|busy|around|available|unavailable|on\s+(?:leave|vacation|holiday|call))\b")
_MAIN_VERB_IF_OBJECT = frozenset({"going", "have", "has", "had", "'ve", "'d"})
_DETERMINERS = _wordset(
    "a an the my our your his her their this that these those some two three four five no "
    "any every"
)


def _content_words(analysis: str, subject_names: set[str]) -> tuple[int, bool]:
    toks = analysis.split()
    words = [_NON_WORD.sub("", t) for t in toks]
    words = [w for w in words if w]
    count = 0
    for index, w in enumerate(words):
        nxt = words[index + 1] if index + 1 < len(words) else ""
        if w in _MAIN_VERB_IF_OBJECT:
            after = words[index + 2] if index + 2 < len(words) else ""
            if w == "going":
                count += nxt not in ("to", "") or after in _DETERMINERS
            else:
                count += nxt in _DETERMINERS or (
                    nxt not in _STOPWORDS and not _is_regular_past(nxt) and nxt not in _PARTICIPLES
                    and bool(nxt)
                )
            continue
        if (w not in _STOPWORDS and w not in _FLUFF and w not in subject_names
                and not w.startswith("'") and not _is_adverb(w)):
            count += 1
    copular = False
    for index, word in enumerate(words):
        if word in _BE_FORMS or word in ("'m", "'re", "'s"):
            rest = [w for w in words[index + 1:] if not _is_adverb(w) and w != "not"]
            nxt = rest[0] if rest else ""
            copular = bool(nxt) and not nxt.endswith("ing")
            break
        if _is_finite_verb(word) and word not in _STOPWORDS:
            break
    return count, copular


def _subject_index(words: list[str], subject: _Subject, peer_names: set[str]) -> int:
    for index, word in enumerate(words):
        if subject.mode in ("self", "implied") and word in ("i", "me"):
            return index + 1
        if subject.mode == "group" and word in ("we", "our", "us"):
            return index + 1
        if subject.mode == "peer" and word in peer_names:
            return index + 1
    return 0




def _event(words: list[str], start: int, durative: bool = False) -> bool:
    i = start
    while i < len(words) and (_is_adverb(words[i]) or words[i] == "not"):
        i += 1
    # find the verb group within a few words of the subject
    for j in range(i, min(i + 4, len(words))):
        if _is_finite_verb(words[j]) or words[j] in ("'m", "'re", "'s", "'ve", "'d", "'ll"):
            i = j
            break
    else:
        return False
    head = words[i]
    rest = [w for w in words[i + 1:] if not _is_adverb(w) and w != "not"]
    nxt = rest[0] if rest else ""
    if head in ("will", "'ll", "shall", "would", "'d", "gonna") or (
        head in ("am", "'m", "is", "are", "'re", "'s") and nxt in ("going", "gonna", "off")
    ):
        return False  # a plan is a fact, dated or not
    if head in ("am", "'m", "is", "are", "'re", "'s"):
        return False
    if head in ("was", "were"):
        return (nxt.endswith("ing") and nxt not in ("going",)) or (
            (_is_regular_past(nxt) or (nxt in _PARTICIPLES and nxt not in _VERB_BASES))
            and nxt != "born" and nxt not in _ED_ADJECTIVES
        )
    if head in ("have", "has", "'ve", "had"):
        if nxt == "been":
            after = rest[1] if len(rest) > 1 else ""
            return after == "to"
        if nxt == "got" and head != "had":
            return False
        if nxt in ("to",):
            return head == "had"
        if _is_regular_past(nxt) or nxt in _PARTICIPLES:
            return not (durative and head != "had")
        return head == "had"
    if head in ("did",):
        return True
    if head in ("used",):
        return False
    if head in _STATIVE:
        return False
    return head in _IRREGULAR_PAST or _is_regular_past(head)


_LIKE_SUBJECTS = frozenset({"i", "we", "you", "they", "he", "she", "who", "people", "kids",
                            "children", "everyone", "both"})


def _has_preference(words: list[str], names: set[str]) -> bool:
    for index, word in enumerate(words):
        if word not in _PREFERENCE_VERBS:
            continue
        if word in ("like", "likes", "liked"):
            j = index - 1
            while j >= 0 and (_is_adverb(words[j]) or words[j] in ("do", "does", "did", "not",
                                                                   "would", "'d")):
                j -= 1
            if j >= 0 and (words[j] in _LIKE_SUBJECTS or words[j] in names):
                return True
            continue
        j = index - 1
        while j >= 0 and (
            _is_adverb(words[j]) or words[j] in ("do", "does", "did", "not", "would", "'d",
                                                 "still", "really", "to", "also")
        ):
            if words[j] in ("would", "'d") and j > 0 and words[j - 1] in ("i", "we", "they"):
                return True
            j -= 1
        if j < 0:
            return index == 0
        if words[j] not in _PREFERENCE_BLOCK_BEFORE:
            return True
    return False


_DURATIVE = re.compile(r"\b(?:since|for\s+(?:\w+\s+)?(?:years|months|weeks|decades|ages|a\s+while|"
                       r"a\s+long\s+time|\w+\s+(?:years|months|weeks)))\b")


def _kind(
    analysis: str, subject: _Subject, peer_names: set[str], durative: bool = False,
) -> str:
    words = [w for w in _WORD_SPLIT.split(analysis) if w]
    if _RELATION_PREDICATE.search(analysis):
        return "relation"
    if _has_preference(words, peer_names) or _PREFERENCE_PHRASE.search(analysis):
        return "preference"
    if _SKILL.search(analysis):
        return "skill"
    durative = durative or _DURATIVE.search(analysis) is not None
    main = analysis
    if "," in analysis and _SUBORDINATOR.match(analysis):  # "when I was young, I went..."
        main = analysis.split(",", 1)[1]
    main_words = [w for w in _WORD_SPLIT.split(main) if w]
    if _event(main_words, _subject_index(main_words, subject, peer_names), durative):
        return "event"
    if _RELATION_NOUN_USE.search(analysis):
        return "relation"
    return "fact"


# News told as a question: "Kofi is leaving at the end of March, did you know?", "Did you
# hear Jess quit her job?", "Did I tell you Margot got engaged?" ask nothing; the statement
# inside is what the speaker says.
_KNOW_TAG = re.compile(
    r",\s*(?:did\s+you\s+(?:know|hear)|have\s+you\s+heard)\s*[?!.]*\s*$", re.I)
_HEARD_THAT = re.compile(
    r"(?:(?:so|hey|oh|btw|by\s+the\s+way)\W+)*(?:(?:did|have)\s+you\s+(?:hear|heard|know)"
    r"|(?:did|have)\s+I\s+(?:tell|told|mention|mentioned)(?:\s+(?:you|to\s+you))?)"
    r"\s+(?:that\s+)?(?=[A-Z]|(?:the|my|our)\s)",
    re.I)


def _news_span(sentence: str) -> tuple[int, int] | None:
    """Where the statement inside a know/hear question lies in ``sentence`` (None: it is
    no such question)."""
    body = sentence.rstrip()
    if not body.endswith("?"):
        return None
    tag = _KNOW_TAG.search(body)
    if tag is not None:
        return 0, tag.start()
    lead = _HEARD_THAT.match(body)
    if lead is not None and lead.end() < len(body) - 1:
        return lead.end(), len(body.rstrip("?"))
    return None


def _is_question(sentence: str) -> bool:
    body = sentence.strip()
    if "?" in body[-3:]:
        return True
    rest = body
    while True:
        match = _LEADING_MARKER.match(rest)
        if not match or not match.group():
            break
        rest = rest[match.end():]
    return _QUESTION_START.match(rest) is not None


_BASE_CONFIDENCE = {"self": 0.8, "implied": 0.7, "mention": 0.7, "group": 0.6, "peer": 0.6}
_HEDGE_PENALTY = 0.3
_REPORT_CONFIDENCE = 0.5


# Emoji say how the speaker feels, not what is the case ("Inspiring 💪 I emailed ...").
_EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F\u200D]+")
# A word said twice by mistake ("they offer a a bunch").
_DOUBLED = re.compile(r"\b(a|an|the|to|and|of|in|on|for|is|was|it)\s+\1\b", re.I)
# "reminding me I'm not alone" -> "reminding Maria Maria is not alone": the object and
# the subject of what follows meet; a "that" keeps them apart.
_TELL_VERB = re.compile(r"(?:remind|tell|told|show|assur|convinc|teach|taught|promis|warn)\w*$",
                        re.I)


def _separate_name(text: str, name: str) -> str:
    if not name:
        return text

    def joint(match: re.Match[str]) -> str:
        before = text[:match.start()].rstrip()
        glue = " that " if _TELL_VERB.search(before) else ", "
        return f"{match.group(1)}{glue}{match.group(2)}"

    return re.sub(rf"\b({re.escape(name)})\s+({re.escape(name)})\b", joint, text)


def _finish_statement(text: str) -> str:
    text = _DOUBLED.sub(r"\1", _EMOJI.sub("", text))
    text = _tidy(text)
    text = _LEADING_CONJ.sub("", text)
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    if text.count('"') % 2:
        text = text.rstrip(".!") + '"'
    if text[-1] not in ".!":
        text += "."
    elif text[-1] == "!":
        text = text[:-1] + "."
    return text


def _claim(message: ObservedMessage, statement: str, subject_key: str | None, kind: str,
           confidence: float, clause: str, relevant_from: datetime | None,
           relevant_until: datetime | None, span: tuple[int, int]) -> ExtractedClaim:
    """The claim of one clause; sensitivity comes from the clause as written."""
    claim = ExtractedClaim(
        statement=statement, subject_peer_key=subject_key, kind=kind,
        confidence=round(confidence, 2), sensitivity=classify_sensitivity(clause),
        relevant_from=relevant_from, relevant_until=relevant_until,
        self_observation=subject_key == message.speaker_key,
        source_message_id=message.message_id, evidence_span=span,
    )
    validate_claim(claim, message)
    return claim


# Showing something: "Here's a pic!", "Check out this photo from my trip to Kyoto",
# "Here's the cake I made". What is shown is the claim ("I took a picture during one of
# our practices", "I shared a photo from my trip to Kyoto", "I made the cake"); a picture
# with nothing said about it ("Here's a pic!", "here's a pic of him") is no claim.
_MEDIA = (r"(?:pic|pics|pix|picture|pictures|photo|photos|snap|snaps|snapshot|snapshots|shot"
          r"|shots|selfie|selfies|screenshot|screenshots|video|videos|vid|clip|clips)")
_MEDIA_WORD = {"pic": "picture", "pics": "pictures", "pix": "pictures", "vid": "video",
               "photo": "photo", "photos": "photos", "shot": "picture", "shots": "pictures",
               "snap": "picture", "snaps": "pictures", "snapshot": "picture",
               "snapshots": "pictures"}
_SHOW_LEAD = re.compile(
    r"(?P<here>here(?:'s|\s+is|\s+are|'re))\s+|(?:check\s+out|take\s+a\s+look\s+at"
    r"|look\s+at|(?:I'm\s+|I\s+am\s+|just\s+)?(?:sharing|sending)|shares?|attached(?:\s+is"
    r"|\s+are)?)\s+(?=(?:a|an|the|my|our|this|that|these|those|some|another)\s)", re.I)
_SHOWN_MEDIA = re.compile(
    rf"(?P<det>(?:a|an|the|my|our|this|that|these|those|some|another)\s+)?"
    rf"(?P<mods>(?:[\w'-]+\s+){{0,3}}?)(?P<media>{_MEDIA})\b(?P<rest>.*)$", re.I | re.S)
_TAKEN_BY = re.compile(
    r"\s*(?:that\s+|which\s+)?(?P<who>I|we)\s+(?P<adv>(?:just|finally|recently|once)\s+)?"
    r"(?P<verb>took|snapped|shot|got|captured|grabbed|caught|made|filmed|recorded)\b"
    r"(?P<tail>.*)$", re.S)
_SHOWN_THING = re.compile(
    r"(?:a|an|the|my|our|some|another|one\s+of|two|three|a\s+few)\s+\w", re.I)
# "Here's some good news - I've got a new job": the news is what follows
_SHOWN_VAGUE = re.compile(
    r"(?:(?:some|the|a|an)\s+)?(?:(?:good|great|big|bad|exciting|fun|quick|little)\s+)?"
    r"(?:news|update|thing|deal|idea|thought|tip|plan|story|one)"
    r"\s*(?:$|[-:\u2013\u2014]+\s*(?P<rest>.*)$)", re.I | re.S)
_SHOWN_MADE = re.compile(
    r"(?P<np>(?:(?!of\b|at\b|in\b|on\b|for\b|with\b|from\b)[\w'-]+\s+){1,4}?)"
    r"(?:that\s+|which\s+)?(?P<who>I|we)\s+(?P<adv>(?:just|finally|recently)\s+)?"
    r"(?P<verb>[a-z]+)\b(?P<tail>.*)$", re.S)


def _shown(text: str) -> str | None:
    """What a showing clause claims: the clause to extract instead, "" when it shows
    nothing it says anything about, None when it shows nothing."""
    lead = _SHOW_LEAD.match(text)
    body = text[lead.end():] if lead else text
    media = _SHOWN_MEDIA.match(body)
    if media is not None and (lead is not None or (
            media.group("det") and not _has_finite_clause(text))) and not any(
            w.lower() in _STOPWORDS for w in media.group("mods").split()):
        det = (media.group("det") or "").strip().lower()
        word = media.group("media")
        word = _MEDIA_WORD.get(word.lower(), word.lower())
        plural = word.lower().endswith("s")
        if det in ("", "this", "that", "the", "these", "those"):
            det = "some" if plural else "a"
        thing = f"{det} {media.group('mods')}{word}"
        taken = _TAKEN_BY.match(media.group("rest"))
        if taken is not None:  # "Here's a pic I snapped during practice"
            if _content_words(_expand(taken.group("tail")), set())[0] == 0:
                return ""  # "check out this pic I got a while back"
            return (f"{taken.group('who')} {taken.group('adv') or ''}{taken.group('verb')} "
                    f"{thing}{taken.group('tail')}")
        rest = media.group("rest")
        if _content_words(_expand(rest), set())[0] == 0:
            return ""  # "Here's a pic!", "here's a photo of him"
        return f"I shared {thing}{rest}"
    if lead is None or not lead.group("here"):
        return None
    vague = _SHOWN_VAGUE.match(body)
    if vague is not None:
        return vague.group("rest") or ""
    if not _SHOWN_THING.match(body):
        return None  # "Here's to new heights", "here's what happened", "here's Oliver"
    made = _SHOWN_MADE.match(body)
    if made is not None and (made.group("verb") in _IRREGULAR_PAST
                             or _is_regular_past(made.group("verb"))):
        # "Here's the cake I made for my dad's birthday" -> "I made the cake for ..."
        return (f"{made.group('who')} {made.group('adv') or ''}{made.group('verb')} "
                f"{made.group('np').rstrip()}{made.group('tail')}")
    if _content_words(_expand(body), set())[0] < 2:
        return None  # "Here's the poster", "here's my latest one": said as before
    return f"I showed {body[0].lower()}{body[1:]}"


# A fan of nothing named: "John is a fan.", "Tim is a huge fan too." (what of is in
# another turn, and the statement alone says nothing about John).
_BARE_FAN = re.compile(
    r"(?-i:[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2})(?:\s+and\s+others)?"
    r"(?:\s+said\s+(?:he|she|they|it|that|this))?"
    r"(?:\s+(?:is|was|are|were|has\s+been|have\s+been|will\s+be|'s|'re)|'s|'re)\s+"
    r"(?:(?:\w+ly|such|quite|also|still|always|so|definitely|def|kind\s+of|just|all|now|not)\s+)*"
    r"(?:an?\s+|the\s+)?(?:(?:big|huge|massive|great|real|true|die-?hard|long-?time|total|major"
    r"|avid|crazy|super|biggest|number\s+one|#1|fellow|loyal|devoted|diehard)\s+)*fans?"
    r"(?:\s+(?:too|as\s+well|now|again|already|though|then|myself|forever))?[.!]*",
    re.I)


def _content_free(statement: str) -> bool:
    """A statement that reads as a claim but names nothing: "John is a fan."."""
    return _BARE_FAN.fullmatch(statement.strip()) is not None


_NO_REFERENTS = Referents()
_SO_TAIL = re.compile(r",\s*so\s+(?P<tail>[^,;]+?)\W*$", re.I)
# "no more night runs", "lots of reading": a noun phrase even when a noun looks like a verb
_NOUN_PHRASE_START = re.compile(
    r"(?:no\s+more|no|lots\s+of|plenty\s+of|a\s+lot\s+of|more|less|fewer)\s+(?!\w+ly\b)\w+"
    r"(?!\s+(?:is|are|was|were|will|can|has|have)\b)", re.I)
_MY_SPOUSE = re.compile(
    r"(?<!ex-)(?<!ex )\b(?:my|My)\s+(?!(?:ex|late|former|future|first|second)\b)"
    r"(?:wife|husband|spouse)\b")
_MARRIED = re.compile(r"\b(?:married|divorced|widow(?:ed|er)?)\b", re.I)
# A verb that shows the word before it is a subject: "Dance is...", "Cooking makes..."
_SUBJECT_VERBS = _wordset("is was has makes made keeps kept helps helped means gives gave")


# A verbless change of place, job or provider: "Moving to Leeds for my final year",
# "Switching to Octopus with my energy".
_MOVE_FRAGMENT = re.compile(
    r"^(?:moving|relocating|transferring|switching|changing|starting|joining|heading back"
    r"|going back|retiring|leaving|quitting)\b", re.I)


class RuleBasedExtractor:
    """Deterministic, model-free extractor; see the module docstring for the rules."""

    name = "rule-based"
    version = "rule-v5"

    def extract(self, message: ObservedMessage) -> list[ExtractedClaim]:
        text = message.text.translate(_QUOTE_MAP)
        speaker_name = message.speaker_name.strip() or message.speaker_key
        peers = _peers(tuple(sorted(message.known_peers.items())), speaker_name,
                       message.speaker_key)
        local = _local(message.occurred_at)
        claims: list[ExtractedClaim] = []
        previous_vocatives: list[str] = []
        # The conversation's addressee, used only when the text names nobody; a key the
        # extractor cannot name (not among known_peers) is no addressee.
        context = ([message.addressee_key] if message.addressee_key
                   and message.addressee_key in message.known_peers.values() else [])
        units = [(key, turn.translate(_QUOTE_MAP)) for key, turn in message.recent_turns]
        # "he/she" is never someone taking part: the speaker, the listener, whoever spoke
        # just before, anyone addressed by name ("Hey Maria, ... he was part of our family")
        participants = {message.speaker_key, *context, *(key for key, _ in units)}
        for unit in (*(turn for _, turn in units), text):
            for a, b in _sentences(unit):
                participants.update(_vocatives(unit[a:b], peers))
        excluded = frozenset(participants)

        def named(unit: str) -> list[tuple[str, str]]:
            return [(key, m.group()) for m in peers.find_all(unit)
                    if (key := peers.key_for(m.group()) or "")]

        window = ReferentWindow(named, message.speaker_key, excluded)
        for unit_speaker, unit in units:
            window.add(unit_speaker, unit)
        for s_start, s_end in _sentences(text):
            sentence = text[s_start:s_end]
            refs = window.referents()
            window.add(message.speaker_key, sentence)
            vocatives = _vocatives(sentence, peers)
            addressees = [k for k in vocatives or previous_vocatives or context
                          if k != message.speaker_key]
            previous_vocatives = vocatives
            news = _news_span(sentence)
            if news is not None:
                s_start, s_end = s_start + news[0], s_start + news[1]
            elif _is_question(sentence):
                continue
            antecedent: str | None = None
            frame: ExtractedClaim | None = None
            for c_start, c_end in _clauses(text, s_start, s_end, peers):
                claim = self._clause(message, text, c_start, c_end, peers, local, addressees,
                                     antecedent, refs)
                if claim is not None:
                    if (frame is not None and claim.kind == "event"
                            and claim.relevant_from is None and claim.relevant_until is None):
                        # "My laptop died yesterday, so I bought a new one": one sentence
                        # telling what happened in a row shares its time frame
                        claim = replace(claim, relevant_from=frame.relevant_from,
                                        relevant_until=frame.relevant_until)
                    if claim.kind == "event" and claim.relevant_from is not None and (
                            claim.relevant_until is not None):
                        frame = claim
                    claims.append(claim)
                changed = _CHANGED_THING.match(text[c_start:c_end])
                antecedent = changed.group("thing") if changed else None
        spouse = next((m for m in _MY_SPOUSE.finditer(text) if not any(
            a <= m.start() < b and _is_question(text[a:b]) for a, b in _sentences(text))), None)
        if spouse is not None and not any(_MARRIED.search(c.statement) for c in claims):
            # "My wife is vegan": whoever speaks of their wife or husband is married, a
            # relation worth its own claim however the sentence goes on
            claims.append(_claim(message, f"{speaker_name} is married.", message.speaker_key,
                                 "relation", _BASE_CONFIDENCE["implied"], spouse.group(),
                                 None, None, spouse.span()))
        # step 6: a personal clause makes the sentence's other claims about the same
        # subject personal ("..., so I'm watching my sugar"); other sentences keep theirs
        return share_within_sentences(claims, text, _sentences(text))

    def _clause(
        self,
        message: ObservedMessage,
        text: str,
        start: int,
        end: int,
        peers: _Peers,
        local: datetime,
        addressees: list[str],
        antecedent: str | None = None,
        refs: Referents = _NO_REFERENTS,
    ) -> ExtractedClaim | None:
        start, end = _strip_span(text, start, end)
        if start >= end:
            return None
        body, removed, vocative = _strip_leading(text[start:end], peers)
        start += removed
        body, tail_vocative = _strip_trailing(body, peers)
        end = start + len(body)
        start, end = _strip_span(text, start, end)
        if start >= end:
            return None
        clause = text[start:end]
        addressee_keys = [k for k in (vocative, tail_vocative) if k] or addressees
        addressee_keys = [k for k in addressee_keys if k != message.speaker_key]
        if _DROP_START.match(clause) or _DROP_ANY.search(clause):
            return None

        hits = _find_dates(clause, local)
        work = _remove_dates(clause, hits) if hits else clause
        if hits and work.strip(" .,!?") and _verbless(work):
            # A fragment: "Three years in June." - the date is half of what is said, so it
            # stays (a relative one written out) instead of leaving "Three years."
            hits = [replace(h, part_of_claim=True, replacement=_format_window(h.window)
                            if h.replacement is None and _REL.fullmatch(clause[h.start:h.end])
                            else h.replacement) for h in hits]
            work = _remove_dates(clause, hits)
        relevant_from, relevant_until = _choose_window(hits)
        hedged = bool(_HEDGE_DETECT.search(work))
        work = _CASUAL.sub(_casual, work)
        work = _WRAPPER.sub("", work)
        work = _request_as_statement(work)
        if antecedent:  # "Lena's number changed, it's 555-0123 now"
            work = _IT_IS.sub(antecedent, re.sub(r"^it(?:'s|\u2019s)\b", "it is", work,
                                                 flags=re.I), count=1)
        work, count = _HEDGE_REMOVE.subn("", work)
        hedged = hedged or count > 0
        work = _INLINE_FILLER.sub(_inline_filler, work)
        work = _WHICH_TAIL.sub("", work)
        work = _LEADING_YOU_PHRASE.sub("", work)
        work, _, _ = _strip_leading(_tidy(work), peers)
        work, _ = _strip_trailing(work, peers)
        work = _tidy(work)
        if not work or _DROP_START.match(work):
            return None
        work = resolve_referents(work, refs)
        so_tail = _SO_TAIL.search(work)
        if so_tail is not None and (_NOUN_PHRASE_START.match(so_tail.group("tail"))
                                    or not _has_finite_clause(so_tail.group("tail"))):
            # "I've been diagnosed with asthma, so no more night runs for me": the verbless
            # remark after "so" is an aside; the claim is the clause before it
            work = work[:so_tail.start()].rstrip()
        shown = _shown(work)
        if shown is not None:
            if not shown:
                return None  # "Here's a pic!": it says that something is shown, not what
            work = shown

        # "my car's a Fiesta" -> "my car is a"; "my week's been busy" -> "my week has been"
        work = _POSSESSIVE_IS.sub(lambda m: f"{m.group(1)} {_has_or_is(m)} ", work)
        subject = _classify_subject(work, peers)
        if subject is not None and subject.mode == "listener" and (
                _ADVICE_MODAL.match(work) or _LISTENER_EVALUATION.match(work)):
            # "You should read it" is advice and "You're a lifesaver" an evaluation of the
            # listener: neither says what is true of anyone
            return None
        if subject is not None and subject.mode == "mention" and (
                work.split(None, 1)[0].lower() in _IMPERATIVES | _ADVICE_VERBS):
            return None  # "Ping me if you get stuck": a request, not a fact about the speaker
        if subject is None:
            return self._reported(message, text, start, end, clause, work, peers,
                                  addressee_keys, relevant_from, relevant_until, hedged)
        addressee_name: str | None = None
        if subject.mode == "listener" or _YOU.search(work):
            if len(set(addressee_keys)) != 1:
                return None
            addressee_key = addressee_keys[0]
            addressee_name = self._display_name(clause, text, addressee_key, peers)
            if subject.mode == "listener":
                subject = _Subject("peer", addressee_key)
        if subject.prefix:
            first = work.split(None, 1)[0]
            keep_case = peers.match_at(work) is not None
            work = f"{subject.prefix} {work if keep_case else first.lower() + work[len(first):]}"

        if not _has_finite_clause(work):
            if subject.mode == "mention" and _MOVE_FRAGMENT.match(work):
                # "Transferring to Edinburgh for my final year": where one is going, said
                # without a subject, is what was said (as when nothing names the speaker)
                return self._reported(message, text, start, end, clause, work, peers,
                                      addressee_keys, relevant_from, relevant_until, hedged)
            if subject.mode in ("self", "implied", "group", "mention"):
                return None  # "Me too!", "Just chilling": nothing was said about anything
            return self._reported(message, text, start, end, clause, work, peers,
                                  addressee_keys, relevant_from, relevant_until, hedged)
        analysis = _expand(work)
        peer_names = {part for name in peers.by_name for part in name.split()}
        subject_names = {"i", "me", "we", "us"} | {
            part for name, key in peers.by_name.items() if key == subject.peer_key
            for part in name.split()
        }
        content, copular = _content_words(analysis, subject_names)
        available = (copular and (relevant_from is not None or relevant_until is not None)
                     and _AVAILABILITY.search(analysis) is not None)  # "I'm off next week"
        if content < 2 and not (copular and content >= 1) and not available:
            return None
        durative = relevant_from is not None and relevant_until is None
        # kind is the durable meaning: a plan is a fact with or without a date
        kind = _kind(analysis, subject, peer_names, durative)
        speaker_name = message.speaker_name.strip() or message.speaker_key
        statement = _finish_statement(_separate_name(_rewrite(
            work, speaker_name, addressee_name, names=_name_words(peers)), speaker_name))
        if not statement or len(_tokens(statement)) < 2 or _content_free(statement):
            return None
        confidence = _BASE_CONFIDENCE[subject.mode]
        if hedged:
            confidence -= _HEDGE_PENALTY
        return _claim(message, statement, subject.peer_key, kind, confidence, clause,
                      relevant_from, relevant_until, (start, end))

    def _reported(
        self,
        message: ObservedMessage,
        text: str,
        start: int,
        end: int,
        clause: str,
        work: str,
        peers: _Peers,
        addressee_keys: list[str],
        relevant_from: datetime | None,
        relevant_until: datetime | None,
        hedged: bool,
    ) -> ExtractedClaim | None:
        """Step 9: a declarative clause whose subject cannot be resolved ("They eat
        vegetables", "It's a mix of drama and romance", "The Hobbit is great") or that has
        no verb ("The Minnesota Wolves!") is kept as what the speaker said: "Nate said they
        eat vegetables". The report is a direct observation of the speaker, so the speaker
        is its subject; the unresolved referent is why its confidence is low."""
        toks = _tokens(work)
        if not toks:
            return None
        low = toks[0].lower()
        if low not in _UNRESOLVED and (low in _IMPERATIVES or low in _VERB_BASES) and not (
                len(toks) > 1 and toks[1].lower() in _SUBJECT_VERBS):
            # advice or a request ("Make sure you watch other videos first", "Keep going"):
            # what the speaker wants, not what is true of anyone
            return None
        if _YOU.fullmatch(toks[0]) or low in ("your", "yours"):
            return None  # about the listener, who is not named here
        if _EVALUATION.match(work) or _HYPOTHETICAL.match(work) or _ENCOURAGEMENT.search(work):
            return None  # "That work setup looks nice", "It would be awesome to go"
        head, comma, tail = work.partition(",")
        imperative = re.match(r"\s*(?:please\s+)?([A-Za-z]+)\s", tail)
        if comma and imperative and imperative.group(1).lower() in _ADVICE_VERBS and (
                not _has_finite_clause(head)):
            return None  # "Toronto in March, bring a heavy coat!": advice
        speaker_key = message.speaker_key
        addressee_name: str | None = None
        if _YOU.search(work):
            if len(set(addressee_keys)) != 1:
                return None
            addressee_name = self._display_name(clause, text, addressee_keys[0], peers)
        # a name is not content here: "Wow Mel, that painting's amazing" says one thing
        names = {"i", "me", "we", "us"} | {
            part for name in peers.by_name for part in name.split()
        }
        content, _ = _content_words(_expand(work), names)
        if content < 2:
            return None  # "That's so sweet!", "Sounds awesome!"
        quote = work.find('"')
        if work.count('"') % 2 and quote > 0 and work[quote - 1].isalnum() and (
            quote + 1 == len(work) or not work[quote + 1].isalnum()
        ):
            work = '"' + work  # the span strip took the opening quote of a title
        speaker_name = message.speaker_name.strip() or speaker_key
        body = _separate_name(_rewrite(work, speaker_name, addressee_name,
                                       lead=f"{speaker_name} said ", names=_name_words(peers)),
                              speaker_name)
        # "Cooking is..." -> "said cooking is..."; a capital that may be a name stays
        if body[:1].isupper() and (low in _STOPWORDS or low in _UNRESOLVED or _is_adverb(low)
                                   or low.endswith("ing")):
            body = body[0].lower() + body[1:]
        verbless = not _has_finite_clause(work) and low not in _UNRESOLVED
        if verbless and _BARE_PREPOSITIONAL.match(work):
            return None
        joiner = " said: " if verbless else " said "
        if verbless and _elided_subject(toks) and " - " not in work \
                and not work.lstrip().startswith(('"', "'")) \
                and not re.match(r"\s*[-\u2013\u2014]", text[end:]):
            joiner = " is "  # "Driving for Ocado now": chat drops the "I'm"
        statement = _finish_statement(speaker_name + joiner + body)
        if _content_free(statement):
            return None
        confidence = _REPORT_CONFIDENCE - (_HEDGE_PENALTY if hedged else 0.0)
        # what was said is a fact about the speaker; "she loves painting" is no preference
        # of the speaker's, so no kind of the reported clause carries over
        return _claim(message, statement, speaker_key, "fact", confidence, clause,
                      relevant_from, relevant_until, (start, end))

    @staticmethod
    def _display_name(clause: str, text: str, key: str, peers: _Peers) -> str:
        """How the text itself names the addressee, else their fullest known name
        ("Melanie" rather than the alias "Mel"), titled."""
        for match in peers.find_all(text):
            if peers.key_for(match.group()) == key:
                return match.group()
        names = sorted((n for n, peer_key in peers.by_name.items() if peer_key == key),
                       key=lambda n: (-len(n), n))
        return names[0].title() if names else key


# A chat line that drops its "I'm" ("Driving for Ocado now", "Heading up the fraud team
# these days", "Starting a bootcamp in January") begins with a verb's -ing form and has
# no finite verb; a gerund subject ("Dancing makes me happy") has one, and an -ing
# adjective ("Amazing work!") is no verb of its own or takes no object after it.
_ING_ADJECTIVES = _wordset("""amazing interesting exciting boring stunning charming
inspiring relaxing refreshing surprising disappointing frustrating annoying confusing
embarrassing encouraging heartwarming touching moving rewarding fulfilling satisfying
challenging terrifying amusing shocking thrilling astonishing promising outstanding
willing loving caring daring""")
_ING_OBJECT = _DETERMINERS | _PREPOSITIONS | _wordset(
    "up out back off over down in on away home now around it them him her me us")


def _elided_subject(toks: list[str]) -> bool:
    # a long line that starts so is a gerund subject whose verb we missed ("Connecting
    # with good people ... really boosts your mood"); before a dash, a topic ("Taking in
    # kids in need - you're so kind")
    if len(toks) < 2 or len(toks) > 10:
        return False
    first, nxt = toks[0].lower(), toks[1].lower()
    if not first.endswith("ing") or len(first) < 6 or first in _ING_ADJECTIVES:
        return False
    return nxt in _ING_OBJECT and (_inflected(first, _VERB_BASES) or nxt in _DETERMINERS
                                   or nxt in ("up", "out", "back", "off", "over", "down"))


# ============================================================================================
# Documents
# ============================================================================================

def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentence offsets of prose: a period after an abbreviation ("St. Mary's", "Dr.") or
    an initial ends no sentence."""
    return _sentences(text)


@dataclass(frozen=True)
class DocumentStatement:
    statement: str
    kind: str
    relevant_from: datetime | None
    relevant_until: datetime | None


# Sentences of a document that are about the document, not the world.
_BOILERPLATE = re.compile(
    r"^(?:thank\s+you|thanks|welcome\s+to|see\s+(?:also|below|above)|table\s+of\s+contents"
    r"|contents|page\s+\d+|copyright|all\s+rights\s+reserved)\b", re.I)


_AND = re.compile(r",?\s+and\s+(?:(?:also|already|then|now|still|even)\s+)*")


def _shared_subject_parts(text: str) -> list[str]:
    """"Kofi leads the guild and mentors two engineers" -> "Kofi leads the guild",
    "Kofi mentors two engineers": two predicates of one subject are two claims. Only
    when the subject is a short noun phrase or name before the first verb and the word
    after "and" is a verb with something after it ("has cats and dogs" stays whole)."""
    tokens = _tokens(text)
    verb_at = next((i for i, t in enumerate(tokens[:5]) if i and _is_finite_verb_strict(
        t.lower())), None)
    if verb_at is None:
        return [text]
    first = tokens[0]
    if not (first[:1].isupper() or first.lower() in ("the", "a", "an", "our", "this")):
        return [text]
    subject = text[:_offset_of_token(text, verb_at)].strip()
    for match in _AND.finditer(text, _offset_of_token(text, verb_at)):
        right = text[match.end():]
        right_tokens = _tokens(right)
        left_tokens = _tokens(text[:match.start()])
        if (len(right_tokens) < 2 or right_tokens[0][:1].isupper()
                or not _is_finite_verb_strict(right_tokens[0].lower())
                or len(left_tokens) < verb_at + 2):
            continue
        return [text[:match.start()].rstrip(" ,") + ".",
                *_shared_subject_parts(f"{subject} {right}")]
    return [text]


def document_statements(sentence: str, occurred_at: datetime,
                        subject_names: Iterable[str] = ()) -> list[DocumentStatement]:
    """The claims of one declarative sentence of a document, about the scope (or the peer
    it starts with, named by ``subject_names``): one per predicate of its subject; dates
    that frame one become its valid time (the chat rules of step 5 with the version's time
    as the reference) and a relative one leaves the text or, when it is the claim, becomes
    an absolute date; kind by meaning as in step 4. None for a sentence without a finite
    verb or full stop ("Table of contents") or addressed to the reader ("Thank you for
    reading this handbook")."""
    local = _local(occurred_at)
    text = sentence.translate(_QUOTE_MAP).strip()
    if _BOILERPLATE.match(text) or not (_has_finite_clause(text) or text.endswith((".", "!"))):
        return []
    names = {part for name in subject_names for part in name.lower().split()}
    out: list[DocumentStatement] = []
    for part in _shared_subject_parts(text):
        hits = _find_dates(part, local)
        # A document's own absolute dates stay in its text (they name the thing: "the
        # incident on February 12"); relative ones leave it or become absolute, as in chat.
        relative = [hit for hit in hits if _REL.fullmatch(part[hit.start:hit.end]) is not None
                    or hit.replacement is not None]
        statement = _tidy(_remove_dates(part, relative) if relative else part).strip()
        if len(_tokens(statement)) < 2:
            continue
        relevant_from, relevant_until = _choose_window(hits)
        durative = relevant_from is not None and relevant_until is None
        kind = _kind(_expand(statement), _Subject("peer" if names else "scope", ""), names,
                     durative)
        out.append(DocumentStatement(_finish_statement(statement), kind, relevant_from,
                                     relevant_until))
    return out
