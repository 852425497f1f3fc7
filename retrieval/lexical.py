"""The lexical query analyzer ``lexical-question-v2`` and its proximity bonus.

Plain text becomes an "any of these terms" full-text query: a statement matches when it
shares any kept term, and PostgreSQL's ``ts_rank_cd`` ranks by coverage and closeness. The
analyzer removes only a small, reviewed set of English interrogative boilerplate (below); it
keeps names, numbers, dates, negation and quoted text, and expands nothing with synonyms.

Three PostgreSQL websearch operators switch the whole query to websearch parsing, where bare
terms must all appear in one statement: a double-quoted phrase, ``-term`` (a minus directly
before a word or phrase, at the start or after whitespace), and the bare word ``or`` between
two terms.

Nothing here touches the database. :func:`analyze` returns the string to bind as the single
parameter of ``to_tsquery('english', %s)`` (mode ``"any"``) or
``websearch_to_tsquery('english', %s)`` (mode ``"websearch"``). In mode ``"any"`` the string
consists only of letters, digits, spaces and ``|``, so no user text can inject a tsquery
operator.

The analyzer version travels in the content-free operator diagnostic
(:meth:`LexicalQuery.diagnostic`) so a ranking can be reproduced without recording the query.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

__all__ = [
    "ANALYZER_VERSION",
    "BOILERPLATE_PHRASES",
    "BOILERPLATE_WORDS",
    "LEADING_COPULAS",
    "POSTGRES_ENGLISH_STOPWORDS",
    "LexicalQuery",
    "analyze",
    "apply_proximity_bonus",
    "normalize_term",
    "proximity_bonus",
]

ANALYZER_VERSION = "lexical-question-v2"

Mode = Literal["any", "websearch", "empty"]

# ---------------------------------------------------------------------------------------
# The reviewed boilerplate set. Keep it short and explicit: every entry is a word or phrase
# that only carries the *form* of an English question or request, never its subject. Any
# change here changes rankings, so it needs a new ANALYZER_VERSION.
# Deliberately absent: negation (not, no, never, nor, n't), numbers, month and day names,
# pronouns and every other content word.
# ---------------------------------------------------------------------------------------

# Removed wherever they stand alone.
BOILERPLATE_WORDS: frozenset[str] = frozenset(
    {
        # interrogatives
        "what", "when", "where", "who", "whom", "whose", "which", "why", "how",
        # auxiliaries that carry the question form
        "do", "does", "did", "can", "could", "would", "should", "will",
        # hedges and politeness
        "about", "please",
    }
)  # fmt: skip

# Removed only in question-leading position: at the start of a clause, or directly after
# other leading boilerplate ("Is Alice ...", "Where was ..."). "Alice is vegetarian" keeps it.
LEADING_COPULAS: frozenset[str] = frozenset({"is", "are", "was", "were"})

# Multi-word boilerplate, removed wherever the whole sequence occurs (matches may overlap,
# so "do you know" is covered by "do you" + "you know").
BOILERPLATE_PHRASES: frozenset[tuple[str, ...]] = frozenset(
    {
        ("do", "you", "remember"),
        ("tell", "me"),
        ("you", "know"),
        ("kind", "of"),
        ("sort", "of"),
        # "<auxiliary> you ..." requests: "can you", "could you", "did you", ...
        ("do", "you"),
        ("did", "you"),
        ("can", "you"),
        ("could", "you"),
        ("would", "you"),
        ("will", "you"),
    }
)

# PostgreSQL's english.stop (the Snowball list, 127 words). The 'english' configuration
# drops these from every tsvector and tsquery, so they can never be "your terms" in a
# match; the proximity bonus ignores them for the same reason (otherwise "the" near "of"
# would earn it in nearly every statement). This is not used to remove query terms.
_POSTGRES_ENGLISH_STOP = """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will
    just don should now
"""
POSTGRES_ENGLISH_STOPWORDS: frozenset[str] = frozenset(_POSTGRES_ENGLISH_STOP.split())

# Clitics that follow an apostrophe and carry no searchable content of their own.
_CLITICS = frozenset({"s", "m", "re", "ve", "ll", "d"})
# Irregular "n't" bases: can't, won't, shan't, ain't.
_NT_BASES = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}

_QUOTE_TRANSLATION = str.maketrans(
    {
        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
        "\u00ab": '"', "\u00bb": '"',
        "\u2018": "'", "\u2019": "'", "\u201b": "'", "\u2032": "'",
    }
)  # fmt: skip

# A word: letters/digits, optionally joined by internal apostrophes (o'brien, didn't).
_WORD = r"[^\W_]+(?:'[^\W_]+)*"
_WORD_RE = re.compile(_WORD)
_ALNUM_RE = re.compile(r"[^\W_]+")
_TOKEN_RE = re.compile(
    rf"""
    (?P<neg>(?<!\S)-)?              # websearch exclusion: minus at start or after whitespace
    (?:
        "(?P<phrase>[^"]*)"         # a closed double-quoted phrase
      | (?P<word>{_WORD})
    )
  | (?P<boundary>[?.!;])            # clause boundary (resets "leading position")
    """,
    re.VERBOSE,
)
# Characters that glue a word into a larger token (e-mail, URL, path, hyphenated word) when
# another word follows on the far side: boilerplate glued this way is content, not removed.
_JOINERS = frozenset("@./\\-_+&='#:%$")


@dataclass(frozen=True)
class LexicalQuery:
    """The analysed query. Holds query text: never log it; log :meth:`diagnostic`."""

    version: str
    mode: Mode
    terms: tuple[str, ...]
    """Kept positive terms, lower-cased, first-occurrence order, deduplicated (words of
    quoted phrases included)."""
    negations: tuple[str, ...]
    """Terms and phrases excluded with the websearch ``-`` operator."""
    phrases: tuple[str, ...]
    """Positive double-quoted phrases, lower-cased, words separated by single spaces."""
    tsquery: str
    """Mode ``any``: operand for ``to_tsquery('english', %s)``; mode ``websearch``: operand
    for ``websearch_to_tsquery('english', %s)``; mode ``empty``: ``""`` (run no query)."""

    @property
    def is_empty(self) -> bool:
        return self.mode == "empty"

    def diagnostic(self) -> dict[str, object]:
        """Content-free description, safe for operator diagnostics."""
        return {
            "analyzer": self.version,
            "mode": self.mode,
            "term_count": len(self.terms),
            "phrase_count": len(self.phrases),
            "negation_count": len(self.negations),
        }


@dataclass
class _Piece:
    """One searchable word produced by a raw word token (a contraction may give two)."""

    text: str
    token: int  # index into _Token list
    removed: bool = False


@dataclass
class _Token:
    kind: Literal["word", "phrase", "boundary"]
    start: int
    end: int
    raw: str
    negated: bool = False
    standalone: bool = True
    is_or_operator: bool = False
    pieces: tuple[str, ...] = ()


def _normalise_text(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_QUOTE_TRANSLATION)


def _split_word(word: str) -> tuple[str, ...]:
    """Lower-case a raw word and expand contractions into searchable pieces.

    ``didn't`` -> (did, not); ``can't`` -> (can, not); ``cannot`` -> (can, not);
    ``alice's`` -> (alice,); ``i'm`` -> (i,); ``o'brien`` -> (o'brien,).
    """
    lowered = word.lower()
    if lowered == "cannot":
        return ("can", "not")
    if lowered.endswith("n't") and len(lowered) > 3:
        base = lowered[:-3]
        return (_NT_BASES.get(base, base), "not")
    if "'" in lowered:
        base, _, clitic = lowered.rpartition("'")
        if clitic in _CLITICS and base:
            return (base,)
    return (lowered,)


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    for match in _TOKEN_RE.finditer(text):
        if match.group("boundary") is not None:
            tokens.append(_Token("boundary", match.start(), match.end(), match.group(0)))
            continue
        negated = match.group("neg") is not None
        phrase = match.group("phrase")
        if phrase is not None:
            words = tuple(w.lower() for w in _WORD_RE.findall(phrase))
            if not words:
                continue  # "" or a quote around punctuation only: nothing to match
            tokens.append(
                _Token("phrase", match.start(), match.end(), match.group(0), negated, pieces=words)
            )
            continue
        start, end = match.start("word"), match.end("word")
        standalone = not (_glued(text, start - 1, -1) or _glued(text, end, 1))
        raw = match.group("word")
        tokens.append(
            _Token("word", match.start(), end, raw, negated, standalone, pieces=_split_word(raw))
        )
    _mark_or_operators(tokens)
    return tokens


def _glued(text: str, at: int, step: int) -> bool:
    """Whether a joiner at ``at`` glues the word to another word on the far side."""
    far = at + step
    if not (0 <= at < len(text) and 0 <= far < len(text)):
        return False
    return text[at] in _JOINERS and text[far].isalnum()


def _mark_or_operators(tokens: list[_Token]) -> None:
    """``or`` is the websearch OR operator when it stands between two terms."""
    content = [t for t in tokens if t.kind != "boundary"]
    for i, token in enumerate(content):
        if (
            token.kind == "word"
            and not token.negated
            and token.raw.lower() == "or"
            and 0 < i < len(content) - 1
            and not _is_bare_or(content[i - 1])
            and not _is_bare_or(content[i + 1])
        ):
            token.is_or_operator = True


def _is_bare_or(token: _Token) -> bool:
    return token.kind == "word" and not token.negated and token.raw.lower() == "or"


def _mark_boilerplate(tokens: list[_Token]) -> list[_Piece]:
    """Split plain words into pieces and mark the boilerplate ones as removed.

    Only positive, standalone, unquoted words are candidates; quoted phrases, negated
    terms, operators and glued words (e-mail, hyphenated) are never touched, and they end
    the run of candidates, so no boilerplate phrase is matched across them.
    """
    pieces: list[_Piece] = []
    # (pieces of one run of consecutive candidates, whether the run starts a clause)
    runs: list[tuple[list[_Piece], bool]] = [([], True)]
    for index, token in enumerate(tokens):
        if token.kind == "boundary":
            runs.append(([], True))
            continue
        if token.kind != "word" or token.negated or token.is_or_operator:
            runs.append(([], False))
            continue
        for text in token.pieces:
            piece = _Piece(text, index)
            pieces.append(piece)
            if token.standalone:
                runs[-1][0].append(piece)
        if not token.standalone:
            runs.append(([], False))
    for run, starts_clause in runs:
        _mark_run(run, starts_clause)
    return pieces


def _mark_run(run: list[_Piece], starts_clause: bool) -> None:
    words = [p.text for p in run]
    for start in range(len(words)):
        for phrase in BOILERPLATE_PHRASES:
            if tuple(words[start : start + len(phrase)]) == phrase:
                for piece in run[start : start + len(phrase)]:
                    piece.removed = True
    for piece in run:
        if piece.text in BOILERPLATE_WORDS:
            piece.removed = True
    if not starts_clause:
        return
    # Copulas go only while the clause has shown nothing but boilerplate so far.
    for piece in run:
        if piece.text in LEADING_COPULAS:
            piece.removed = True
        elif not piece.removed:
            break


def analyze(query: str) -> LexicalQuery:
    """Analyse a user query with ``lexical-question-v2``."""
    text = _normalise_text(query)
    tokens = _tokenize(text)
    pieces = _mark_boilerplate(tokens)

    websearch = any(t.kind == "phrase" or t.negated or t.is_or_operator for t in tokens)

    terms: list[str] = []
    negations: list[str] = []
    phrases: list[str] = []
    kept_pieces: dict[int, list[str]] = {}
    for piece in pieces:
        if not piece.removed:
            kept_pieces.setdefault(piece.token, []).append(piece.text)

    for index, token in enumerate(tokens):
        if token.kind == "phrase":
            phrase = " ".join(token.pieces)
            if token.negated:
                _append_unique(negations, phrase)
            else:
                _append_unique(phrases, phrase)
                for word in token.pieces:
                    _append_unique(terms, word)
        elif token.kind == "word":
            if token.negated:
                for word in token.pieces:
                    _append_unique(negations, word)
            elif token.is_or_operator and websearch:
                continue
            else:
                for word in kept_pieces.get(index, ()):
                    _append_unique(terms, word)

    if not terms:
        # Nothing positive to look for (boilerplate only, or exclusions only): a lexical
        # strategy that returned "everything without X" would not be evidence about the
        # question, so it runs no query at all.
        return LexicalQuery(ANALYZER_VERSION, "empty", (), tuple(negations), tuple(phrases), "")

    if websearch:
        tsquery = _websearch_text(text, tokens, kept_pieces)
        return LexicalQuery(
            ANALYZER_VERSION, "websearch", tuple(terms), tuple(negations), tuple(phrases), tsquery
        )

    operands: list[str] = []
    for term in terms:
        for part in _ALNUM_RE.findall(term):
            _append_unique(operands, part)
    return LexicalQuery(
        ANALYZER_VERSION, "any", tuple(terms), (), tuple(phrases), " | ".join(operands)
    )


def _websearch_text(text: str, tokens: list[_Token], kept: dict[int, list[str]]) -> str:
    """The user's text with removed boilerplate cut out and contractions expanded.

    Everything else - quotes, minus signs, ``or``, punctuation, e-mail addresses - stays
    verbatim so PostgreSQL parses it exactly as the user wrote it.
    """
    out: list[str] = []
    cursor = 0
    for index, token in enumerate(tokens):
        if token.kind != "word" or token.negated or token.is_or_operator:
            continue
        kept_words = kept.get(index, [])
        if kept_words == [token.raw.lower()]:
            continue  # an untouched plain word stays verbatim
        # Removed boilerplate is cut out; a contraction becomes its kept pieces
        # ("didn't" -> "not", "I'm" -> "i"), which PostgreSQL would otherwise index as
        # stray lexemes such as 'didn' or 'm' that every statement would have to contain.
        out.append(text[cursor : token.start])
        out.append(" ".join(kept_words) if kept_words else " ")
        cursor = token.end
    out.append(text[cursor:])
    return " ".join("".join(out).split())


def _append_unique(items: list[str], value: str) -> None:
    if value not in items:
        items.append(value)


# ---------------------------------------------------------------------------------------
# Proximity bonus
# ---------------------------------------------------------------------------------------

_UNDOUBLE = frozenset("bdfgmnprt")
_SUFFIXES = (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""))
_MIN_STEM = 3


def normalize_term(word: str) -> str:
    """Light, consistent normalisation used to compare query terms with statement words.

    Lower-cases, drops a possessive/clitic, strips one of -ies/-ied (to -y), -ing, -ed,
    -es, -s (never leaving fewer than three characters, never from -ss), undoubles a final
    consonant left by -ing/-ed (running -> run), and drops a final -e (hike, hikes, hiked,
    hiking -> hik). Applied identically to both sides, it only has to be consistent.
    """
    w = word.lower()
    if "'" in w:
        base, _, clitic = w.rpartition("'")
        if clitic in _CLITICS and base:
            w = base
    for suffix, replacement in _SUFFIXES:
        if not w.endswith(suffix):
            continue
        if suffix == "s" and w.endswith("ss"):
            break
        stem = w[: -len(suffix)] + replacement
        if len(stem) < _MIN_STEM:
            continue
        w = stem
        if suffix in ("ing", "ed") and len(w) > _MIN_STEM and w[-1] == w[-2] and w[-1] in _UNDOUBLE:
            w = w[:-1]
        break
    if w.endswith("e") and len(w) > _MIN_STEM:
        w = w[:-1]
    return w


def _bonus_terms(terms: Sequence[str]) -> frozenset[str]:
    result: set[str] = set()
    for term in terms:
        for word in _WORD_RE.findall(_normalise_text(term)):
            lowered = word.lower()
            if lowered in POSTGRES_ENGLISH_STOPWORDS:
                continue
            result.add(normalize_term(lowered))
    return frozenset(result)


def _has_close_pair(statement: str, wanted: frozenset[str], window: int) -> bool:
    last_seen: dict[str, int] = {}
    for position, word in enumerate(_WORD_RE.findall(_normalise_text(statement))):
        norm = normalize_term(word)
        if norm in wanted:
            for other, seen_at in last_seen.items():
                if other != norm and position - seen_at <= window:
                    return True
            last_seen[norm] = position
    return False


def proximity_bonus(
    statement: str, terms: Sequence[str], *, window: int = 8, bonus: float = 0.1
) -> float:
    """``bonus`` if two distinct query terms occur within ``window`` words, else 0.0.

    Terms are compared after :func:`normalize_term`, so "hike" and "hiking" are the same
    term and do not pair with each other. PostgreSQL English stopwords are ignored: they are
    never part of a full-text match. The bonus is bounded: it is earned once, not per pair.
    """
    if window < 1:
        raise ValueError("window must be at least 1")
    if bonus < 0:
        raise ValueError("bonus must not be negative")
    wanted = _bonus_terms(terms)
    if len(wanted) < 2:
        return 0.0
    return bonus if _has_close_pair(statement, wanted, window) else 0.0


IdT = TypeVar("IdT", bound=Hashable)


def apply_proximity_bonus(
    ranked: Sequence[tuple[IdT, float, str]],
    terms: Sequence[str],
    *,
    head: int = 20,
    window: int = 8,
    bonus: float = 0.1,
) -> list[tuple[IdT, float]]:
    """Add the proximity bonus to the first ``head`` matches and re-rank that head.

    ``ranked`` is best-first ``(id, score, statement)``. Only the head competes for the
    bonus; the rest keeps its scores and its place after the head, so a statement further
    down can never be promoted by proximity. The head is re-sorted by the new score with a
    stable sort (equal scores keep their input order).
    """
    if head < 0:
        raise ValueError("head must not be negative")
    wanted = _bonus_terms(terms)
    top: list[tuple[IdT, float]] = []
    for item_id, score, statement in ranked[:head]:
        earned = 0.0
        if len(wanted) >= 2:
            earned = proximity_bonus(statement, terms, window=window, bonus=bonus)
        top.append((item_id, score + earned))
    top.sort(key=lambda item: item[1], reverse=True)
    return top + [(item_id, score) for item_id, score, _ in ranked[head:]]
