"""Gate A's model-free junk test: is a proposed statement worth remembering?

Three families, each with its own rejection reason (rejected rows keep their provenance
as decision evidence):

* ``f4_gate_a_machine_output``: logs, metrics and health checks, heartbeats, cron
  reports, JSON / YAML / XML payloads, stack traces, boot and config-load lines, tool-call
  echoes and system-prompt restatements. Judged on the source text (the whole message and
  the claim's own evidence span), because the extractor has already reworded the claim.
* ``f4_gate_a_phatic``: acknowledgements, greetings and pings ("ok", "thanks!"; a bare
  "ping" is also a heartbeat, and machine output is judged first).
* ``f4_gate_a_fragment``: what is left after splitting carries no content ("Sam said:
  no changes.", "Sam is done."), or says only that something is shown or liked without
  saying what ("Sam said here's a pic.", "Sam is a fan.").

Behind these rules (a high-precision first pass), ``learned_reason`` asks a linear model
trained on real program output against human chat (knowledge.ingest.junk_classifier):
``f4_gate_a_classifier`` is machine output of a shape no rule describes.

Written by hand rather than with an NLP library: the signals are structural (does it parse
as JSON, does a line start with a timestamp and a log level, is it a Python or Java
trace) plus short word lists, and no packaged model classifies machine output. A
first-person human sentence is kept unless the evidence is structural, so "I work on the
logging team" or "my cron job backs up my photos" stay facts about a person.
"""

from __future__ import annotations

import functools
import json
import re
from typing import TYPE_CHECKING

from memhouse.core.needles import lowered, may_match, needles

if TYPE_CHECKING:
    from knowledge.ingest.junk_classifier import JunkClassifier

MACHINE_OUTPUT = "f4_gate_a_machine_output"
PHATIC = "f4_gate_a_phatic"
FRAGMENT = "f4_gate_a_fragment"
CLASSIFIER = "f4_gate_a_classifier"

_I = re.IGNORECASE
_APOS = "'\u2019"  # straight and typographic apostrophes


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_M = re.MULTILINE

# --- structural evidence: machine output whoever "says" it ---------------------------------

_STACK_TRACE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|^\s*File \"[^\"]+\", line \d+"
    r"|^\s+at [\w$.<>]+\([\w$.]*(?:\.java|\.kt|\.scala)?:?\d*\)"  # Java / Kotlin frames
    r"|^\s+at .+\(?[\w./\\-]+\.(?:js|ts|mjs|cjs):\d+:\d+\)?"  # JavaScript frames
    r"|^Exception in thread \""
    r"|^panic: |^goroutine \d+ \["
    r"|^\s*(?:(?:Uncaught|Unhandled|Fatal|E)\s+)?(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)"
    r"(?::|$)"  # ValueError: bad / KeyError / Uncaught TypeError: ...
    , _M)
_TIMESTAMP = (r"(?:\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
              r"|[A-Z][a-z]{2} {1,2}\d{1,2} \d{2}:\d{2}:\d{2}"  # syslog
              r"|\[\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}\]"  # access log
              r"|\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)")
_LEVEL = r"(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|CRITICAL|FATAL|SEVERE)"
_LOG_LINE = re.compile(
    rf"^\s*\[?{_TIMESTAMP}\]?\s"  # a line that starts with a timestamp
    rf"|^\s*\[?{_LEVEL}\]?[:\s]"  # or with a log level
    rf"|\s\[?{_LEVEL}\]?\s+[\w./-]+(?::\d+)?[:\s]"  # "... INFO worker.py:88 ..."
    r"|\blevel=(?:trace|debug|info|warn|warning|error|fatal)\b"
    r"|\"(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) /\S* HTTP/\d(?:\.\d)?\" \d{3}"
    r"|^\s*\[[\w.-]+\]\s+\d{1,3}(?:\.\d{1,3}){3}\b"  # "[nginx] 127.0.0.1 ..."
    , _M)
_KEY_VALUE = re.compile(r"\b[\w.-]+=[\w.%/:-]+")
_XML = re.compile(r"^\s*<([A-Za-z][\w:.-]*)(?:\s[^>]*)?>.*</\1>\s*$|^\s*<\?xml", re.DOTALL)
_YAML_LINE = re.compile(r"^\s*(?:- )?[\w.-]+:(?:\s+[^\s].*)?$")

# --- lexical evidence: machine output unless a person speaks of themself -------------------

_METRIC = re.compile(
    r"\b(?:cpu|disk|mem|memory|ram|swap|load(?: average)?|latency|uptime|iops|qps|rps"
    r"|p50|p95|p99|throughput|heap|inodes?|bandwidth|error rate|queue depth)\b"
    r"[^.]{0,24}?\d+(?:\.\d+)?\s*(?:%|ms|s|mb|gb|kb|tb|/s)?"
    r"|\d+(?:\.\d+)?\s*%\s*(?:full|used|free|idle|cpu|util)", _I)
_HEALTH = re.compile(
    r"\b(?:heartbeat|health ?check|healthz|readyz|liveness|readiness|keep-?alive)\b"
    r"|\bstatus[:=]\s*(?:ok|up|green|healthy|pass(?:ing)?)\b"
    r"|\ball systems (?:operational|nominal)\b|^\s*(?:ping|pong)\s*[.!?]*\s*$", _I | _M)
_CRON = re.compile(
    r"\bcron(?:tab)?\b[:\s]|\bexit (?:code|status) -?\d+\b"
    r"|\b(?:job|task|run|build|backup|sync|deploy(?:ment)?|pipeline)\b[^.]{0,40}?"
    r"\b(?:finished|completed|succeeded|failed|done)\b[^.]{0,20}?\bin \d+(?:\.\d+)?\s*"
    r"(?:ms|s|sec|seconds|m|min)\b"
    r"|\b\d+ (?:files|rows|records|objects|items|contacts|messages|emails|events|entries"
    r"|documents|tickets|users) (?:processed|synced|copied|uploaded|written|deleted|indexed"
    r"|imported|exported|fetched|backed up)\b"
    r"|^\W*(?:synced|processed|copied|uploaded|indexed|imported|exported|fetched|backed up"
    r"|archived|deleted|purged) \d+ \w+"
    r"|\b\d+ (?:succeeded|failed|passed|skipped|errors?|warnings?)\b[,;]\s*\d+ (?:succeeded"
    r"|failed|passed|skipped|errors?|warnings?)\b", _I | _M)
_BOOT = re.compile(
    r"\b(?:session|state|cache|snapshot|checkpoint) (?:restored|loaded|saved|flushed)\b"
    r"|\b\d+ (?:plugins?|modules?|extensions?|handlers?|workers?|routes?|models?|tools?)"
    r" (?:registered|loaded|initiali[sz]ed|started|mounted|enabled)\b"
    r"|\b(?:registered|loaded|initiali[sz]ed|started|mounted|enabled) \d+ (?:plugins?|modules?"
    r"|extensions?|handlers?|workers?|routes?|models?|tools?)\b"
    r"|\blistening on (?:port |https?://|\d|\[|0\.0\.0\.0|localhost)"
    r"|\b(?:server|service|daemon|worker|app(?:lication)?) (?:started|starting|ready|"
    r"stopped|shutting down|booted)\b"
    r"|\b(?:loaded|loading|reloaded|parsed|read) (?:config(?:uration)?|settings|env(?:ironment)?)"
    r"(?: file)? from\b|\bconfig(?:uration)? (?:loaded|reloaded|parsed)\b"
    r"|\bmigrations? (?:applied|complete)\b|\bready in \d+(?:\.\d+)?\s*m?s\b"
    r"|\b(?:initiali[sz]ation|startup|boot) (?:complete|completed|finished|done)\b"
    r"|\bshutting down(?: gracefully)?\b|\bgraceful(?:ly)? shut ?down\b"
    r"|\breceived sig[a-z]{2,5}\b|\bsig(?:term|kill|int|hup|segv) received\b", _I)
_TOOL_ECHO = re.compile(
    r"\b(?:calling|invoking|running|executing) (?:the )?(?:tool|function)\b"
    r"|\b(?:tool|function)[_ ]call\b|\btool[_ ]result\b|\"(?:tool|tool_name|function"
    r"|arguments|args|tool_calls)\"\s*:|</?tool_call>|^\s*\[tool[:\]]"
    r"|\b\w+\((?:\w+=[^,()]+,?\s*)+\)\s*(?:->|returned)"
    r"|\b(?:function|tool|method|api|endpoint|call) [\w.]*[_.][\w.]+\b[^.]{0,20}?\b(?:returned"
    r"|responded|failed|succeeded|raised|threw)\b"
    r"|^\s*[\w.]*_[\w.]+\s*(?:\(\))?\s*(?:returned|->)", _I | _M)
_SYSTEM_PROMPT = re.compile(
    r"^\s*you are (?:(?-i:[A-Z])\w*,?\s+)?(?:a|an|the) [^.]{0,60}\b(?:assistant|agent|bot"
    r"|chatbot|model|ai|"
    r"expert|tutor|copilot)\b"
    r"|\bas an ai(?: language)? model\b|\bsystem prompt\b"
    r"|^\s*your (?:task|role|job|goal) is to\b|\b(?:always|only) respond (?:in|with)\b"
    r"|\b(?:do not|don't|never) (?:reveal|disclose|share|repeat) (?:these|your|the|this)"
    r" (?:instructions|prompt|system prompt|rules)\b", _I | _M)

# Shell prompts, SQL, diffs, HTTP status lines: text a program reads or writes.
_CODE = re.compile(
    r"^\s*[$#>] (?:sudo |\.?/)?[\w.-]+(?: -{1,2}[\w-]+| \S+)*\s*$"
    r"|^\s*(?-i:SELECT\b.+\bFROM|INSERT INTO|UPDATE \w+ SET|DELETE FROM|CREATE (?:TABLE|INDEX)"
    r"|ALTER TABLE|DROP TABLE)\b"
    r"|^diff --git |^@@ -\d+(?:,\d+)? \+\d+|^index [0-9a-f]{7,}\.\.[0-9a-f]{7,}"
    r"|^\s*HTTP/\d(?:\.\d)? \d{3}\b|^\s*[1-5]\d\d (?-i:[A-Z][a-z]+(?: [A-Z][a-z]+){0,3})\W*$"
    r"|\b\d+ files? changed\b|\b\d+ insertions?\(\+\)|\b\d+ deletions?\(-\)", _I | _M)
# Progress and retry lines.
_PROGRESS = re.compile(
    r"\b\d{1,3}(?:\.\d+)?\s*% (?:complete|completed|done|finished|downloaded|uploaded)\b"
    r"|\b(?:attempt|retry|try) \d+ ?(?:of|/) ?\d+\b|\bretrying in \d+|\btimed out after \d+"
    r"|\bbacking off (?:for )?\d+"
    r"|\b(?:restarting|rebooting|reconnecting|retrying|resuming|shutting down) in \d+"
    r"|\b(?:downloading|uploading|installing|compiling|building|indexing|syncing|loading)\b"
    r"[^.]{0,40}?\d+(?:\.\d+)?\s*%", _I)
# What chat apps and mail clients add around a message, whoever "sends" it.
_APP_TEXT = re.compile(
    r"^\s*sent from my (?:iphone|ipad|android|galaxy|pixel|mobile|phone|blackberry)\b"
    r"|^\s*(?:auto-?reply|automatic reply|out of office(?: reply)?|autoresponder)\s*:"
    r"|^\s*get outlook for\b|\b(?:is|are) typing\s*(?:\.{3}|\u2026)?\s*$"
    r"|^\s*(?:this )?message (?:was |has been )?(?:deleted|removed|unsent|edited)\W*$"
    r"|\btest message\b|\bplease ignore (?:this|that|it)?\b|^\s*please ignore\b"
    r"|^\s*\[(?:bot|automated|auto-?reply|system|notification|alert|cron|ci)\]", _I | _M)
# Software telling its own state: "Message deleted", "Connection to db-01 closed by remote
# host", "Memory saved", "Request timed out" (short, agentless, about a software thing).
_SOFTWARE_STATE = re.compile(
    r"^\W*(?:the |your |a )?(?:\w+ ){0,2}(?:message|memory|memories|file|files|session|connection"
    r"|request|job|task|build|deploy(?:ment)?|backup|sync|upload|download|cache|record|entry"
    r"|webhook|token|socket|process|container|pod|node|service|server|database|db|query"
    r"|transaction|migration|snapshot|index|document|attachment|draft|notification|email"
    r"|e-mail|password|certificate|cert|invite|invitation|verification)\b"
    r"[^.!?]{0,40}?\b(?:deleted|saved|created|updated|closed|opened|failed|passed|succeeded"
    r"|completed|timed out|restored|synced|uploaded|downloaded|expired|queued|started"
    r"|stopped|archived|refused|reset|killed|restarted|evicted|terminated|crashed"
    r"|disconnected|reconnected|established|unreachable|not found|cleared|flushed|purged"
    r"|invalidated|rebuilt|refreshed|warmed|rotated|renewed|revoked|exceeded|sent|delivered"
    r"|bounced|could not be \w+|expires?|expiring|complete|finished|successful|done)\b"
    r"[^.!?]{0,40}[.!]?\s*$", _I)
# The classic messages of operating systems and runtimes.
_SYSTEM_ERROR = re.compile(
    r"\b(?:segmentation fault|core dumped|quota exceeded|permission denied|no such file or"
    r" directory|out of memory|connection (?:refused|reset)(?: by peer)?|broken pipe|command not"
    r" found|bus error|stack overflow|too many open files|address already in use|disk full"
    r"|no space left on device|operation not permitted|killed by signal)\b", _I)
# Release and deploy notices: a version or a commit hash with a release verb.
_RELEASE = re.compile(
    r"\b(?:deployed|released|rolled (?:out|back)|published|merged|tagged|pushed|promoted)\b"
    r"[^.]{0,60}?(?:\bv?\d+\.\d+\.\d+(?:[-+][\w.]+)?\b|\bcommit [0-9a-f]{7,40}\b"
    r"|\b[0-9a-f]{7,40}\b(?=\)))", _I)
# A level word opening a line: "Warning: deprecated API version in use".
_LEVEL_PREFIX = re.compile(r"^\s*(?:warning|error|notice|info|debug|fatal|critical)\s*:\s",
                           _I | _M)
# Tokens only software writes: paths, versions, sizes and durations after a number,
# identifiers with underscores, package names with versions.
_TECHNICAL = re.compile(
    r"(?:^|\s)/[\w.-]+(?:/[\w.-]+)*"
    r"|\b\d+(?:\.\d+)?\s?(?:ms|gb|mb|kb|tb|gib|mib|kib)\b|\b\d+(?:\.\d+)?(?:s|m|h)\b"
    r"|\bv?\d+\.\d+\.\d+\b|\b[a-z]+_[a-z_]+\b|\b[a-z][\w.-]*-\d+(?:\.\d+)+\b", _I)
# Someone a statement can be about: a pronoun of a person (names are checked by the caller).
_PERSON_WORD = re.compile(
    r"\b(?:i|i'm|me|my|mine|we|our|us|you|your|he|him|his|she|her|they|them|their)\b", _I)
# Readings of sensors and devices.
_READING = re.compile(
    r"\b(?:temperature|temp|humidity|battery|voltage|signal|pressure|co2|pm2\.5)\b"
    r"[^.]{0,12}?-?\d+(?:\.\d+)?\s*(?:%|\u00b0\s*[cf]?|v|dbm|hpa|ppm|mbar)", _I)

# A person speaking of themself ("I", "my", "we") in a sentence with a verb.
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|our|us)\b", _I)

# --- phatic and content-free -----------------------------------------------------------------

_PHATIC_WORDS = _words("""
ok okay k kk okey alright allright sure yes yeah yep yup no nope nah thanks thank thx ty
tysm cheers great cool nice awesome perfect lovely fine good gotcha got it noted roger
understood lol lmao haha hahaha hehe rofl hmm hm mhm uh um oh ah wow hi hello hey hiya yo
bye goodbye later cya see you soon morning evening night afternoon np problem worries
welcome please sounds sound works ping pong test testing there you are u ur still alive
yo hey talk ttyl brb gtg omg ooh aha indeed right exactly totally true agreed same here
too me much lot very so really all set done just checking in
""")
_ATTRIBUTION = re.compile(
    # "told Nina Petrova he..." takes the whole name, not just "Nina".
    r"^\s*[\w.' -]{1,60}? (?:said|says|told (?:(?-i:[A-Z][\w.'-]*)(?: (?-i:[A-Z][\w.'-]*)){0,2}"
    r"|[\w.' -]{1,60}?))(?::|,)?\s+", _I)
_STOPWORDS = _words("""
a an the and or but if so of to in on at by for with from as into onto than then that this
these those it its it's is are was were be been being am do does did done have has had
having not no nor yes very just also too only still even more most less least any some all
each every both either neither such same other own there here what which who whom whose
when where why how i me my we our you your he him his she her they them their one ones
will would can could should shall may might must about above after again against before
below between during over under up down out off once now new via per
""")
# Words that carry no claim of their own once the attribution is gone.
_VAGUE = _words("""
change changes changed thing things stuff something nothing anything everything update
updates updated news same before usual fine good okay ok nope none nothing n/a na tbd
done finished ready sure yes no see above below above-mentioned previous earlier later
mine yours whatever
""")
_WORD = re.compile(rf"[^\W\d_][\w{_APOS}-]*")
# Showing without saying what: "here's a pic", "check this out", "here's a photo of him".
_SHOWN_NOTHING = re.compile(
    rf"^\W*(?:here(?:[{_APOS}]s|\s+is|\s+are)\s+(?:(?:a|an|the|my|our|this|that|some|another)\s+)?"
    r"(?:[\w-]+\s+)?(?:pic|pics|pix|picture|pictures|photo|photos|snap|snaps|shot|shots|selfie"
    r"|selfies|screenshot|screenshots|video|videos|vid|clip|clips)"
    r"(?:\s+(?:of|from)\s+(?:him|her|them|it|this|that|me|us|here|there))?"
    r"|check\s+(?:this|it|that)\s+out|look\s+at\s+(?:this|that)"
    r"|take\s+a\s+look(?:\s+at\s+(?:this|that))?)\W*$", _I)
# A fan of nothing named: "Sam is a huge fan too."
_FAN_OF_NOTHING = re.compile(
    rf"^\W*(?:[\w{_APOS}-]+\s+){{0,2}}?[\w-]+(?:\s+(?:is|was|are|were|am|has\s+been)"
    rf"|[{_APOS}](?:s|m|re))\s+(?:[\w-]+\s+){{0,2}}?(?:a|an)?\s*(?:[\w-]+\s+)?fans?"
    r"(?:\s+(?:too|as\s+well|now|again))?\W*$", _I)


def _is_json_payload(text: str) -> bool:
    body = text.strip()
    if len(body) < 2 or body[0] not in "{[" or body[-1] not in "}]":
        return False
    try:
        json.loads(body)
    except ValueError:
        # Unbalanced or truncated payloads still look like one: most characters are
        # punctuation around quoted keys.
        return bool(re.search(r"\"[\w.-]+\"\s*:", body))
    return True


def _is_yaml_block(text: str) -> bool:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if text.lstrip().startswith("---\n") and len(lines) >= 2:
        return True
    keyed = sum(1 for ln in lines if _YAML_LINE.match(ln))
    return len(lines) >= 2 and keyed >= max(2, int(0.75 * len(lines)))


def _symbol_heavy(text: str) -> bool:
    """Mostly tokens that are no words: ids, numbers, paths, punctuation."""
    tokens = text.split()
    if len(tokens) < 4:
        return False
    wordy = sum(1 for t in tokens if re.fullmatch(r"[\"'(]*[^\W\d_]+[\"'),.!?;:]*", t))
    return wordy / len(tokens) < 0.4


def machine_output(text: str, *, as_said: bool = True) -> bool:
    """True when `text` is output of a program rather than something a person said.
    `as_said`: `text` is the speaker's own words (pronouns intact), not a statement
    rewritten in the third person, so a missing person word means something."""
    # Pure in its text: a message with several claims runs the ~25 patterns once (a
    # bounded cache of short texts, and a few long ones: every claim of a long message
    # asks about the whole message, and reading it again per claim was quadratic).
    if len(text) <= _CACHED_CHARS:
        return _machine_output_cached(text, as_said)
    return _machine_output_long(text, as_said)


_CACHED_CHARS = 2000


@functools.lru_cache(maxsize=1024)
def _machine_output_cached(text: str, as_said: bool) -> bool:
    return _machine_output(text, as_said)


@functools.lru_cache(maxsize=8)
def _machine_output_long(text: str, as_said: bool) -> bool:
    return _machine_output(text, as_said)


def _machine_output(text: str, as_said: bool) -> bool:
    if not text or not text.strip():
        return False
    low = lowered(text)

    def found(pattern: re.Pattern[str]) -> bool:
        # A pattern none of whose words the text has is not searched (exact; see
        # memhouse.core.needles): most chat has none of the boot, cron or metric words.
        return may_match(_NEEDLES[pattern], low) and pattern.search(text) is not None

    if (found(_STACK_TRACE) or found(_LOG_LINE) or _is_json_payload(text)
            or _XML.match(text) or _is_yaml_block(text) or found(_TOOL_ECHO)
            or found(_CODE) or found(_PROGRESS) or found(_APP_TEXT)
            or found(_LEVEL_PREFIX)):
        return True
    if as_said and _TECHNICAL.search(text) and not _PERSON_WORD.search(text):
        return True  # "Backup of /home finished: 2.3 GB in 4m"
    if "=" in text and len(_KEY_VALUE.findall(text)) >= 2:
        return True
    if found(_SYSTEM_PROMPT):
        return True
    lexical = (found(_METRIC) or found(_HEALTH) or found(_CRON)
               or found(_BOOT) or found(_RELEASE) or found(_READING)
               or found(_SYSTEM_ERROR)
               or (found(_SOFTWARE_STATE) and len(text.split()) <= 14))
    if lexical and not _FIRST_PERSON.search(text):
        return True
    return _symbol_heavy(text) and not _FIRST_PERSON.search(text)


# The literal needles of the patterns _machine_output tests (memhouse.core.needles).
_NEEDLES = {pattern: needles(pattern) for pattern in (
    _STACK_TRACE, _LOG_LINE, _TOOL_ECHO, _CODE, _PROGRESS, _APP_TEXT, _LEVEL_PREFIX,
    _SYSTEM_PROMPT, _METRIC, _HEALTH, _CRON, _BOOT, _RELEASE, _READING, _SYSTEM_ERROR,
    _SOFTWARE_STATE)}


def phatic(text: str) -> bool:
    """Acknowledgements, greetings and pings: every word is small talk (emoji-only too)."""
    words: list[str] = []
    for match in _WORD.finditer(text):
        if len(words) == 8:
            return False  # more than 8 words: a long message stops here, not at its end
        words.append(match.group().lower().strip(_APOS + "-"))
    if not words:
        return not re.search(r"\d", text)  # "👍", "!!!", "..."
    return all(w in _PHATIC_WORDS for w in words) and len(words) <= 8


@functools.lru_cache(maxsize=8192)  # pure; the update rules ask it of each candidate often
def claim_body(statement: str) -> str:
    """The claim without its attribution ("Sam said: no changes." -> "no changes.")."""
    return _ATTRIBUTION.sub("", statement, count=1)


def content_words(text: str, *, names: frozenset[str] = frozenset()) -> list[str]:
    out = []
    for word in _WORD.findall(text):
        low = word.lower().strip(_APOS + "-")
        if low.endswith(("'s", "\u2019s")):
            low = low[:-2]
        if len(low) < 2 or low in _STOPWORDS or low in _VAGUE or low in names:
            continue
        out.append(low)
    return out


def junk_reason(*, statement: str, excerpt: str, message_text: str,
                names: frozenset[str] = frozenset()) -> str | None:
    """The reason to reject a proposed statement as not worth remembering, or None.

    `excerpt` is the claim's evidence span, `message_text` the whole observation (empty
    for a document sentence), `names` lower-cased names of known peers (a name alone is
    no content)."""
    body = claim_body(statement)
    if (excerpt and machine_output(excerpt)) or machine_output(body, as_said=False):
        return MACHINE_OUTPUT
    # A pasted log or payload taints the whole message, but a person's own sentence
    # around it ("I'm stuck at the airport, here is the error: ...") stays.
    if message_text and machine_output(message_text) and not _FIRST_PERSON.search(excerpt):
        return MACHINE_OUTPUT
    if (message_text and phatic(message_text)) or phatic(body):
        return PHATIC
    if _SHOWN_NOTHING.match(body) or _FAN_OF_NOTHING.match(body):
        return FRAGMENT
    # A number is content once there is a claim around it: "Sam is 42."
    if not content_words(body, names=names) and not (
            re.search(r"\d", body) and claim_body(statement) == statement):
        return FRAGMENT
    return None


# Evidence spans shorter than this are judged by their whole message (learned_reason).
SHORT_SPAN_WORDS = 3


def learned_reason(*, statement: str, excerpt: str, message_text: str,
                   model: JunkClassifier | None = None) -> str | None:
    """The learned model's reason to refuse a claim drawn from a message, or None.

    Judged on the speaker's words as the rules are: the claim's evidence span (its
    statement without attribution when there is none), and the whole message unless the
    span is a person speaking of themself ("I'm stuck, here is what pip says: ...").
    Only messages: the model learned machine output against chat, and a document's
    sentences (empty `message_text`; Markdown, commands, paths) are neither, so on the
    project's own docs it would refuse a third of what the rules keep.
    `model`: the shipped one (knowledge/ingest/junk_model.json) unless given."""
    if not message_text.strip():
        return None
    from knowledge.ingest import junk_classifier

    judge = model.refuses if model is not None else junk_classifier.machine_output
    said = excerpt or claim_body(statement)
    if len(said.split()) < SHORT_SPAN_WORDS:
        # two words say too little to tell a log line from a person ("Cancelled PureGym"
        # scored 0.94 cut from "Cancelled PureGym. I've joined the climbing wall at The
        # Arch instead.", which scores 0.0): the message they were cut from is judged
        return CLASSIFIER if judge(message_text) else None
    if judge(said):
        return CLASSIFIER
    if (message_text.strip() != said.strip() and not _FIRST_PERSON.search(said)
            and judge(message_text)):
        return CLASSIFIER
    return None


def learned_evidence(*, statement: str, excerpt: str, message_text: str) -> dict[str, float]:
    """What a learned refusal records on the row's lifecycle event: the shipped model's
    score of the claim's span and of its message, and the threshold they were held to."""
    from knowledge.ingest import junk_classifier

    model = junk_classifier.default()
    said = excerpt or claim_body(statement)
    return {"junk_model_score": round(model.score(said[:junk_classifier.MAX_CHARS]), 4),
            "junk_model_message_score": round(
                model.score(message_text[:junk_classifier.MAX_CHARS]), 4),
            "junk_model_threshold": model.threshold}
