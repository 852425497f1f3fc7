"""Updates supersede: a new claim that replaces a current one about the same subject and
the same attribute retires it, model-free.

A pair is an update when all of these hold:

1. same subject (the same peer, or both about the same scope) and the older row is
   current (active, provisional or needs_revalidation) in the same scope;
2. the two share an attribute *slot* (where someone lives, works, their appointment,
   their diet, a favourite thing...; see SLOTS) and the new one states something the old
   one does not;
3. their embeddings are close (the same thing is being talked about);
4. the slot holds one value at a time (a home, an employer), or it can hold several (a
   person has many meetings) and the new claim carries update wording ("moved",
   "rescheduled", "no longer", "instead", "now"...; see UPDATE_CUES).

What then happens depends on who said it and when (governance.intake.pipeline):
* the same peer, or the subject, and later in occurred_at: the old row is superseded in
  the same transaction (reason f4_updated_by_source, `supersedes` set, a supersedes
  relation for lineage);
* an older message arriving late never retires the newer fact: the late claim itself is
  superseded at once (f4_late_arrival);
* anyone else: nothing is retired silently; a `contradicts` relation and an open
  contradiction review on the current row for a curator.

The word lists were written from how people state changes in conversation and email,
not from one test file; the embedding threshold is a floor against unrelated pairs that
happen to share a slot word.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Max

from governance.intake.attributes import attribute_conflict, attributes, shares_attribute
from governance.intake.junk import claim_body, content_words
from knowledge import lifecycle
from knowledge.lifecycle import ActorLike
from knowledge.models import Knowledge
from memhouse.core.needles import lowered, may_match, needles

_I = re.IGNORECASE

_V = r"(?P<v>[\w@+().,$\u20ac\u00a3' /&-]{2,40}?)"  # a value, up to the end of its clause
_END = (r"(?=[.,;!?:](?!\d)|$| [-\u2013\u2014]| (?:and|but|with|since|now|these days|from|starting"
        r"|as of|for|as|on|in|at|near|because|after|before|when|which|who|so|going forward"
        r"|anymore|again|instead|lately|right now|currently)\b)")
# Whose or which: "Sam's", "my", "our", "the" (repeatable: "Tomas's dog's vet").
_WHOSE = r"(?:(?:\w+ ){0,3}\w+(?:'s|\u2019s|s')|my|our|his|her|their|its)"  # "Omar Haddad's"
_OWNER = rf"(?:(?:{_WHOSE}|the) )*"
_K = r"(?P<k>[\w -]{3,40}?)"  # the thing an attribute belongs to ("the Q3 launch")
_NAME = r"(?-i:[A-Z][\w&.-]*(?: [A-Z][\w&.-]*){0,3})"  # a proper name, case kept
_NOW = r"(?:now |still |actually |currently |officially |no longer |not )?"
_LATELY = r"(?: (?:these days|right now|now|lately|currently|going forward))?"
# Job titles end in one of these ("store manager", "regional operations lead").
_ROLE = (r"(?:manager|lead|director|head|engineer|designer|developer|analyst|nurse|teacher"
         r"|consultant|officer|coordinator|specialist|administrator|assistant|associate"
         r"|intern|architect|scientist|researcher|editor|writer|producer|owner|founder"
         r"|president|chair|supervisor|technician|accountant|lawyer|attorney|doctor|chef"
         r"|professor|student|volunteer|contractor|freelancer|vp|ceo|cto|cfo|coo)")
# Jobs named by what one does, beyond the titles of _ROLE.
_JOBS = (r"(?:barista|waiter|waitress|server|bartender|cashier|nurse|midwife|paramedic"
         r"|carer|cleaner|driver|courier|mechanic|electrician|plumber|builder|carpenter"
         r"|chef|cook|baker|butcher|pharmacist|vet|dentist|librarian|receptionist"
         r"|hairdresser|stylist|barber|tutor|lecturer|trainer|instructor|firefighter"
         r"|pilot|guard|porter|clerk|salesperson|rep|agent|recruiter|therapist|counsellor"
         r"|counselor|physio|physiotherapist|surgeon|radiographer|solicitor|paralegal)")
_STATUS = (r"(?:pending|approved|rejected|denied|accepted|cancel+ed|confirmed|on hold"
           r"|in review|under review|closed|open|resolved|fixed|shipped|done|complete"
           r"|completed|finished|delayed|postponed|paused|active|inactive|expired|renewed"
           r"|booked|sold|signed|submitted|waitlisted|blocked|unblocked)")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _frames(*patterns: str) -> list[re.Pattern[str]]:
    return [re.compile(p, _I) for p in patterns]


# Attributes that hold one value at a time, as frames that capture the value (v) and, for
# attributes of a thing, the thing (k). A new value in the same frame replaces the old
# one without any cue ("Sam lives in Denver" -> "Sam lives in Austin"). Frames are
# written from how people state such facts, one family per attribute, not per example.
SINGLE_SLOTS: dict[str, list[re.Pattern[str]]] = {
    "residence": _frames(
        rf"\b(?:lives?|living|resides?|residing|settled) (?:now )?(?:in|at|on) {_V}{_END}",
        rf"\bbased (?:now )?(?:in|at) {_V}{_END}",
        rf"\b(?:moved|moving|relocated|relocating|moved back) (?:to|into) {_V}{_END}",
        rf"\b(?:home )?address (?:is|:) (?:now )?{_V}{_END}",
        rf"\bnew (?:home|address|place|apartment|flat|house) (?:is|:) (?:in |at |on )?{_V}{_END}",
        # a home of one's own, named by where it is: "got the keys to our flat in Bristol",
        # "closed on a house in the suburbs", "rents an apartment downtown"
        rf"\b(?:got the keys to|moved into|closed on|bought|rents?|renting|owns?|sold)"
        rf" (?:an?|the|my|our|his|her|their|(?:\w+ )?\w+(?:'s|\u2019s)) (?:new |little |tiny "
        rf"|big )?"
        rf"(?:flat|apartment|house|home|place|condo|studio)(?: (?:in|on|at) |"
        rf" (?=downtown|uptown|midtown))(?P<v>(?!(?:the )?(?:same|middle|end|corner)\b)"
        rf"[\w@+().,$\u20ac\u00a3' /&-]{{2,40}}?){_END}"),
    "household": _frames(r"\blives? (?:now )?(?P<v>alone|on (?:my|his|her|their) own|with "
                         r"[\w' -]{2,30}?)" + _END),
    "where": _frames(rf"\b(?:the|our|my|{_WHOSE}) {_K} (?:is|are) (?:now )?(?:being )?(?:held )?"
                     rf"(?:in|at|on) {_V}{_END}",
                     rf"\b(?:the|our|my|{_WHOSE}) {_K} (?:has |was |got |is )?(?:moved|moving"
                     rf"|relocated|relocating|been moved) to {_V}{_END}",
                     rf"\b(?:moved|relocated|transferred) (?:the|our|my|{_WHOSE}) {_K} to "
                     rf"{_V}{_END}"),
    "office": _frames(
        r"\b(?:works? out of|works? from|based (?:in|at|out of)|transferred to|moved to"
        r"|relocated to"
        r"|sits? in|working from) the (?P<v>[\w .'-]{2,30}?) (?:office|branch|site|campus)\b",
        r"\b(?:on|to) the (?P<v>\d+(?:st|nd|rd|th)|ground|top) floor\b"),
    "employer": _frames(
        rf"\b(?:works?|working|employed|job) (?:now )?(?:at|for) {_V}{_END}",
        rf"\b(?:joined|started (?:a new job )?at|new job at|hired by|hired at|switched jobs to"
        rf"|(?:got|landed|took|accepted|started) (?:a |an |the )?(?:new |full-time |part-time )?"
        rf"(?:job|position|role|offer|gig) (?:at|with|from)) "
        rf"(?P<v>{_NAME}){_END}",
        # "is a barista at Grindhouse Coffee": a job held at a named place
        rf"\b(?:is|am|are|was) (?:now )?an? (?:[\w-]+ ){{0,2}}?(?:{_ROLE}|{_JOBS}) (?:at|for|with) "
        rf"(?:the )?(?P<v>{_NAME}){_END}",
        rf"\b(?P<v>(?:no longer|not|don't|doesn't) work(?:s|ing)? (?:at|for) [\w&.' -]{{2,40}}?)"
        rf"{_END}",
        rf"\b(?P<v>(?:quit|left|resigned from|laid off from|lost) (?:\w+'s |my |his |her )?"
        rf"(?:job |position )?(?:at )?{_NAME}){_END}"),
    "role": _frames(rf"\b(?:works?|working|job|employed|started|hired) as (?:an? )?{_V}{_END}",
                    rf"\b(?:promoted to|new role is|title is(?: now)?) (?:an? )?{_V}{_END}",
                    rf"\b(?:is|am|are) (?:now )?(?:the|an?) (?P<v>[\w -]{{0,40}}?\b{_ROLE})"
                    rf"(?! (?:of|for|on|at) )\b{_END}"),
    "relationship": _frames(
        r"\b(?:is|am|are|got|getting|now) (?:now )?(?P<v>(?:not |no longer )?(?:married"
        r"|engaged|single|divorced|separated|widowed))\b",
        r"\b(?P<v>broke up|split up|(?:is|am|are|been|now) (?:dating|seeing) "
        r"(?!(?:Dr|Mr|Mrs|Ms|Prof)\b)(?-i:[A-Z])\w+)\b",
        # a couple now: "we're official", "has a girlfriend", "is seeing someone"
        r"\b(?:is|am|are|been|now) (?:now )?(?P<v>official|(?:in a|in a new) relationship"
        r"|seeing someone|dating someone|together)\b(?! (?:with|on|for|in|at)\b)",
        r"\b(?:has|have|got) (?:a )?(?P<v>(?:new )?(?:girlfriend|boyfriend|partner))\b",
        r"\b(?P<v>made it official|got together|started (?:dating|seeing) (?:someone|each other"
        r"|(?-i:[A-Z])\w+))\b"),
    "diet": _frames(
        r"\b(?:is|am|are|went|going|gone|became|become|turned|now|eat|eats|eating) "
        r"(?:fully |strictly |mostly |now )?(?:an? )?(?P<v>vegan|vegetarian|pescatarian|keto|paleo"
        r"|gluten-free|dairy-free|plant-based|carnivore)\b",
        # Abstaining from one thing is its own attribute: "doesn't drink alcohol" does not
        # replace "is vegetarian".
        r"\b(?P<v>(?:no longer|stopped|quit|don't|doesn't|not|no more)) "
        r"(?:eat(?:s|ing)? |drink(?:s|ing)? )?(?P<k>meat|fish|dairy|gluten|sugar|pork|beef"
        r"|alcohol|caffeine|coffee)\b",
        r"\b(?P<v>omnivore|no dietary restrictions|eats? (?:pretty much |just about )?"
        r"everything)\b"),
    "phone": _frames(r"\b(?:phone|cell|mobile|number)(?: number)?\s*(?:is\b|:) ?(?:now )?"
                     r"(?P<v>\+?[\d][\d ().-]{5,}\d)"),
    "email": _frames(r"\b(?:e-?mail|address)(?: address)? (?:is|:) (?:now )?"
                     r"(?P<v>[\w.+-]+@[\w.-]+)",
                     r"\b(?:use|reach \w+ (?:by email )?at|write to|email \w+ at) "
                     r"(?P<v>[\w.+-]+@[\w.-]+\w)"),
    "car": _frames(rf"\b(?:drives?|driving) (?:an?|the|my|his|her|their) (?:new |used |old )?"
                   rf"{_V}{_END}",
                   rf"\bcar is (?:now )?(?:an? )?{_V}{_END}"),
    "school": _frames(rf"\b(?:studies|studying|enrolled|student|teaches|teaching) at {_V}{_END}",
                      rf"\b(?:goes|going|transferred|switched|moved|enrolled)(?: {_WHOSE} "
                      r"(?:son|daughter|kids?|child(?:ren)?))? to (?P<v>[\w .'-]"
                      r"{2,40}?(?:school|university|college|academy|elementary|high|middle"
                      r"|kindergarten|preschool|daycare|nursery))\b"),
    "commute": _frames(rf"\bcommutes? (?:to work )?(?:by|on|via) {_V}{_END}",
                       r"\b(?P<v>(?:rides?|riding|takes?|taking|drives?|driving|cycles?|cycling"
                       r"|bikes?|biking|walks?|walking)(?: (?:the|a|an|my|his|her|their"
                       r"|(?:\w+ ){0,2}\w+'s))?"
                       r"(?: (?:bus|train|subway|metro|tram|ferry|bike|bicycle|car|scooter))?)"
                       r" to (?:work|the office|the studio|the site|school|uni|college)\b"),
    "drink": _frames(rf"\b(?:likes?|takes?|drinks?|has|have|prefers?|orders?) (?:{_WHOSE} )?"
                     r"(?P<k>coffee|tea|latte|espresso|cappuccino) (?P<v>with [\w -]{2,30}?|black"
                     r"|plain|sweet|iced|hot|decaf)" + _END),
    "gym": _frames(r"\b(?:goes|going|go) to (?:the )?(?P<v>[\w .'&-]{2,30}? (?:gym|fitness|crossfit"
                   r"|studio|club|dojo|box))\b",
                   rf"\b(?:trains?|training|works? out|lifts?|exercises?) at {_V}{_END}"),
    "manager": _frames(rf"\b(?:reports? to|manager is|boss is) (?:now )?{_V}{_END}"),
    # "on the payments team", "on the night shift": the noun is the attribute.
    "team": _frames(r"\b(?:on|in|joined|(?:moved|moving|switched|transferred)(?: over| back)? to)"
                    r" the (?P<v>[\w -]{2,30}?) (?P<k>team|shift|squad|rotation|plan|tier"
                    r"|track|crew|unit|department)\b"),
    "name": _frames(rf"\b{_OWNER}{_K} (?:is|are) (?:now )?(?:called|named) {_V}{_END}",
                    rf"\brenamed {_OWNER}{_K} (?:to|as) {_V}{_END}"),
    "venue": _frames(rf"\b{_OWNER}{_K} (?:meets|meet|is held|are held|takes place"
                     rf"|take place) (?:now )?(?:at|in) {_V}{_END}"),
    "lead": _frames(rf"\b(?:the )?{_K} is (?:now )?(?:led|owned|run|managed|handled) by {_V}{_END}",
                    rf"\b(?:lead|owner|point person|dri) (?:for|on|of) (?:the )?{_K} (?:is|:) "
                    rf"(?:now )?{_V}{_END}",
                    rf"\b(?P<v>{_NAME}) is (?:now )?the (?:\w+ )?(?:lead|owner|manager|head"
                    rf"|point person|dri|contact) (?:for|of|on) (?:the )?{_K}{_END}",
                    rf"\b(?:the )?{_K} (?:lead|owner|manager|head|point person|dri|contact) "
                    rf"(?:is|:) (?:now )?{_V}{_END}"),
    "priority": _frames(r"\b(?:the )?(?P<k>[\w -]{3,40}?) is (?:now )?(?:a |the )?"
                        r"(?P<v>p[0-4]|(?:top|high|highest|low|lowest|medium|normal) priority)\b",
                        rf"\bpriority (?:of|for|on) (?:the )?{_K} is (?:now )?{_V}{_END}",
                        r"\b(?:the )?(?P<k>[\w -]{3,40}?) (?:got |was |has been )?(?:bumped|raised"
                        r"|lowered|moved|changed|downgraded|upgraded|escalated) (?:up |down )?to "
                        r"(?:a |the )?(?P<v>p[0-4]|(?:top|high|highest|low|lowest|medium|normal)"
                        r" priority)\b"),
    "status": _frames(rf"\bstatus (?:of|for|on) (?:the )?{_K} is (?:now )?{_V}{_END}",
                      rf"\b{_OWNER}(?P<k>[\w' -]{{3,40}}?) (?:is|was|got|has been|have been) "
                      rf"(?:still |now |finally |officially )?(?P<v>(?:not )?{_STATUS})\b"),
    "deadline": _frames(rf"\b(?:the )?{_K} is (?:now )?due (?:on |by )?{_V}{_END}",
                        rf"\bdeadline (?:for (?:the )?{_K} )?(?:is|moved to|pushed to|changed to"
                        rf"|is now) {_V}{_END}",
                        rf"\b(?:the )?{_K} deadline (?:was |is |got |has been )?(?:extended|moved"
                        rf"|pushed|changed|set|brought forward) to {_V}{_END}"),
    "favorite": _frames(rf"\bfavou?rite (?P<k>[a-z]+(?: [a-z]+)?){_LATELY} (?:is|:) (?:now )?"
                        rf"{_V}{_END}",
                        r"\b(?P<v>[\w .'-]{2,40}?) is (?:now )?(?:\w+'s |my |his |her |their )?"
                        r"(?:new )?favou?rite (?P<k>[a-z]+)\b"),
    "age": _frames(r"\b(?:is|am|are) (?P<v>\d{1,3}) years? old\b",
                   # "celebrated my 35th birthday", not "my son's 5th birthday"
                   r"(?<!'s )(?<!\u2019s )(?<!s' )\b(?:my|our|his|her|their) (?P<v>\d{1,3})"
                   r"(?:st|nd|rd|th) birthday\b",
                   r"\b(?:turned|turns|turning) (?P<v>\d{1,3})\b(?![.,:-]?\d| (?:kids|times|"
                   r"minutes|hours|days|weeks|months|percent|%))"),
    "timezone": _frames(rf"\btime ?zone is (?:now )?{_V}{_END}"),
    # "<someone>'s <attribute> is <value>": a possessive with a copula names one value
    # ("Sam's landlord is Mr. Patel", "my parking spot at work is B14"), and so do
    # "<value> is Sam's new <attribute>", "switched <attribute> to <value>", "takes
    # <lessons> with <value>" and "<value> as Sam's <attribute>".
    "has": _frames(
        rf"(?:^|\b)(?:(?:\w+(?:'s|\u2019s)|my|our|his|her|their) )+(?P<k>[a-z][\w' -]{{1,40}}?)"
        rf"{_LATELY} (?:is|are) {_NOW}(?P<v>(?:(?:on|at|in|through|with|from|by|an?|the) )?"
        rf"[\w@+().,$\u20ac\u00a3' /&-]{{1,40}}?){_END}",
        rf"^\s*(?P<k>[a-z][\w' -]{{1,40}}?){_LATELY} (?:is|are) {_NOW}(?P<v>(?:on|at|in|through"
        rf"|with|from|by) [\w@+().' /&-]{{1,40}}?){_END}",
        rf"\b(?P<v>{_NAME}) is (?:now )?{_WHOSE} new "
        rf"(?P<k>[a-z][\w -]{{1,30}}?){_END}",
        rf"\b{_WHOSE} (?P<k>[a-z][\w -]{{1,30}}?) (?:went up|went down|rose|increased"
        rf"|decreased|dropped|fell|jumped|climbed|was raised|was lowered|was cut|changed)"
        rf" to {_V}{_END}",
        rf"\b(?:switched|changed|moved|relocated|transferred) {_OWNER}(?P<k>[a-z][\w -]{{1,30}}?)"
        rf" (?:over )?"
        rf"(?:to|for) {_V}{_END}",
        rf"\b(?:takes?|taking|has|have|having|started|starting) {_OWNER}(?P<k>[\w -]{{1,30}}?"
        rf"(?:lessons|classes|sessions|therapy|tutoring|coaching)) (?P<v>with [\w .'-]{{2,40}}?)"
        rf"{_END}",
        rf"\b(?:seeing|using|uses|sees|got|hired|chose|picked|going with) (?P<v>{_NAME}) as "
        rf"{_WHOSE} (?P<k>[a-z][\w -]{{1,30}}?){_END}"),
}
# The frames with their needles (memhouse.core.needles), in SINGLE_SLOTS' order.
_GATED_SLOTS = tuple((name, tuple((frame, needles(frame)) for frame in frames))
                     for name, frames in SINGLE_SLOTS.items())
# A "has" value must name something (a name, a number, a time or place, several words),
# not describe it: "Sam's dog is old" and "Sam's dog is cute" are both true.
_NAMING_VALUE = re.compile(r"\d|(?-i:[A-Z])|^(?:on|at|in|through|with|from|by|an?|the) |\w \w")
# Things a person has several of (meetings, flights): a claim replaces another only when
# it says it is a change ("moved", "rescheduled", "instead") and names the same thing.
MULTI_HEADS = re.compile(
    r"\b(?:appointment|appt|check-?up|consultation|surgery|meeting|standup|stand-up|1:1"
    r"|one-on-one|interview|reservation|booking|flight|dinner|lunch|brunch|party|wedding"
    r"|launch|release|rollout|go-live|kickoff|demo|review|class|lesson|exam|pickup|pick-up"
    r"|delivery|deadline|recital|rehearsal|call)\b", _I)
SCHEDULE_CUES = re.compile(
    r"\b(?:moved|rescheduled?|postponed|pushed (?:back|out|to)|delayed|brought forward"
    r"|bumped|changed|switched|swapped|now (?:on|at|in|for)|instead|cancel+ed|called off"
    r"|new (?:date|time|day|slot)|not (?:on|at) [\w:]+ (?:but|anymore)|any ?more|no longer"
    r"|is now|are now|from now on|going forward|these days)\b",
    _I)
# General update wording, kept on the lineage evidence.
UPDATE_CUES = re.compile(
    r"\b(?:moved|rescheduled?|postponed|pushed|delayed|changed|switched|swapped|now"
    r"|no longer|not any ?more|any ?more|instead|new|updated?|actually|turns out|as of"
    r"|from now on|these days|replaced|relocated|cancel+ed|called off|quit|left|resigned"
    r"|became|promoted|transferred|took over)\b", _I)


# How close two statements must be, in the default embedding space, to be about the same
# thing; below it a shared slot word is a coincidence.
SINGLE_MIN_COSINE = 0.15
MULTI_MIN_COSINE = 0.5
CANDIDATE_LIMIT = 200
CANDIDATE_STATES = (lifecycle.ACTIVE, lifecycle.PROVISIONAL, lifecycle.NEEDS_REVALIDATION)


@dataclass(frozen=True)
class Update:
    old: Knowledge
    slot: str
    cosine: float
    cue: bool


def _norm(value: str) -> str:
    value = value.strip().lower()
    value = re.sub(r"^(?:as of|starting|from|since|after|before) \w+ ", "", value)
    value = re.sub(r"\b(?:new|current|old|former|latest|usual|regular)\s+", "", value)
    value = re.sub(r"^(?:(?:[\w]+(?:'s|\u2019s|s')|the|a|an|my|our|his|her|their|its)\s+)+", "",
                   value)
    return " ".join(value.split())


# Values that name no value ("working at it", "lives at home" is no address).
_EMPTY_VALUES = frozenset({"it", "this", "that", "them", "there", "here", "home", "all",
                           "least", "last", "first", "times", "the moment", "once"})


# Titles keep their names whole ("Dr. Alvarez" is one value, not "Dr").
_ABBREVIATION = re.compile(r"\b(Dr|Mr|Mrs|Ms|Mx|Prof|St|Jr|Sr|Mt|Ave|Rd|No)\.", _I)


# Places and organisations are named: "moved into a bigger apartment" names no new home.
_PLACE_SLOTS = frozenset({"residence", "where", "office", "employer", "school", "gym", "venue"})
_INDEFINITE = re.compile(r"^(?:an?|another|some|one) (?!.*(?:\d|(?-i:[A-Z])))", _I)

# Who holds an attribute is what stands before it: "Sam's sister lives in Madrid" is the
# sister's home, not Sam's; "Helen's manager is Raj" is not Sam's manager.
_HOLDER_NOISE = _wordset("""the a an that who which now also just still actually currently
usually officially really and others these days lately recently finally so then said says
is are was were am be been being has have had got gets get will would can could
new old current
job title role position work home phone cell mobile e-mail email number address
flat apartment house condo place studio
""")  # the last line: words naming the attribute itself, not whose it is
_PRONOUNS = frozenset({"he", "she", "they", "it", "his", "her", "their", "its", "we", "our"})
_CLAUSE_CUT = re.compile(r".*(?:[,;:]|\b(?:and|but|so|because|since|while|then|after|before"
                         r"|when|although|though)\b(?! others\b))\s*", _I | re.S)


_OBJECT_HOLDER = re.compile(r"(?:\w+(?:'s|\u2019s) )+\w+")


def _holder(prefix: str, names: frozenset[str]) -> tuple[str, ...] | None:
    """The words naming who holds an attribute, the subject's own names removed: () is
    the subject, None is someone only a pronoun names (matches anyone)."""
    text = _CLAUSE_CUT.sub("", prefix.replace("and others", ""))
    words = [w.lower().removesuffix("'s").removesuffix("\u2019s").rstrip("'\u2019")
             for w in re.findall(r"[\w'\u2019.-]+", text)]
    # The holder is the clause's subject: what stands before its verb ("Sam started a new
    # job at" is Sam's job).
    for n, word in enumerate(words):
        if word in _AUX or word in _IRREGULAR_PAST or word in _VERBISH or (
                word.endswith("ed") and len(word) > 3):
            words = words[:n]
            break
    # `names` holds whole names ("priya nair") and aliases: any of their words is the subject.
    name_words = {part for name in names for part in name.split()}
    words = [w for w in words if w and w not in _HOLDER_NOISE and w not in name_words]
    if words and all(w in _PRONOUNS for w in words):
        return None
    return tuple(w for w in words if w not in _PRONOUNS)


_COUPLE = re.compile(r"\band\b", _I)


def same_holder(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> bool:
    if a is None or b is None or a == b:
        return True
    # "Sam's sister Ana" and "Ana" hold the same thing.
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return bool(short) and long_[-len(short):] == short


def slot_values(statement: str, names: frozenset[str] = frozenset()
                ) -> dict[str, tuple[str, tuple[str, ...] | None]]:
    """slot key -> (value, holder) for the one-value attributes a statement states."""
    return dict(_slot_values(statement, names))


@lru_cache(maxsize=8192)
def _slot_values(statement: str, names: frozenset[str]
                 ) -> tuple[tuple[str, tuple[str, tuple[str, ...] | None]], ...]:
    # Pure and regex-heavy; the update rule reads every candidate's slots for each new
    # claim, so a conversation's current rows are parsed once, not once per claim. The
    # frames are matched once per statement (_slot_frames), whatever the names: only the
    # holder depends on them (is_candidate asks with none, the rules with the scope's).
    found: dict[str, tuple[str, tuple[str, ...] | None]] = {}
    for name, key, value, prefix in _slot_frames(statement):
        holder = _holder(prefix, names)
        if name == "relationship" and holder and _COUPLE.search(prefix) and (
                {w.lower() for w in re.findall(r"\w+", prefix)}
                & {part for n in names for part in n.split()}):
            holder = ()  # "Jonah and Sam made it official": Sam's, with Jonah
        found.setdefault(key, (value, holder))
    return tuple(found.items())


@lru_cache(maxsize=8192)
def _slot_frames(statement: str) -> tuple[tuple[str, str, str, str], ...]:
    """(slot name, slot key, value, the words before it that say whose) per frame the
    statement matches, the first frame of each slot."""
    body = _ABBREVIATION.sub(r"\1", claim_body(statement))
    low = lowered(body)
    found: list[tuple[str, str, str, str]] = []
    for name, frames in _GATED_SLOTS:
        for frame, words in frames:
            # A frame none of whose words the statement has cannot match (exact; see
            # memhouse.core.needles): most of the ~70 frames are ruled out by a substring
            # test instead of a search at every position.
            if not may_match(words, low):
                continue
            match = frame.search(body)
            if match is None:
                continue
            groups = match.groupdict()
            value = groups["v"].strip()
            if _norm(value).rstrip(".") in _EMPTY_VALUES:
                continue
            if name == "has" and not _NAMING_VALUE.search(value):
                continue
            if name in _PLACE_SLOTS and _INDEFINITE.match(value):
                continue
            # Possessives inside the frame ("Sam's sister's k") belong to the holder too.
            prefix = body[:match.start()]
            if groups.get("k") and match.start("k") < match.start("v"):
                # Possessives before the attribute, also those the key itself starts with
                # ("Sam's parents' home airport" is the parents').
                leading = re.match(r"(?:\w+(?:'s|\u2019s|s')\s+)+", groups["k"])
                prefix += " " + " ".join(re.findall(r"\w+(?:'s|\u2019s|s')(?=\s)",
                                                    body[match.start():match.start("k")]))
                prefix += " " + (leading.group(0) if leading else "")
            else:
                # An object that holds it: "transferred Sam's daughter to Westbrook".
                held = _OBJECT_HOLDER.search(body[match.start():match.start("v")])
                if held is not None:
                    prefix = held.group(0)
            key = name if not groups.get("k") else f"{name}:{_norm(groups['k'])}"
            found.append((name, key, _norm(value), prefix))
            break
    return tuple(found)


def single_slots(statement: str) -> dict[str, str]:
    """slot key -> value for the one-value attributes a statement states."""
    return {key: value for key, (value, _) in slot_values(statement).items()}


def multi_heads(statement: str) -> set[str]:
    return {m.group(0).lower() for m in MULTI_HEADS.finditer(claim_body(statement))}


def has_update_cue(statement: str) -> bool:
    return bool(UPDATE_CUES.search(claim_body(statement)))


_NEGATED = re.compile(r"^(?:not|no longer|never) ")


def _differs(new: str, old: str) -> bool:
    if bool(_NEGATED.match(new)) != bool(_NEGATED.match(old)):
        return True  # "single" -> "not single"
    # Token sets, not substrings: "May 1" -> "May 15" differs, "Denver" -> "Denver,
    # Colorado" does not.
    a, b = set(re.findall(r"[\w@.+-]+", new)), set(re.findall(r"[\w@.+-]+", old))
    return bool(a) and bool(b) and not a <= b and not b <= a


def _says_more(new: str, old: str, names: frozenset[str]) -> bool:
    """The new claim carries something the old one does not (not a restatement)."""
    return bool(set(content_words(claim_body(new), names=names))
                - set(content_words(claim_body(old), names=names)))


def cosines(new: str, olds: list[str]) -> list[float]:
    from retrieval.embedding import get_embedder

    vectors = get_embedder().embed_documents([new, *olds])
    head = vectors[0]
    return [sum(a * b for a, b in zip(head, v, strict=True)) for v in vectors[1:]]


# Wording that only ever announces a change of something already known.
STRONG_CUES = re.compile(
    r"\b(?:instead|no longer|not any ?more|any ?more|switched|changed|rescheduled|postponed"
    r"|replaced|from now on|turns out|going forward|these days|relocated|moved (?:to|over)"
    r"|not \w+ but)\b", _I)
# A changed fact worded without a frame ("doing the Berlin marathon instead") replaces a
# statement only when the two are this close; chosen so that no pair among the LoCoMo dev
# conversations' own statements qualifies (conversations state few real changes).
STRONG_CUE_MIN_COSINE = 0.83
STRONG_CUE_RECENT = 30
_NEGATION = re.compile(r"\b(?:not|no longer|never|isn't|aren't|wasn't|doesn't|don't|didn't"
                       r"|won't|can't|cannot|no)\b|n't\b", _I)
_POLARITY_NOISE = frozenset({"actually", "turns", "out", "anymore", "longer", "really",
                             "after", "all", "now", "still"})


def _polarity_flip(new: str, old: str, names: frozenset[str]) -> bool:
    """The same claim with its polarity turned: "Sam is allergic to cats" -> "Turns out
    Sam is not allergic to cats"."""
    b = claim_body(old)
    wb = _polarity_words(b, names)
    # Clause by clause: "The allergist retested Sam and Sam is not allergic to cats".
    for a in _CLAUSES.split(claim_body(new)):
        if _negated(a) == _negated(b):
            continue
        wa = _polarity_words(a, names)
        if wa == wb and (len(wa) >= 2 or (bool(wa) and a == claim_body(new))):
            return True
    return False


# The rules compare each placed claim with up to CANDIDATE_LIMIT current rows: what they
# read of one text is computed once per text (pure functions of it), not once per pair.
@lru_cache(maxsize=8192)
def _polarity_words(text: str, names: frozenset[str]) -> frozenset[str]:
    return frozenset(content_words(text, names=names)) - _POLARITY_NOISE


@lru_cache(maxsize=8192)
def _negated(text: str) -> bool:
    return bool(_NEGATION.search(text))


_CLAUSES = re.compile(r"[,;]\s+|\s+(?:and|but|so)\s+(?!others\b)", _I)


_NUMBER = (r"(?:\d[\d,.:]*|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven"
           r"|twelve|a few|several|dozens?|hundreds?)")
_NUMBER_TOKEN = re.compile(rf"^{_NUMBER}$", _I)


def _count_changed(new: str, old: str) -> bool:
    """The same sentence with another number in it: "Sam has two cats" -> "Sam has three
    cats now" (a count, an amount, a time of day)."""
    a, na = _numbered(new)
    b, nb = _numbered(old)
    if not na or not nb or na == nb:
        return False
    return [w for w in a if w not in na] == [w for w in b if w not in nb]


@lru_cache(maxsize=8192)
def _numbered(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """_count_changed's reading of a text: its tokens, and those of them that are numbers."""
    words = re.findall(r"[\w$\u20ac\u00a3.,:]+", claim_body(text).lower())
    tokens = tuple(w.strip(".,") for w in words if w.strip(".,") not in _POLARITY_NOISE)
    return tokens, tuple(w for w in tokens if _NUMBER_TOKEN.match(w.lstrip("$\u20ac\u00a3")))


# Giving something up: whatever current statement names that thing is out of date ("sold
# the Civic" retires "drives a Honda Civic"; "switched from Vim" retires "uses Vim").
ABANDON = re.compile(
    r"\b(?:stopped (?:seeing|using|going to|taking|eating|drinking|playing|working (?:at|for"
    r"|with)|attending|visiting|dating|banking with)|quit|left|sold|cancel+ed|gave up(?: on)?"
    r"|dropped|ditched|got rid of|retired from|moved (?:away )?from|moved out of"
    r"|(?:switched|migrated|changed|converted|moved|transferred)(?: [\w'\u2019]+){0,4}?"
    r" (?:away )?from"
    r"|renamed \w+ from"
    r"|renamed from|traded in|broke up with|unsubscribed from|instead of|rather than"
    r"|handed (?:\w+ )?over|last day at|no longer (?:uses?|using|sees?|seeing|goes to|attends?"
    r"|plays?|works? (?:at|for|with)|banks? with|has|have|owns?|drives?|lives? (?:in|at|with))"
    # Leaving something behind (FrameNet Quitting, Quitting_a_place, Departing,
    # Abandonment, Activity_stop, Personal_relationship's "end"): said with a preposition.
    r"|moved on from|done with|finished with|walked away from|stepped (?:down|away) from"
    r"|parted ways with|cut ties with|split (?:up )?(?:from|with)|separated from"
    r"|said goodbye to|packed up|cleared out|closed (?:my|our|his|her|their)"
    r"|deleted (?:my|our|his|her|their)|ended (?:my|our|his|her|their)"
    r"|no longer (?:with|at|in|on|into|doing)|no more"
    # a resignation, a withdrawal: "handed in my notice at Grindhouse", "took our boy out of
    # Oakfield", "swapped Korean for Italian"
    r"|handed in (?:my|our|his|her|their|the) (?:notice|apron|badge|keys|resignation)"
    r"(?: (?:at|to))?|took (?:\w+ ){1,3}out of|pulled (?:\w+ ){1,3}out of"
    r"|(?:swapped|exchanged|replaced|ditched) (?=\w+(?: \w+)? for\b))"
    rf" (?P<obj>[\w .&'\u2019-]{{2,50}}?)(?: (?:to|is|was|into)\b|{_END})", _I)
# The same with the thing between the verb and its particle (FrameNet Exchange,
# Giving, Surrendering_possession): "traded the Civic in", "handed the team over to Marco",
# "gave my old phone away".
ABANDON_SPLIT = re.compile(
    r"\b(?:traded|trading|handed|handing|gave|giving|signed|signing|turned|turning|sold"
    r"|selling|passed|passing)"
    r" (?:(?:the|my|our|his|her|their|that|this) )?(?P<obj>[\w .&'\u2019-]{2,40}?)"
    r" (?:in|over|away|off|back)\b", _I)
# Ended, told with the thing first: "the veggie phase is over", "Leeds wasn't for me".
# The thing is a short noun phrase and the ending closes its clause: "once John is done
# reading it" ends nothing (LoCoMo dev).
ABANDON_AFTER = re.compile(
    r"^(?:(?:actually|so|well|honestly|anyway),? )?(?:(?:the|my|our|his|her|their) )?"
    r"(?P<obj>[\w&'\u2019-]+(?: [\w&'\u2019-]+){0,3}?) (?:(?:is|was|are|were) "
    r"(?:officially |finally |so |totally |completely )?(?:over|done|finished|history"
    r"|a thing of the past|behind \w+)(?=\s*(?:[.,;:!?]|$|now\b|for good\b|and\b))"
    r"|(?:wasn't|isn't|was not|is not|weren't|aren't) (?:really )?for \w+\b)", _I)


def abandoned_things(body: str) -> list[str]:
    """What a claim says was given up, left or ended (the objects of ABANDON,
    ABANDON_SPLIT and ABANDON_AFTER); "won't quit", "never left" give up nothing."""
    return list(_abandoned_things(body))


@lru_cache(maxsize=8192)
def _abandoned_things(body: str) -> tuple[str, ...]:
    # Read for every stored candidate of each new claim (a late arrival's check), so
    # cached like _slot_values.
    out = [m.group("obj") for m in ABANDON.finditer(body)
           if not _NEGATION.search(body[max(0, m.start() - 12):m.start()])]
    out += [m.group("obj") for m in ABANDON_SPLIT.finditer(body)
            if not _NEGATION.search(body[max(0, m.start() - 12):m.start()])]
    after = ABANDON_AFTER.match(body.strip())
    if after is not None and not _NEGATION.search(after.group("obj")):
        out.append(after.group("obj"))
    return tuple(o.strip() for o in out if o.strip())
_TITLES = frozenset({"dr", "mr", "mrs", "ms", "mx", "prof", "the", "my", "his", "her", "their",
                     "our", "a", "an", "old", "current", "usual"})


def _stem(word: str) -> str:
    word = word.lower().strip(".'\u2019")
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") \
        else word


_SUFFIX = re.compile(r"(?:ing|ed|es|er|e|s)$")


def _root(word: str) -> str:
    """A word's stem for matching a thing given up against what names it ("left nursing"
    and "is a nurse"): the commonest English inflection or -er/-e off, four letters kept."""
    word = _stem(word)
    cut = _SUFFIX.sub("", word)
    return cut if len(cut) >= 4 else word


# Words for a stretch of one's life, not the thing itself ("the vegan phase", "my gym era").
_SPELL = _wordset("""phase era days period stage streak kick thing life lifestyle chapter
experiment journey habit membership subscription account contract lease plan pass""")


def _names_thing(old: str, thing: str, names: frozenset[str]) -> bool:
    """`old` mentions `thing` (its head word, or every word of a name)."""
    words = [w for w in re.findall(r"[\w'\u2019-]+", thing)
             if w.lower() not in _TITLES and content_words(w, names=names)]
    if len(words) > 1 and words[-1].lower() in _SPELL:
        words = words[:-1]  # "the vegetarian phase is over": the vegetarian part
    if not words:
        return False
    have = {_root(w) for w in re.findall(r"[\w'\u2019-]+", claim_body(old))}
    proper = [w for w in words if w[:1].isupper()]
    if proper:  # a name: all of it ("the Harbor Choir last month")
        return all(_root(w) in have for w in proper)
    return _root(words[-1]) in have or all(_root(w) in have for w in words)


# A change stated by what it changed to: "upgraded to a Pixel 9", "the offsite moved to
# Boulder", "rent went up to $2,350", "on day shifts now".
CHANGE_TO = re.compile(
    r"\b(?:switched|moved|changed|upgraded|downgraded|promoted|raised|cut|lowered|reduced"
    r"|ported|transitioned"
    r"|increased|pushed|slipped|rescheduled|renamed|migrated|transferred|converted|bumped"
    r"|extended|shortened|postponed|delayed|went (?:up|down)|dropped|brought forward"
    r"|(?:has |have )?gone (?:up|down))\b[\w$' -]{0,40}? (?:to|until|till|into) "
    # ...a value, not a verb: "it pushed Jon to take the plunge" is no change of anything.
    r"(?!(?:keep|take|go|be|do|make|get|see|start|try|help|work|play|fight|find|give|put"
    r"|think|look|learn|become|stay|pursue|follow|chase|focus|continue|write|share|finish"
    r"|believe|move on|step|reach|achieve|embrace|explore)\b)", _I)
# "now", "these days": the claim says what holds from here on. Not the "now" of a story
# ("and now", "now that", "seven years now") or of this moment ("right now", "for now").
CURRENT_CUES = re.compile(
    r"\b(?:instead|these days|lately|from now on|going forward|any ?more|no longer)\b"
    r"|(?<!\bright )(?<!\bfor )(?<!\bjust )(?<!\bby )(?<!\buntil )(?<!\band )(?<!\bso )"
    r"(?<!\bbecause )(?<!\bwhile )(?<!\byears )(?<!\bmonths )(?<!\bweeks )(?<!\bdays )"
    r"(?<!\bages )(?<!\btime )\bnow\b(?:(?=\s*[.!]?\s*$)|(?=\s+(?:\w+s|on|in|at|with"
    r"|for)\b)(?!\s+(?:that|and then|is the time)\b))", _I)
# Additions are not replacements: "is now also mentoring", "another", "too".
ADDITIVE = re.compile(r"\b(?:also|too|as well|another|other|second|additional|in addition"
                      r"|more than one|both)\b", _I)
# Words that say what is done, not what it is about, and so cannot tie two claims to one
# attribute ("moved the meeting" and "moved the appointment" share only the verb).
_TIME_WORDS_ = _wordset("day days week weeks month months year years time times")
_VERBISH = _wordset("""switched moved changed upgraded downgraded promoted raised cut lowered
reduced increased pushed slipped rescheduled renamed migrated transferred converted bumped
extended shortened postponed delayed went gone dropped brought forward now instead these days
lately anymore longer going take takes taking took use uses using used get gets got make
makes made go goes have has had keep keeps kept start started starts stop stopped like likes
liked love loves want wants need needs see sees saw seeing say says said think thinks feel
feels usually always often really back""") | _TIME_WORDS_
CHANGE_MIN_COSINE = 0.55
ABANDON_MIN_COSINE = 0.35


def _heads(text: str, names: frozenset[str]) -> set[str]:
    return {_stem(w) for w in content_words(claim_body(text), names=names)
            if w not in _VERBISH and not w.endswith("ed")}


_AUX = _wordset("""is are am was were be been being has have had get gets got getting
used 's 're 'm""")
_IRREGULAR_PAST = _wordset("""went was were did saw met got bought sold came took made had
found left told gave ran wrote began brought thought felt kept spent won lost""")


@lru_cache(maxsize=8192)
def _past_event(statement: str) -> bool:
    """A finished event ("Sam donated the old car", "Sam started learning"), as opposed
    to a state ("Sam is based in Toronto", "Sam has been using Vim")."""
    words = re.findall(r"[\w'\u2019]+", claim_body(statement).lower())
    for before, word in zip(["", *words], words, strict=False):
        past = word in _IRREGULAR_PAST or (word.endswith("ed") and len(word) > 4)
        if past and before not in _AUX:
            return True
    return False


def _change_shares_attribute(new: str, old: str, names: frozenset[str]) -> bool:
    """A change-worded claim and a current one about the same thing: they share a word
    naming the attribute, and each says something the other does not (the values)."""
    if _past_event(old) or ADDITIVE.search(claim_body(new)):
        return False
    a, b = _values(new, names), _values(old, names)
    return bool(_heads(new, names) & _heads(old, names)) and bool(a - b) and bool(b - a)


@lru_cache(maxsize=8192)  # pure; read for every candidate of each new claim (_overrides)
def _values(text: str, names: frozenset[str]) -> frozenset[str]:
    """What a claim says, numbers included ("$25k", "10pm")."""
    body = claim_body(text)
    words = {_stem(w) for w in content_words(body, names=names)
             if w not in _VERBISH - _TIME_WORDS_ and not w.endswith("ed")}
    return frozenset(words | {n.lower() for n in re.findall(r"\d[\w:.,$]*", body)})


@lru_cache(maxsize=4096)  # asked by the placer and again by find_update for each claim
def is_candidate(statement: str) -> bool:
    """Could this claim update anything at all? (Most claims cannot: no query then.)"""
    body = claim_body(statement)
    return (bool(single_slots(statement)) or bool(multi_heads(statement))
            or bool(STRONG_CUES.search(body)) or bool(_NEGATION.search(body))
            or bool(abandoned_things(body)) or bool(CHANGE_TO.search(body))
            or bool(CURRENT_CUES.search(body))
            or bool(re.search(rf"\b{_NUMBER}\b", body, _I)))


def best_update(statement: str, olds: list[str], *, names: frozenset[str] = frozenset()
                ) -> tuple[int, str, float, bool] | None:
    """Pure part of the rule: which of `olds` (same subject, current) `statement` updates,
    as (index, slot, cosine, cue), or None."""
    single = slot_values(statement, names)
    heads = multi_heads(statement)
    body = claim_body(statement)
    new_cue = bool(SCHEDULE_CUES.search(body))
    strong = bool(STRONG_CUES.search(body))
    shared: list[tuple[int, str, bool]] = []
    for index, old in enumerate(olds):
        if _polarity_flip(statement, old, names):
            return index, "polarity", 1.0, True
        if _count_changed(statement, old):
            return index, "count", 1.0, True
    # "won't quit", "never left": not giving anything up.
    abandoned = abandoned_things(body)
    changes = bool(CHANGE_TO.search(body) or CURRENT_CUES.search(body))
    if not single and not heads and not strong and not abandoned and not changes:
        return None
    loose: list[int] = []
    given_up: list[int] = []
    changed: list[int] = []
    for index, old in enumerate(olds):
        old_single = slot_values(old, names)
        same = [k for k in single if k in old_single
                and _differs(single[k][0], old_single[k][0])
                and same_holder(single[k][1], old_single[k][1])]
        if same:
            shared.append((index, same[0], True))
            continue
        # The change wording is on the later claim, which may be the one already stored
        # (an older message arriving late).
        common = heads & multi_heads(old) if new_cue or SCHEDULE_CUES.search(
            claim_body(old)) else set()
        if common and _says_more(statement, old, names):
            shared.append((index, sorted(common)[0], False))
        elif abandoned and not abandoned_things(claim_body(old)) and any(
                _names_thing(old, thing, names) for thing in abandoned):
            given_up.append(index)
        elif changes and index < STRONG_CUE_RECENT and _change_shares_attribute(
                statement, old, names):
            changed.append(index)
        elif strong and index < STRONG_CUE_RECENT and _says_more(statement, old, names):
            loose.append(index)
    if not shared and not loose and not given_up and not changed:
        return None
    # A frame, its holder and a new value already tie a pair: closeness is then read on
    # the claims themselves too ("Ravi told Nina he transferred to the Chicago office"
    # is far from "Ravi works out of the Austin office" only through its attribution).
    bodies = {index: cos for (index, _, _), cos in zip(shared, cosines(
        body, [claim_body(olds[index]) for index, _, _ in shared]), strict=True)} \
        if shared else {}
    pairs = [*shared, *((index, "cue", False) for index in loose),
             *((index, "abandoned", False) for index in given_up),
             *((index, "change", False) for index in changed)]
    scores = cosines(statement, [olds[index] for index, _, _ in pairs])
    cue = has_update_cue(statement)
    best: tuple[int, str, float, bool] | None = None
    for (index, slot, is_single), cos in zip(pairs, scores, strict=True):
        cos = max(cos, bodies.get(index, cos)) if is_single else cos
        floor = (STRONG_CUE_MIN_COSINE if slot == "cue" else
                 ABANDON_MIN_COSINE if slot == "abandoned" else
                 CHANGE_MIN_COSINE if slot == "change" else
                 SINGLE_MIN_COSINE if is_single else MULTI_MIN_COSINE)
        if cos >= floor and (best is None or cos > best[2]):
            best = (index, slot, round(cos, 4), cue)
    return best


def find_update(item: Knowledge, *, names: frozenset[str] = frozenset(),
                replaces: str | None = None, recent: Sequence[Knowledge] = (),
                candidates: Callable[[], list[Candidate]] | None = None) -> Update | None:
    """The current row that `item` (just placed) updates, if any: the one a model-backed
    extractor named (only a current row about the same subject in the same scope), else
    the closest match of the model-free rule.

    `recent`: rows placed in memory but not yet written (a batch's pending moves), all
    newer than any row in the database; those among them that are candidates come first,
    newest first, as the query would have returned them once written. `candidates`:
    what _candidates(item, recent) returns, read once for find_update and find_conflict
    (settle_update)."""
    if replaces is not None:
        named = Knowledge.objects.filter(
            account_id=item.account_id, scope_id=item.scope_id, pk=replaces,
            subject_peer_id=item.subject_peer_id, state__in=CANDIDATE_STATES).exclude(
            pk=item.pk).first()
        if named is not None:
            return Update(old=named, slot="model", cosine=1.0, cue=True)
    if not is_candidate(item.statement):
        return None  # most claims: no query at all
    pool = candidates() if candidates is not None else _candidates(item, recent)
    found = best_update(item.statement, [c.statement for c in pool], names=names)
    if found is None:
        return _given_up_later(item, pool, names)
    index, slot, cosine, cue = found
    return Update(old=_whole(pool[index]), slot=slot, cosine=cosine, cue=cue)


class Stored(NamedTuple):
    """A stored candidate as the rules read it: its id and its text. Up to
    CANDIDATE_LIMIT of them per placed claim, so not whole rows (a model instance each);
    the one an update or a contradiction names is read whole (_whole). A tuple: 200 of
    them per claim cost a frozen dataclass's __init__ each."""

    pk: Any
    statement: str


Candidate = Knowledge | Stored


def _whole(row: Candidate) -> Knowledge:
    """The row a candidate is: a pending one already is; a stored one is read."""
    return row if isinstance(row, Knowledge) else Knowledge.objects.get(pk=row.pk)


def _given_up_later(item: Knowledge, candidates: Sequence[Candidate],
                    names: frozenset[str]) -> Update | None:
    """An older claim arriving late whose thing a stored row said after it gave up ("I
    train at Iron Temple" after "Cancelled my Iron Temple membership"): settle_update then
    retires the late claim at once (f4_late_arrival)."""
    if abandoned_things(claim_body(item.statement)):
        return None
    hits = [n for n, c in enumerate(candidates[:STRONG_CUE_RECENT])
            if any(_names_thing(item.statement, thing, names)
                   for thing in abandoned_things(claim_body(c.statement)))]
    at = said_at(item) if hits else None
    if at is None:
        return None
    later = set(Knowledge.objects.filter(pk__in=[candidates[n].pk for n in hits])
                .annotate(at=Max("sources__message__occurred_at")).filter(at__gt=at)
                .values_list("pk", flat=True))
    hits = [n for n in hits if candidates[n].pk in later]
    if not hits:
        return None
    scores = cosines(item.statement, [candidates[n].statement for n in hits])
    cos, n = max(zip(scores, hits, strict=True))
    if cos < ABANDON_MIN_COSINE:
        return None
    return Update(old=_whole(candidates[n]), slot="abandoned", cosine=round(cos, 4), cue=True)


def _candidates(item: Knowledge, recent: Sequence[Knowledge]) -> list[Candidate]:
    """Current rows about `item`'s subject in its scope, newest first, the batch's
    pending ones (not yet written) before the stored ones (as Stored)."""
    pending = sorted((row for row in recent
                      if row.pk != item.pk and row.scope_id == item.scope_id
                      and row.subject_peer_id == item.subject_peer_id
                      and row.state in CANDIDATE_STATES),
                     key=lambda row: row.inserted_at, reverse=True)
    limit = max(0, CANDIDATE_LIMIT - len(pending))
    if not limit:
        return [*pending[:CANDIDATE_LIMIT]]
    excluded = [item.pk, *(row.pk for row in pending)]
    # The query the ORM would build for
    #   Knowledge.objects.filter(account_id=, scope_id=, subject_peer_id=,
    #   state__in=CANDIDATE_STATES).exclude(pk__in=excluded).order_by("-inserted_at")
    #   .values_list("pk", "statement")[:limit]
    # written out (same text, so the same plan and the same order among equal stamps):
    # it runs once per candidate claim, and building the queryset cost ~0.6 ms of CPU of
    # the ~0.9 each call took (bench/README.md, "third round").
    sql = _CANDIDATES_SQL[item.subject_peer_id is None].format(
        excluded=", ".join(["%s"] * len(excluded)))
    params: list[Any] = [item.account_id, item.scope_id, *CANDIDATE_STATES]
    if item.subject_peer_id is not None:
        params.append(item.subject_peer_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *excluded, limit])
        stored = cursor.fetchall()
    return [*pending[:CANDIDATE_LIMIT], *(Stored(pk, statement) for pk, statement in stored)]


def _candidates_sql(subject_null: bool) -> str:
    table = Knowledge._meta.db_table
    subject = (f'"{table}"."subject_peer_id" IS NULL' if subject_null
               else f'"{table}"."subject_peer_id" = %s')
    states = ", ".join(["%s"] * len(CANDIDATE_STATES))
    return (f'SELECT "{table}"."id" AS "pk", "{table}"."statement" AS "statement" '
            f'FROM "{table}" WHERE ("{table}"."account_id" = %s AND '
            f'"{table}"."scope_id" = %s AND "{table}"."state" IN ({states}) AND {subject} '
            f'AND NOT ("{table}"."id" IN ({{excluded}}))) '
            f'ORDER BY "{table}"."inserted_at" DESC LIMIT %s')


# [subject_peer_id is None] -> the candidate query with {excluded} left to fill.
_CANDIDATES_SQL = (_candidates_sql(False), _candidates_sql(True))


# --- not sure it is an update: a contradiction read time settles --------------------------
#
# The rule above supersedes only when it is sure. A claim that names a new value for an
# attribute a current row holds one value of ("Sam picked up a Mazda 3" after "Sam drives
# a Honda Civic"; "Tom Reyes is Sam's boss" after "Sam's manager is Helen Cho") but says
# so in words no frame knows is a *contradiction*: both stay current, a `contradicts`
# relation points from the newer (by when it was said) to the older, reads put the newer
# first and mark the older `possibly_outdated` (retrieval.conflicts), and the subject
# (their own facts) or a curator (shared facts) is asked to settle it.
CONFLICT_MIN_COSINE = 0.5
CONTRADICTION_WINDOW = timedelta(days=14)  # the subject's question, as a confirmation's
# A value is named: a proper name or a number. A capital that only starts a sentence or
# a quoted clause ("Time flies", "Caroline said Family moments...") names nothing.
_NAME_TOKEN = r"(?:(?-i:[A-Z])(?:[a-z]{0,2}\.(?= )|[\w&'-]*[\w&])|\d[\w:.-]*\w|\d)"
_NAMED = re.compile(rf"(?<![\w'@.-]){_NAME_TOKEN}(?: {_NAME_TOKEN})*")
_CLAUSE_START = re.compile(r"(?:^|[.!?:;\"(\u2013\u2014-]\s*|\b(?:said|says|told \w+|that)\s+)"
                           r"(?-i:[A-Z])[\w'-]*\s*$")
_NOT_NAMES = _wordset("""i i'm i've i'd i'll the a an this that these those it they he she we
you my our his her their its and but so or then also now today yesterday tomorrow
monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs
fri sat sun""")


def _named(text: str, names: frozenset[str]) -> dict[str, str]:
    """The named values of a claim, lower-cased -> as written, the subject's names left
    out."""
    return dict(_named_values(text, names))


@lru_cache(maxsize=8192)
def _named_values(text: str, names: frozenset[str]) -> tuple[tuple[str, str], ...]:
    body = claim_body(text)
    name_words = {part for name in names for part in name.split()}
    out: dict[str, str] = {}
    for match in _NAMED.finditer(body):
        words = match.group(0).split()
        if len(words) == 1 and _CLAUSE_START.search(body[:match.start()] + words[0]) \
                and not words[0][0].isdigit():
            continue  # a sentence's first word, alone ("Time flies"; "Tom Reyes" stays)
        kept = [w for w in words if w.lower().removesuffix("'s").strip(".'") not in name_words
                and w.lower().strip(".'") not in _NOT_NAMES]
        if kept:
            phrase = " ".join(kept).removesuffix("'s").strip(".'")
            out[phrase.lower()] = phrase
    return tuple(out.items())


def may_conflict(statement: str, names: frozenset[str] = frozenset()) -> bool:
    """Could this claim contradict a current row? Only one that names something."""
    return (bool(_named(statement, names)) or bool(attributes(statement, names))) \
        and not ADDITIVE.search(claim_body(statement))


@lru_cache(maxsize=8192)
def _named_keys(text: str, names: frozenset[str]) -> frozenset[str]:
    return frozenset(key for key, _ in _named_values(text, names))


@lru_cache(maxsize=8192)
def _additive(text: str) -> bool:
    return bool(ADDITIVE.search(claim_body(text)))


@lru_cache(maxsize=8192)
def _words_of(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"[\w@.+'-]+", claim_body(text).lower()))


@lru_cache(maxsize=8192)
def _content_count(text: str, names: frozenset[str]) -> int:
    return len(content_words(claim_body(text), names=names))


def _overrides(framed: str, other: str, names: frozenset[str], *, told: bool = False
               ) -> tuple[str, str, list[str]] | None:
    """(slot, old value as written, the other claim's new named values) when `other`
    may name another value for a one-value attribute `framed` states: `framed` states it
    of the subject itself (a SINGLE_SLOTS frame, its holder the subject) with a named
    value, and `other` does not repeat that value but names something `framed` does
    not.

    `told`: the message `other` came in says something changed (change_told); then a
    described value counts too ("is a vegetarian", "takes the bus") and so does an event
    ("picked up a Mazda 3"), the new words being what `other` says that `framed` does
    not."""
    # Asked for every candidate of each new claim (best_conflict, find_conflict): the
    # readings of each text are cached (_additive, _slot_values, _words_of,
    # _named_values, _content_count, _values), the same values as read afresh.
    if _past_event(framed) or _additive(other):
        return None
    if _slot_values(other, names):
        # A claim with a frame of its own says which attribute it is about, and the
        # update rule has already weighed it: "Priya's husband works at Google" or
        # "Priya's favorite movie is Heat" is another attribute, not a new value.
        return None
    framed_named = _named_keys(framed, names)
    fresh = [v for k, v in _named_values(other, names) if k not in framed_named]
    if told and not fresh:
        if _content_count(framed, names) > TOLD_MAX_WORDS:
            return None  # the attribute is a detail of a longer claim, not what it states
        fresh = sorted(_values(other, names) - _values(framed, names))
    if not fresh:
        return None
    words = _words_of(other)
    written = _named(framed, names)
    event = _past_event(other) and not told
    for key, (value, holder) in _slot_values(framed, names):
        if holder not in ((), None):
            continue  # "Sam's sister lives in Madrid" is not Sam's home
        value_words = set(re.findall(r"[\w@.+'-]+", value.lower())) - _NOT_NAMES
        if not value_words or value_words & words:
            continue  # the other claim repeats (or refines) the value
        # Something that happened ("went to Lisbon", "rented a Toyota for the trip") is
        # no new home or car unless it names the attribute itself ("standup slides to
        # 9:30" of "the standup is at 9am").
        if event and not (":" in key and set(key.split(":", 1)[1].split()) <= words):
            continue
        # Only a named value ("Leeds", "Dr. Patel", "34"), not a description ("married",
        # "to give kids a loving home"): a description has no other value to be replaced by.
        as_written = [w for k, w in written.items() if set(k.split()) & value_words]
        if as_written:
            return key, " ".join(as_written), fresh
        if told:
            return key, value, fresh
    return None


# A message that says something changed, in the words people use for it (grouped as
# FrameNet's frames: Activity_start, Getting and Commerce_buy, Replacing and Exchange,
# Becoming, Quitting and Departing, Activity_stop, Change_event_time), or by a time that
# says "from here on". It never decides alone: it lets a claim of that message count as
# another value of an attribute a current row states (see _overrides, `told`).
CHANGE_TOLD = re.compile(
    r"\b(?:start(?:ed|ing)|beg[au]n|took up|taking up|picked up|picking up|signed up"
    r"|bought|buying|got (?:a|an|my|our|the) (?:new|keys)|closed on|signed (?:a|the) lease"
    r"|switch(?:ed|ing)|swap(?:ped|ping)|trad(?:ed|ing)|replac(?:ed|ing)|chang(?:ed|ing)"
    r"|upgrad(?:ed|ing)|downgrad(?:ed|ing)|convert(?:ed|ing)|retrain(?:ed|ing)"
    r"|became|become|turned into|ended up|end up|now it's|it's now|now"
    r"|left|leaving|quit(?:ting)?|moved|moving|relocat(?:ed|ing)|transferr(?:ed|ing)"
    r"|retir(?:ed|ing)|gave up|giving up|stopped|stopping|no longer|no more|any ?more"
    r"|is over|was over|done with|moved on|packed up|handed|reassigned|replaced"
    r"|rescheduled|postponed|pushed|slides?|bumped"
    r"|these days|nowadays|from now on|going forward|as of|since|instead|new|finally"
    r"|from (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|next \w+"
    r"|tomorrow|today))\b", _I)
# Attributes a told change may reach: those a person holds one value of at a time (a
# short frameless state, "uses Android" -> "switched to an iPhone", was tried: 15 false
# marks on LoCoMo dev at a masked closeness of 0.55, none of which a frame would pass). Not
# "has" (any "X's thing is ...": "Caroline's goal is to give kids a loving home") nor
# "status" ("the store is open"), whose described values other talk stays close to.
TOLD_SLOTS = frozenset({"residence", "household", "office", "employer", "role",
                        "relationship", "diet", "car", "school", "commute", "drink", "gym",
                        "manager", "team", "favorite", "age", "phone", "email", "timezone",
                        "lead", "venue", "where", "name", "deadline", "priority"})
# Read on the claims with the subject's names masked: two claims about one person are
# close through the name alone ("Melanie is married" / "Melanie got new shoes": 0.64
# as written, 0.22 masked).
TOLD_MIN_COSINE = 0.4
# A described value is reached only in a claim that states the attribute and little else
# ("Sam is a vegetarian", "Sam rents an apartment downtown"), not in a longer one a frame
# happens to match part of ("desserts that work for everyone's diets").
TOLD_MAX_WORDS = 6


@lru_cache(maxsize=4096)  # pure; asked of a message for each of its claims and candidates
def change_told(text: str) -> bool:
    """Does a message (or claim) say that something changed?"""
    return bool(CHANGE_TOLD.search(text)) or bool(abandoned_things(claim_body(text)))


def best_conflict(statement: str, olds: list[str], *, names: frozenset[str] = frozenset(),
                  said_later: frozenset[int] = frozenset(), message: str = "",
                  told_later: frozenset[int] = frozenset()
                  ) -> tuple[int, str, float] | None:
    """Pure part: which of `olds` (same subject, current, none of them an update the rule
    is sure of) `statement` contradicts, as (index, slot, cosine), or None.

    The old row states a one-value attribute with a named value that the new claim names
    another value for (see _overrides), and the two claims are close. `said_later`:
    indices of rows said after the new claim (it arrived late); for those the frame may
    be on the new claim; `told_later`: those among them drawn from a message that told a
    change (the told path, the other way round).

    `message`: the whole message the claim was drawn from. When it says something
    changed (change_told), a claim of it that names no value but states another one for
    the same attribute ("ate my first steak" against "is a vegetarian") counts too, at a
    higher closeness (TOLD_MIN_COSINE)."""
    told = change_told(message or statement)
    if not told and not may_conflict(statement, names) and not said_later:
        return None
    picked: list[tuple[int, str, bool]] = []
    for index, old in enumerate(olds):
        found = _overrides(old, statement, names) or (
            _overrides(statement, old, names) if index in said_later else None)
        late_told = None if found is not None or index not in told_later \
            else _overrides(statement, old, names, told=True)
        if found is not None:
            picked.append((index, found[0], False))
        elif late_told is not None and late_told[0].split(":", 1)[0] in TOLD_SLOTS:
            picked.append((index, late_told[0], True))  # the stored row told the change
        elif told and (found := _overrides(old, statement, names, told=True)) is not None \
                and found[0].split(":", 1)[0] in TOLD_SLOTS:
            picked.append((index, found[0], True))
    if not picked:
        return _by_attribute(statement, olds, names=names, message=message, told=told,
                             said_later=said_later, told_later=told_later)
    named = [(index, key) for index, key, by_telling in picked if not by_telling]
    by_telling = [(index, key) for index, key, told_ in picked if told_]
    scored = [(pair, cos, CONFLICT_MIN_COSINE) for pair, cos in zip(
        named, cosines(statement, [olds[i] for i, _ in named]), strict=True)]
    if by_telling:  # read with the subject's names masked (see TOLD_MIN_COSINE)
        scored += [(pair, cos, TOLD_MIN_COSINE) for pair, cos in zip(
            by_telling, cosines(masked(statement, names),
                                [masked(olds[i], names) for i, _ in by_telling]), strict=True)]
    best: tuple[int, str, float] | None = None
    for (index, key), cos, floor in scored:
        if cos >= floor and (best is None or cos > best[2]):
            best = (index, key, round(cos, 4))
    if best is None:  # a frame's pair too far apart: the attribute may still tie one
        return _by_attribute(statement, olds, names=names, message=message, told=told,
                             said_later=said_later, told_later=told_later)
    return best


def masked(statement: str, names: frozenset[str]) -> str:
    """The claim without its attribution, the subject's names as "someone"."""
    body = claim_body(statement)
    if not names:
        return body
    pattern = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.sub(rf"\b(?:{pattern})(?:'s|\u2019s)?\b", "someone", body, flags=_I)


def _by_attribute(statement: str, olds: list[str], *, names: frozenset[str], message: str,
                  told: bool, said_later: frozenset[int], told_later: frozenset[int]
                  ) -> tuple[int, str, float] | None:
    """The old claim that gives another value of an attribute `statement` states (see
    governance.intake.attributes), with no shared word needed, as (index, "attr:<name>",
    masked cosine); for a row said after `statement` (`said_later`) the stored row is the
    newer one. The closeness only orders several such rows: it is low by nature when the
    values differ."""
    hits: list[tuple[int, str]] = []
    for index, old in enumerate(olds[:STRONG_CUE_RECENT]):
        if index in said_later:
            key = attribute_conflict(old, statement, names=names, told=index in told_later,
                                     new_event=_past_event(old),
                                     old_event=_past_event(statement))
        else:
            key = attribute_conflict(statement, old, names=names, told=told,
                                     message=message, new_event=_past_event(statement),
                                     old_event=_past_event(old))
        if key is not None:
            hits.append((index, key))
    if not hits:
        return None
    scores = cosines(masked(statement, names), [masked(olds[i], names) for i, _ in hits])
    cos, (index, key) = max(zip(scores, hits, strict=True), key=lambda pair: pair[0])
    return index, key, round(max(cos, 0.0), 4)


def find_conflict(item: Knowledge, *, names: frozenset[str] = frozenset(),
                  recent: Sequence[Knowledge] = (), message_text: str = "",
                  candidates: Callable[[], list[Candidate]] | None = None) -> Update | None:
    """The current row `item` contradicts without the rule being sure it is an update.
    `message_text`: the message it was drawn from (see best_conflict's `message`);
    `candidates` as for find_update."""
    if not may_conflict(item.statement, names) and not change_told(message_text) \
            and not slot_values(item.statement, names):
        return None  # a framed claim may be an older one arriving late (see `reverse`)
    rows = candidates() if candidates is not None else _candidates(item, recent)
    olds = [c.statement for c in rows]
    found = best_conflict(item.statement, olds, names=names, message=message_text)
    reverse = [n for n, c in enumerate(rows)
               if _overrides(item.statement, c.statement, names) or (
                   n < STRONG_CUE_RECENT and (_overrides(
                       item.statement, c.statement, names, told=True)
                       or shares_attribute(item.statement, c.statement, names)))
               ] if found is None else []
    at = said_at(item) if reverse else None
    if at is not None:
        # A framed claim arriving late: the stored rows said after it may name the newer
        # value without a frame of their own, or in a message that told the change.
        after = set(Knowledge.objects.filter(pk__in=[rows[n].pk for n in reverse])
                    .annotate(at=Max("sources__message__occurred_at")).filter(at__gt=at)
                    .values_list("pk", flat=True))
        later = [n for n in reverse if rows[n].pk in after]
        told_later = _told_messages([rows[n] for n in later]) if later else set()
        found = best_conflict(item.statement, olds, names=names,
                              said_later=frozenset(later), message=message_text,
                              told_later=frozenset(n for n in later
                                                   if rows[n].pk in told_later))
    if found is None:
        return None
    index, slot, cosine = found
    old = _whole(rows[index])
    old_at = said_at(old)
    if old_at is not None and old_at == said_at(item):
        return None  # two claims of one message say no change of each other
    return Update(old=old, slot=slot, cosine=cosine, cue=False)


def _told_messages(rows: Sequence[Candidate]) -> set[Any]:
    """The ids of `rows` drawn from a message that tells a change (change_told)."""
    from knowledge.models import KnowledgeSource

    return {kid for kid, text in KnowledgeSource.objects.filter(
        knowledge_id__in=[r.pk for r in rows], message__isnull=False)
        .values_list("knowledge_id", "message__text") if change_told(text or "")}


def _newer_older(a: Knowledge, b: Knowledge) -> tuple[Knowledge, Knowledge]:
    """(newer, older) by when each was said; `a`, the claim just placed, wins a tie or an
    unknown time (documents)."""
    at_a, at_b = said_at(a), said_at(b)
    if at_a is not None and at_b is not None and at_a < at_b:
        return b, a
    return a, b


def record_contradiction(item: Knowledge, other: Knowledge, *, confidence: float,
                         reason: str) -> Knowledge:
    """Link the pair (newer -> older, `contradicts`) and ask someone to settle it: the
    subject, when the older row is about a person (their own facts); else the curator
    queue. Returns the older row. Call inside the transaction that placed `item`."""
    from governance.models import Validation
    from governance.questions import validation_with_question
    from knowledge.models import Peer, Relation

    newer, older = _newer_older(item, other)
    _link(source=newer, target=older, type_=Relation.Type.CONTRADICTS, confidence=confidence)
    note = f"contradicted by {newer.pk}"
    human = older.subject_peer_id is not None and Peer.objects.filter(
        pk=older.subject_peer_id, kind=Peer.Kind.HUMAN).exists()
    if human:
        from django.utils import timezone

        validation_with_question(
            older, kind=Validation.Kind.CONTRADICTION, reason=reason,
            window=CONTRADICTION_WINDOW, now=timezone.now(),
            text=f"Since then: \u201c{newer.statement}\u201d Is this still true?",
            target_scope=older.scope, note=note)
    else:
        Validation.objects.get_or_create(
            account_id=older.account_id, knowledge=older, kind=Validation.Kind.CONTRADICTION,
            status=Validation.Status.OPEN,
            defaults={"reason": reason, "target_scope": older.scope, "note": note})
    return older


def said_at(item: Knowledge) -> datetime | None:
    """When the newest message supporting `item` was said (None for documents only)."""
    value: Any = item.sources.aggregate(at=Max("message__occurred_at"))["at"]
    return value


def speakers(item: Knowledge) -> set[Any]:
    """Peers whose messages support `item`, plus its proposer."""
    ids = set(item.sources.filter(message__isnull=False)
              .values_list("message__peer_id", flat=True))
    if item.proposed_by_id:
        ids.add(item.proposed_by_id)
    return ids


def _link(*, source: Knowledge, target: Knowledge, type_: str, confidence: float) -> None:
    from knowledge.models import Relation

    Relation.objects.get_or_create(account_id=source.account_id, source=source, target=target,
                                   type=type_, defaults={"confidence": confidence})


def _mark_supersedes(newer: Knowledge, older: Knowledge, *, confidence: float) -> None:
    from knowledge.models import Relation

    if newer.supersedes_id is None:
        # Not the statement or the state: the immutability trigger allows it.
        Knowledge.objects.filter(pk=newer.pk).update(supersedes=older)
        newer.supersedes_id = older.pk
    _link(source=newer, target=older, type_=Relation.Type.SUPERSEDES, confidence=confidence)


def settle_update(item: Knowledge, *, actor: ActorLike, names: frozenset[str] = frozenset(),
                  replaces: str | None = None, recent: Sequence[Knowledge] = (),
                  before_write: Callable[[], None] | None = None,
                  message_text: str = "",
                  learned: Callable[..., Update | None] | None = None) -> str | None:
    """Apply the update rule to a freshly placed row. Returns what happened:
    "superseded_old", "late_arrival", "contradiction" or None. Call inside the
    transaction that placed `item`.

    A batch passes its placed-but-unwritten rows as `recent` (see find_update) and a
    `before_write` that writes them, called once an update is found and before this
    reads sources or writes anything. `message_text`: the message `item` was drawn from
    (a change it tells reaches claims of it that name no value; see best_conflict).
    `learned`: a second pass for a claim the rules settle nothing for
    (governance.intake.update_pairs.find_learned_conflict, passed in by the pipeline: it
    reads this module, so this module does not import it)."""
    from governance.models import Validation
    from knowledge.lifecycle import transition
    from knowledge.models import Relation

    if item.state not in (lifecycle.ACTIVE, lifecycle.PROVISIONAL):
        return None  # held rows wait for a curator; rejected ones replace nothing
    pool: list[list[Candidate]] = []

    def candidates() -> list[Candidate]:  # one read for both rules (nothing written between)
        if not pool:
            pool.append(_candidates(item, recent))
        return pool[0]

    update = find_update(item, names=names, replaces=replaces, recent=recent,
                         candidates=candidates)
    if update is None:
        conflict = find_conflict(item, names=names, recent=recent, candidates=candidates,
                                 message_text=message_text)
        reason = "f4_update_uncertain"
        if conflict is None and learned is not None:
            # The rules know no wording for it: the learned pair model may (a
            # contradiction at most, never a supersession).
            conflict = learned(item, names=names, candidates=candidates,
                               message_text=message_text)
            reason = "f4_update_learned"
        if conflict is None:
            return None
        if before_write is not None:
            before_write()
        record_contradiction(item, conflict.old, confidence=conflict.cosine, reason=reason)
        return "contradiction"
    if before_write is not None:
        before_write()
    old = update.old
    evidence = {"slot": update.slot, "cosine": update.cosine, "cue": update.cue}
    new_at, old_at = said_at(item), said_at(old)
    new_speakers, old_speakers = speakers(item), speakers(old)
    by_source = (item.subject_peer_id is not None and item.subject_peer_id in new_speakers) \
        or bool(new_speakers & old_speakers)
    if not by_source:
        # Someone else says otherwise: nothing is retired silently. The new claim is
        # provisional for the subject (whose confirmation retires the other, governance
        # services); the current row goes to a curator.
        newer, older = _newer_older(item, old)
        _link(source=newer, target=older, type_=Relation.Type.CONTRADICTS,
              confidence=update.cosine)
        Validation.objects.get_or_create(
            account_id=old.account_id, knowledge=old, kind=Validation.Kind.CONTRADICTION,
            status=Validation.Status.OPEN,
            defaults={"reason": "f4_update_contradicted", "target_scope": old.scope,
                      "note": f"contradicted by {item.pk}"})
        return "contradiction"
    if new_at is not None and old_at is not None and new_at < old_at:
        # An older message arriving late never retires the newer fact.
        _mark_supersedes(old, item, confidence=update.cosine)
        transition(item, lifecycle.SUPERSEDED, actor=actor, reason="f4_late_arrival",
                   verification=Knowledge.Verification.GATE_KEEP,
                   evidence={**evidence, "superseded_by": str(old.pk)})
        return "late_arrival"
    _mark_supersedes(item, old, confidence=update.cosine)
    transition(old, lifecycle.SUPERSEDED, actor=actor, reason="f4_updated_by_source",
               verification=Knowledge.Verification.GATE_KEEP,
               evidence={**evidence, "superseded_by": str(item.pk)})
    return "superseded_old"
