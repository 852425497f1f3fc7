"""What an agent pastes: a statement's time in words, and the source turn it came from.

Statements stay immutable; everything here is rendering at read time.

* **When.** `when_label` renders valid time (half-open `[relevant_from, relevant_until)`)
  at the precision extraction stored it: a day ("7 May 2023"), a calendar month ("May
  2023"), a calendar year ("2022"), another window by its first and last day ("29 May -
  4 June 2023"), or an open end ("since 7 May 2023", "until 12 June 2026"). A statement
  with no valid time is dated by when its source was said ("said 8 May 2023"): relative
  words were resolved against that moment at extraction, and an agent needs it to order
  events. With no source message either (a curator's or a document's statement) it is
  dated by when MemHouse recorded it ("recorded 5 December 2026"). Month names are
  spelled out so no reader takes 05/07 for July.
* **Source turns.** `source_turns` finds, per statement, the earliest source message the
  reader may see (`knowledge.selectors.visible_messages`: spoken by the reader, or every statement
  drawn from it visible to the reader - the rule the source-turn lane applies) and none
  of whose statements was refused, redacted, retracted or superseded, whoever reads: an
  excerpt must never bring back material governance took out of circulation. A claim
  refused only for carrying nothing (a fragment, small talk, noise, a repeat) took
  nothing out of circulation and does not count.
* **Lost detail.** Extraction rewrites a turn into short statements and moves dates into
  fields; names, objects and numbers the question asks about can be left behind.
  `lost_detail` says whether a turn holds content words its statement does not, and
  `excerpt` cuts the turn to its sentences nearest the statement and the query.
* **Follow-ups.** Chat leaves the detail to the next turn: "We celebrated her birthday
  with a concert!" - "Who performed?" - "It was Matt Patterson!". `follow_up` finds the
  same speaker's next turn in the session when only the other side's reply lies between,
  under the source-turn rule; ask shows it beside the lines it answers with.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet

from knowledge.models import Knowledge, KnowledgeSource, Message
from knowledge.selectors import visible_messages
from memhouse.core.principal import Reader
from retrieval.lexical import POSTGRES_ENGLISH_STOPWORDS, normalize_term

# States whose material must not come back through an excerpt of their source.
WITHDRAWN = ("rejected", "redacted", "retracted", "superseded")
# Refusals that say a claim carried nothing worth keeping ("Here's a pic!", "ok thanks",
# a repeat), not that its material must stay out: such a rejected claim does not withdraw
# its turn, whose other sentences may hold the answer ("The basil. It survived, mostly.").
CONTENT_FREE_REFUSALS = ("f4_gate_a_fragment", "f4_gate_a_phatic", "f4_gate_a_noise",
                         "f4_gate_a_duplicate")
EXCERPT_CHARS = 300
# Under a context line, a turn that adds fewer content words than this is not worth its
# characters: the budget goes to the next line instead. Chosen by leave-one-conversation-
# out on LoCoMo dev (1, 3, 5, 8, 12 tried; 5 won every fold; bench/README.md).
CONTEXT_MIN_LOST_WORDS = 5
# A follow-up is the speaker's next turn at most this many turns on: straight after the
# other side's reply or question (two people taking turns), not a later topic.
FOLLOW_UP_WITHIN = 2
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")
# Words that carry no answer on their own: PostgreSQL's English stop words (the lexical
# strategy's list) plus chat filler that LoCoMo-like turns are full of, so "detail" means
# names, objects, numbers and content verbs.
_FILLER = frozenset({
    "yeah", "yes", "oh", "wow", "hey", "hi", "lol", "haha", "really", "thanks", "thank",
    "awesome", "great", "cool", "nice", "totally", "definitely", "sure", "okay", "ok", "um",
    "uh", "like", "get", "got", "going", "gonna", "know", "think", "thing", "things", "lot",
    "much", "well", "glad", "good", "love", "hear", "hope", "sounds", "sound", "feel",
    "feels", "felt", "make", "made", "way", "always", "also", "just"})
_STOP = POSTGRES_ENGLISH_STOPWORDS | _FILLER


def _day(d: datetime) -> str:
    return f"{d.day} {_MONTHS[d.month - 1]} {d.year}"


def _utc(d: datetime) -> datetime:
    return d.astimezone(UTC) if d.tzinfo else d.replace(tzinfo=UTC)


def _midnight(d: datetime) -> bool:
    return (d.hour, d.minute, d.second, d.microsecond) == (0, 0, 0, 0)


def _to_local_midnight(d: datetime) -> timedelta:
    """The shift that puts `d` on a midnight. Extraction opens windows at local midnight
    of the speaker's zone and the database returns UTC, so 7 May at -05:00 comes back as
    05:00 UTC: shifting by the zone recovers the speaker's calendar day."""
    tod = d - d.replace(hour=0, minute=0, second=0, microsecond=0)
    return timedelta(days=1) - tod if tod > timedelta(hours=12) else -tod


def when_label(relevant_from: datetime | None, relevant_until: datetime | None,
               said_at: datetime | None = None, recorded_at: datetime | None = None
               ) -> str | None:
    """The statement's time in absolute words (module doc), or None when none is known."""
    start = _utc(relevant_from) if relevant_from else None
    end = _utc(relevant_until) if relevant_until else None
    edge = start or end
    shift = _to_local_midnight(edge) if edge else timedelta(0)
    start = start + shift if start else None
    end = end + shift if end else None
    if start and end:
        last = end - timedelta(days=1) if _midnight(end) else end
        if last.date() <= start.date():
            return _day(start)
        if start.day == 1 and _midnight(start) and _midnight(end) and end.day == 1:
            months = (end.year - start.year) * 12 + end.month - start.month
            if months == 1:
                return f"{_MONTHS[start.month - 1]} {start.year}"
            if months == 12 and start.month == 1:
                return str(start.year)
        if start.year == last.year:
            head = (str(start.day) if start.month == last.month
                    else f"{start.day} {_MONTHS[start.month - 1]}")
            return f"{head} - {_day(last)}"
        return f"{_day(start)} - {_day(last)}"
    if start:
        return f"since {_day(start)}"
    if end:
        return f"until {_day(end)}"
    if said_at:
        return f"said {_day(_utc(said_at))}"
    if recorded_at:
        return f"recorded {_day(_utc(recorded_at))}"
    return None


def when_of(k: Knowledge, said: dict[str, datetime]) -> str | None:
    """`when_label` of a statement row, given `said_at_of` for it."""
    return when_label(k.relevant_from, k.relevant_until, said.get(str(k.id)), k.inserted_at)


def said_label(said_at: datetime) -> str:
    return _day(_utc(said_at))


@dataclass(frozen=True)
class Turn:
    """A source message as an excerpt may show it."""

    message_id: uuid.UUID
    speaker: str
    said_at: datetime
    text: str


def _quotable(reader: Reader, scope_ids: Sequence[Any]) -> QuerySet[Message]:
    """The source-turn rule (module doc): messages the reader may see whole and that no
    withdrawn statement came from, whoever reads."""
    # Uncorrelated, so PostgreSQL reads it once into a hash (a correlated NOT EXISTS was
    # planned as a nested loop per message when the statistics were stale: see
    # source_turns); message_id IS NOT NULL keeps NOT IN exact (document sources have none).
    withdrawn = KnowledgeSource.objects.filter(
        message_id__isnull=False,
        knowledge__in=Knowledge.objects.filter(state__in=WITHDRAWN).exclude(
            state="rejected", state_reason__in=CONTENT_FREE_REFUSALS).values("id"))
    return visible_messages(reader=reader, scope_ids=scope_ids).exclude(
        id__in=withdrawn.values("message_id"))


def source_turns(reader: Reader, scope_ids: Sequence[Any], statement_ids: Iterable[str]
                 ) -> dict[str, Turn]:
    """Per statement id, its earliest source message the reader may see and that no
    withdrawn statement came from (module doc). One query."""
    ids = list(dict.fromkeys(str(i) for i in statement_ids))
    if not ids:
        return {}
    sources = KnowledgeSource.objects.filter(knowledge_id__in=ids, message__isnull=False)
    # The visibility rule is read for these statements' turns only, not for every message
    # of the Account: planned from statistics taken before an Account's rows arrived
    # (one row each), the whole-Account form nested three loops over its messages,
    # sources and statements and ran for minutes on 280 rows (a CI run); the rows are
    # the same either way.
    quotable = _quotable(reader, scope_ids).filter(id__in=sources.values("message_id"))
    rows = (sources.filter(message_id__in=quotable.values("id"))
            .order_by("knowledge_id", "message__occurred_at", "message__inserted_at",
                      "message_id")
            .values_list("knowledge_id", "message_id", "message__peer__display_name",
                         "message__occurred_at", "message__text"))
    out: dict[str, Turn] = {}
    for kid, mid, speaker, said_at, text in rows:
        out.setdefault(str(kid), Turn(mid, speaker, said_at, text))
    return out


def follow_up(reader: Reader, scope_ids: Sequence[Any], turn: Turn) -> Turn | None:
    """The same speaker's next turn in `turn`'s session when it comes at most
    FOLLOW_UP_WITHIN turns later, if the reader may see it and no withdrawn statement came
    from it (the source-turn rule). Messages without a session have no follow-up: order
    across a scope says nothing about replies. Two small queries."""
    src = (Message.objects.filter(pk=turn.message_id)
           .values_list("session_id", "peer_id", "occurred_at", "inserted_at").first())
    if src is None or src[0] is None:
        return None
    session_id, peer_id, occurred_at, inserted_at = src
    later = (Message.objects.filter(session_id=session_id)
             .filter(Q(occurred_at__gt=occurred_at)
                     | Q(occurred_at=occurred_at, inserted_at__gt=inserted_at))
             .order_by("occurred_at", "inserted_at", "id")
             .values_list("id", "peer_id")[:FOLLOW_UP_WITHIN])
    nxt = next((mid for mid, peer in later if peer == peer_id), None)
    if nxt is None:
        return None
    row = (_quotable(reader, scope_ids).filter(pk=nxt)
           .values_list("id", "peer__display_name", "occurred_at", "text").first())
    return Turn(*row) if row is not None else None


def said_at_of(statement_ids: Iterable[str]) -> dict[str, datetime]:
    """When each statement's earliest source message was said (for its date only: no text
    is read, so no visibility rule beyond the statement's own applies)."""
    ids = list(dict.fromkeys(str(i) for i in statement_ids))
    out: dict[str, datetime] = {}
    for kid, said in (KnowledgeSource.objects.filter(knowledge_id__in=ids,
                                                     message__isnull=False)
                      .order_by("knowledge_id", "message__occurred_at")
                      .values_list("knowledge_id", "message__occurred_at")):
        out.setdefault(str(kid), said)
    return out


def content_words(text: str) -> set[str]:
    """Lower-cased words that can carry an answer (not function words or filler)."""
    return {w for w in (t.lower().strip("'-") for t in _TOKEN.findall(text))
            if w and w not in _STOP and (len(w) > 2 or w.isdigit())}


def stems(text: str) -> set[str]:
    """Content words normalised as the lexical strategy compares terms."""
    return {normalize_term(w) for w in content_words(text)}


def lost_detail(statement: str, turn_text: str, *, min_words: int = 1) -> bool:
    """True when the turn holds at least `min_words` content words its statement lacks
    (compared as the lexical strategy compares terms, so "paints"/"painted" are one word;
    first-person words are function words, and the speaker is named in the excerpt)."""
    return len(stems(turn_text) - stems(statement)) >= min_words


def excerpt(turn_text: str, *, anchor: str, query: str = "",
            limit: int = EXCERPT_CHARS) -> str:
    """The turn cut to at most `limit` characters: whole when it fits, else the run of
    sentences around the one sharing the most words with the statement and the query
    (the next sentence first: a turn says what it is about, then the detail), with "..."
    where the turn goes on."""
    text = " ".join(turn_text.split())
    if len(text) <= limit:
        return text
    sentences = [s for s in _SENTENCE.split(text) if s]
    want = stems(f"{anchor} {query}")
    best = max(range(len(sentences)), key=lambda i: (len(want & stems(sentences[i])), -i))
    lo = hi = best

    def render(lo: int, hi: int) -> str:
        return (("... " if lo > 0 else "") + " ".join(sentences[lo:hi + 1])
                + (" ..." if hi < len(sentences) - 1 else ""))

    if len(render(lo, hi)) > limit:  # one long sentence: cut at a word boundary
        cut = sentences[best][: limit - 8].rsplit(" ", 1)[0]
        return ("... " if best > 0 else "") + f"{cut} ..."
    grew = True
    while grew:
        grew = False
        for nlo, nhi in ((lo, hi + 1), (lo - 1, hi)):
            if nlo >= 0 and nhi < len(sentences) and len(render(nlo, nhi)) <= limit:
                lo, hi, grew = nlo, nhi, True
                break
    return render(lo, hi)


def quote_for(statement: str, turn: Turn | None, *, query: str, min_words: int = 1
              ) -> str | None:
    """The excerpt of `turn` to show beside `statement`, or None when there is no turn or
    it adds fewer than `min_words` content words (context and ask share this rule)."""
    if turn is None or not lost_detail(statement, turn.text, min_words=min_words):
        return None
    return excerpt(turn.text, anchor=statement, query=query)


def turn_line(turn: Turn, text: str) -> str:
    """'[8 May 2023] Caroline: text' - dated and with its speaker, as a transcript."""
    return f'[{said_label(turn.said_at)}] {turn.speaker}: "{text}"'
