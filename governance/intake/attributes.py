"""A claim's attribute: what about its holder it states (where they live, what they
drive, who they bank with, what they do on Thursdays...), read without the value.

The update rule's frames (supersession.SINGLE_SLOTS) tie two claims only when both are
worded in a frame, and the read-time path tied the rest by the closeness of the two
claims, which is low by nature when the values differ ("Dev's car is a beat-up Ford
Fiesta" / "Dev got a secondhand Kia Picanto": no shared word). Here each attribute is
recognised by the words that name it or the kind of value it takes (car makes, banks,
phone networks, coffees, instruments, languages), lists written from how people say
these things in chat, so two claims about one attribute of one holder are found with no
shared word; their values are what else each clause says.

`attribute_conflict` is the pure test: same attribute, the holder the subject in both,
each says a value the other does not, the newer not additive ("also", "another"), the
older a state (not a finished event) and the newer a state or a change its message tells.
The intake writes such a pair as a `contradicts` relation (newer first at read time),
never a silent supersession: the rule is not sure enough for that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from governance.intake.junk import claim_body, content_words

_I = re.IGNORECASE


@dataclass(frozen=True)
class Attribute:
    name: str
    cue: re.Pattern[str]
    # Words that name the attribute (or say nothing about its value): not values.
    neutral: frozenset[str]
    # A person may hold more than one at once (instruments, languages, jobs): a new one
    # replaces the old only when its message says it changed (CHANGE).
    several: bool = False
    # The values are what this matches, not the clause's other words (an address).
    value: re.Pattern[str] | None = None


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _cue(pattern: str, *, case: bool = False) -> re.Pattern[str]:
    return re.compile(pattern, 0 if case else _I)


# Proper names are matched with their capital (a "mini" break is no Mini).
_MAKES = (r"(?-i:Ford|Toyota|Honda|Kia|Hyundai|Nissan|Mazda|Subaru|Volkswagen|VW|Audi|BMW"
          r"|Mercedes|Skoda|Škoda|SEAT|Renault|Peugeot|Citroen|Citroën|Fiat|Vauxhall|Opel"
          r"|Volvo|Tesla|MG\d?|Mini Cooper|Jeep|Chevrolet|Chevy|Dodge|Lexus|Jaguar|Land Rover"
          r"|Range Rover|Porsche|Suzuki|Mitsubishi|Dacia|Polestar|Rivian|Cupra|Alfa Romeo"
          r"|Saab|BYD)")
_NETWORKS = (r"(?-i:Vodafone|EE|O2|giffgaff|Giffgaff|Verizon|AT&T|T-Mobile|Tesco Mobile"
             r"|Sky Mobile|Lebara|Lycamobile|Voxi|VOXI|iD Mobile|Mint Mobile|Telstra|Optus"
             r"|Rogers|Telus|Movistar|SMARTY)")
_BANKS = (r"(?-i:Barclays|Lloyds|HSBC|NatWest|Santander|Monzo|Starling|Revolut|Nationwide"
          r"|Halifax|TSB|Chase|Wells Fargo|Bank of America|Citibank|Capital One|N26|Metro Bank"
          r"|First Direct|Co-op Bank|Chime|Schwab|RBS|Virgin Money|Triodos|Ally Bank)")
_ENERGY = (r"(?-i:Octopus Energy|British Gas|EDF|E\.ON|OVO|Scottish Power"
           r"|SSE|Con Ed(?:ison)?|PG&E|So Energy|Good Energy|Ecotricity)")
_BROADBAND = (r"(?-i:Virgin Media|BT|Sky Broadband|Plusnet|TalkTalk|Comcast|Xfinity"
              r"|Hyperoptic|Community Fibre|Starlink)")
_INSTRUMENTS = (r"(?:guitar|bass|drums?|piano|keyboards?|violin|viola|cello|double bass"
                r"|sax(?:ophone)?|trumpet|trombone|flute|clarinet|ukulele|uke|harp|banjo"
                r"|mandolin|accordion|oboe|bassoon|harmonica|tuba|french horn)")
_LANGUAGES = (r"(?-i:Korean|Japanese|Mandarin|Chinese|Cantonese|Spanish|French|German|Italian"
              r"|Portuguese|Russian|Arabic|Hindi|Urdu|Turkish|Greek|Dutch|Swedish|Norwegian"
              r"|Danish|Finnish|Polish|Welsh|Irish|Gaelic|Latin|Hebrew|Vietnamese|Thai"
              r"|Swahili|Tagalog|Indonesian|Czech|Hungarian|Ukrainian|BSL|ASL)")
_COFFEES = (r"(?:flat white|cortado|latte|cappuccino|espresso|americano|mocha|macchiato"
            r"|cold brew|filter coffee|black coffee|chai latte|matcha|oat milk latte)")
_DAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend)"
_ROLES = (r"(?:manager|lead|director|engineer|designer|developer|analyst|nurse|teacher"
          r"|consultant|officer|coordinator|specialist|administrator|assistant|associate"
          r"|intern|architect|scientist|researcher|editor|writer|producer|supervisor"
          r"|technician|accountant|lawyer|solicitor|paralegal|chef|cook|barista|waiter"
          r"|waitress|bartender|cashier|midwife|paramedic|carer|cleaner|driver|courier"
          r"|mechanic|electrician|plumber|pharmacist|librarian|receptionist|hairdresser"
          r"|tutor|lecturer|trainer|instructor|firefighter|pilot|clerk|recruiter"
          r"|therapist|physio|physiotherapist|surgeon|radiographer)")

ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute("residence", _cue(
        r"\b(?:(?:lives?|living|resid(?:es?|ing)) (?:in|at|on|near|with|by|alone|abroad"
        r"|downtown|out|close|just)|based (?:in|out of)|renting|rents? (?:an?|the|my|our)"
        r"|moved (?:up |down |back |over |out |across )?(?:to|into)|relocat(?:ed|ing) to"
        r"|(?:my|our|his|her|their|[\w-]+(?:'s|\u2019s)) (?:home|hometown|home town"
        r"|address) is)\b"),
        _words("""live lives living reside resides residing based renting rent rents moved
        moving move relocated relocating home hometown town address place little flat
        apartment house up down back over out across finally""")),
    Attribute("car", _cue(
        # what the car is, not anything a car did ("car trouble", "my car broke down")
        rf"\b(?:(?:car|motor) (?:is|was) (?:now )?(?:an?|the)|drives? (?:an?|the)"
        rf"|driving (?:an?|the)|(?:new|used|secondhand|second-hand|first) car"
        rf"|(?:got|bought|picked up|leased?|leasing) (?:myself |themself |themselves )?(?:an?|the)"
        rf" (?:[\w-]+ ){{0,2}}(?:car|hatchback|saloon|sedan|suv|estate))\b|\b{_MAKES}\b"),
        _words("""car cars motor hatchback saloon sedan suv drive drives driving secondhand
        second-hand used beat-up old new little myself themself themselves himself
        herself""")),
    Attribute("phone_network", _cue(
        rf"\b(?:network|carrier|sim(?: card)?|(?:phone|mobile) (?:plan|contract|provider"
        rf"|network)|ported|for (?:my|our|his|her|their|[\w-]+(?:'s|\u2019s)) (?:phone|mobile))"
        rf"\b|\b{_NETWORKS}\b"),
        _words("""network carrier sim card phone mobile plan contract provider ported port
        number over""")),
    Attribute("bank", _cue(
        rf"\b(?:bank(?:s|ing)? with|bank account|current account|checking account"
        rf"|savings account|(?:my|our|his|her|their|[\w-]+(?:'s|\u2019s)) bank)\b"
        rf"|\b{_BANKS}\b"),
        _words("""bank banks banking account accounts current checking savings main
        opened open""")),
    Attribute("energy", _cue(
        rf"\b(?:energy|electricity|gas) (?:supplier|provider|company|tariff)\b"
        rf"|\b{_ENERGY}\b"),
        _words("energy electricity gas supplier provider company tariff")),
    Attribute("broadband", _cue(
        rf"\b(?:broadband|internet provider|wi-?fi provider|isp)\b|\b{_BROADBAND}\b"),
        _words("broadband internet provider wifi wi-fi isp")),
    Attribute("diet", _cue(
        r"\b(?:vegan|vegetarian|veggie|pescatarian|keto|paleo|plant-based|omnivore"
        r"|carnivore|fussy eater|(?:eats?|eating) (?:meat|fish|dairy|anything|everything"
        r"|chicken|eggs))\b"),
        _words("diet eat eats eating")),
    Attribute("commute", _cue(
        r"\b(?:commut(?:e|es|ing)|(?:drive|drives|driving|walk|walks|walking|cycle|cycles"
        r"|cycling|bike|bikes|biking) (?:in)?to (?:work|the office|school|uni|college)"
        r"|(?:cycles?|cycling|bikes?|biking) in (?:every|each|most)\b"
        r"|(?:the|a) [\d:.]+ (?:train|bus|tube|tram|ferry)"
        r"|(?:takes?|taking|gets?|getting|catch(?:es)?|catching|rides?|riding) (?:the|a)"
        r" (?:train|bus|tube|subway|metro|tram|ferry) (?:in)?to (?:work|the office|school"
        r"|uni|college)"
        r"|(?:by|on the) (?:train|bus|tube|subway|metro|tram|bike|ferry))\b"),
        _words("commute commutes commuting work office school uni college every day daily")),
    Attribute("gym", _cue(
        r"\b(?:gym|fitness (?:club|centre|center)|crossfit|leisure cent(?:re|er)"
        r"|health club|climbing (?:wall|gym))\b"),
        _words("gym fitness club centre center membership member")),
    Attribute("relationship", _cue(
        r"\b(?:single|dating|seeing (?:someone|somebody)|married|engaged|divorced|separated"
        r"|widowed|in a relationship|made it official|got together|broke up|split up"
        r"|has a (?:boyfriend|girlfriend|partner))\b"),
        _words("relationship official together"),
        value=re.compile(r"\b(?:single|dating|seeing (?:someone|somebody)|married|engaged"
                         r"|divorced|separated|widowed|in a relationship|made it official"
                         r"|got together|broke up|split up|boyfriend|girlfriend|partner)\b",
                         _I)),
    Attribute("role", _cue(
        rf"\b(?:(?:is|am|are|as|became|become|promoted to) (?:an? |the )?"
        rf"(?:[\w-]+ ){{0,2}}{_ROLES}s?\b|^(?:[\w-]+ ){{0,2}}{_ROLES}\b)"),
        _words("promotion promoted job role title position"), several=True),
    Attribute("team", _cue(
        r"\b(?:on|in|to|joined) the (?:[\w-]+ ){0,3}(?:team|squad|department|crew|unit"
        r"|division)\b"),
        _words("team squad department crew unit division reorg work")),
    Attribute("shift", _cue(
        r"\b(?:(?:night|day|early|late|morning|evening|afternoon|weekend|graveyard"
        r"|overnight|back) shifts?|on (?:nights|days|earlies|lates|weekends|weekdays)"
        r"|works? (?:nights|weekends|weekdays)|(?:switched|moved) to (?:nights|days|weekends"
        r"|weekdays))\b"),
        _words("shift shifts work")),
    Attribute("coffee", _cue(rf"\b{_COFFEES}\b"),
              _words("usual order drink coffee all way")),
    Attribute("instrument", _cue(
        rf"\b(?:play(?:s|ing)?|on) (?:the )?{_INSTRUMENTS}\b"),
        _words("play plays playing band"), several=True),
    Attribute("language", _cue(
        rf"(?=.*\b(?:learn\w*|stud(?:y|ies|ying)|teach(?:ing)? (?:myself|themself"
        rf"|themselves|himself|herself)|duolingo|lessons?|class(?:es)?|course)\b)"
        rf".*\b{_LANGUAGES}\b"),
        _words("""learn learns learning study studies studying teach teaching myself
        themself themselves himself herself duolingo lesson lessons class classes course"""),
        several=True),
    Attribute("email", _cue(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"), frozenset(),
              value=re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
    Attribute("phone_number", _cue(
        r"\b(?:phone|mobile|cell|number|text me|call me)\b(?=.*\d{3}[\d ().-]{4,}\d)"),
        frozenset(), value=re.compile(r"\+?\d[\d ().-]{6,}\d")),
)
# "on Thursday evenings": what one does in a weekly slot is one value at a time.
_SLOT = re.compile(rf"\b(?:on|every) (?:(?:the )?(?:first|second|third|last) )?(?P<day>{_DAYS})s?"
                   r"(?: (?:evenings?|mornings?|afternoons?|nights?))?\b", _I)
# "Book club meets on the first Tuesday", "book club is moving to Wednesdays": the day a
# recurring thing is on is one value at a time, keyed by the thing.
_WHEN = re.compile(
    rf"\b(?P<act>[a-z][\w-]*(?: [a-z][\w-]*)?) (?:meets|meet|is|are|runs|happens|takes place"
    rf"|is moving|has moved|moved|got moved|is now|are now|is switching|switched)"
    rf" (?:to |on |over to )?(?:the )?(?:(?:first|second|third|last) )?"
    rf"(?P<day>{_DAYS})s?\b", _I)
_SLOT_NEUTRAL = _words("""on every evening evenings morning mornings afternoon afternoons
night nights first second third last month week weeks weekly do does doing""")

# Words that say when or how much, or carry the change, not a value.
_NOISE = _words("""now again instead really honestly actually finally just still these
those days day week weeks month months year years time times today yesterday tomorrow
way all lately currently nowadays anymore longer forward since going back every usual
much pretty absolutely totally completely""")
_VERBS = _words("""is are was were be been being am has have had get gets got getting do
does did doing go goes going went take takes took taking make makes made use uses used
using start started starts starting stop stopped keep keeps kept switch switched swap
swapped change changed moved move said says think thinks feel feels love loves loving
like likes want wants need needs sold bought picked picking left quit gave""")
# Another person's clause: "Kit from work took over the drum stool", "my son goes to...".
_PEOPLE = (r"(?:son|daughter|kids?|children|child|boy|girl|baby|wife|husband|partner"
           r"|boyfriend|girlfriend|fianc\w*|mum|mom|dad|mother|father|parents?|brother"
           r"|sister|siblings?|friends?|flatmate|roommate|housemate|boss|manager|colleague"
           r"|coworker|co-worker|cousin|aunt|auntie|uncle|nan|gran|grandma|grandpa"
           r"|grandmother|grandfather|niece|nephew|neighbou?r|bassist|drummer|coach"
           r"|teacher|landlord|dog|cat|puppy|kitten|team|band)")
_OTHERS = re.compile(rf"\b(?:(?:my|our|his|her|their|[\w-]+(?:'s|\u2019s)) (?:[\w-]+ )?"
                     rf"{_PEOPLE})\b", _I)
_CLAUSES = re.compile(r"[,;:]\s+|\s+(?:and|but|so|while|whereas)\s+(?!others\b)", _I)
_LEAD = re.compile(r"^(?:and|but|so|then|now|also|plus)\s+", _I)
# Additions are not replacements (as supersession.ADDITIVE).
_ADDITIVE = re.compile(r"\b(?:also|too|as well|another|second|additional|in addition|both"
                       r"|more than one|as well as)\b", _I)


# A clause that gives its value up names no current value (supersession.ABANDON's verbs).
_GIVEN_UP = re.compile(
    r"\b(?:closed|cancel+ed|quit|left|sold|dropped|ditched|gave up|got rid of|stopped"
    r"|said goodbye to|handed in|moved (?:away )?from|switched from|broke up with|rip)\b"
    r"|\b(?:is|was|are|were) (?:over|done|history)\b", _I)


def _clauses(body: str) -> list[str]:
    """The claim's clauses; a piece of under three words joins the next ("Kit and Sol
    have been dating" is one clause, not "Kit" and "Sol have been dating")."""
    out: list[str] = []
    carry = ""
    for piece in _CLAUSES.split(body):
        if not piece or not piece.strip():
            continue
        piece = f"{carry} and {piece}" if carry else piece
        if len(piece.split()) < 3:
            carry = piece
            continue
        carry = ""
        out.append(piece)
    if carry:
        out.append(carry)
    return out


def _stem(word: str) -> str:
    word = word.lower().strip(".'\u2019-")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") \
        else word


def _someone_else(clause: str, names: frozenset[str], first: bool) -> bool:
    """Is this clause about someone other than the subject? A kin, a friend or a pet
    before the attribute, or (not the claim's first clause) a clause led by another
    capitalised name."""
    if _OTHERS.search(clause):
        return True
    if first:
        return False
    lead = _LEAD.sub("", clause.strip()).split()
    if not lead:
        return False
    word = lead[0].strip(".,'\u2019")
    name_words = {part for name in names for part in name.split()}
    return word[:1].isupper() and word.lower() not in name_words and word not in {
        "I", "The", "My", "Our", "It", "It's", "These", "This", "That"}


@lru_cache(maxsize=8192)
def attributes(statement: str, names: frozenset[str] = frozenset()
               ) -> tuple[tuple[str, frozenset[str]], ...]:
    """(attribute, its values) for each attribute the claim states of its subject; the
    values are the stems of what the clause says besides the attribute's own words."""
    body = claim_body(statement)
    found: dict[str, set[str]] = {}
    for n, clause in enumerate(_clauses(body)):
        if _someone_else(clause, names, first=n == 0) or _GIVEN_UP.search(clause):
            continue  # another person's, or a value given up ("closed the Lloyds account")
        keys: list[tuple[str, Attribute | None]] = []
        keys += [(a.name, a) for a in ATTRIBUTES if a.cue.search(clause)]
        when = _WHEN.search(clause)
        if when is not None and when.group("act").split()[-1].lower() not in _NOT_THINGS:
            found.setdefault(f"when:{_stem(when.group('act').split()[-1])}", set()).add(
                _stem(when.group("day")))
        slot = _SLOT.search(clause)
        if slot is not None and when is None:
            keys.append((f"slot:{slot.group('day').lower()}", None))
        for key, typed in keys:
            if typed is not None and typed.value is not None:
                values = {v.lower().rstrip(".") for v in typed.value.findall(clause)}
            else:
                neutral = typed.neutral if typed is not None else _SLOT_NEUTRAL
                values = {_stem(w) for w in content_words(clause, names=names)
                          if w not in neutral and w not in _NOISE and w not in _VERBS
                          and _stem(w) not in neutral
                          and not (typed is None and _DAYS_RE.fullmatch(_stem(w)))
                          and not (w.endswith("ed") and len(w) > 4)}
            found.setdefault(key, set()).update(values)
    return tuple((key, frozenset(values)) for key, values in found.items())


_NOT_THINGS = _words("""it that this which who what she he they we i today tomorrow
everything nothing something one day birthday party""")
_DAYS_RE = re.compile(rf"{_DAYS}s?", _I)
_SEVERAL = frozenset(a.name for a in ATTRIBUTES if a.several) | {"slot"}
# A change said in so many words: what a held-several attribute needs to be replaced.
CHANGE = re.compile(
    r"\b(?:instead|now|these days|nowadays|any ?more|no longer|from now on|switch(?:ed|ing)"
    r"|swap(?:ped|ping)|chang(?:ed|ing)|replac(?:ed|ing)|trad(?:ed|ing)|gave up|quit"
    r"|dropped|stopped|promot(?:ed|ion)|qualified|as of|starting|started)\b", _I)
# A message that tells a change (supersession.CHANGE_TOLD) or names an acquisition
# ("got myself a Kia"), a port ("ported my number"), a goodbye ("RIP Fiesta").
ACQUIRED = re.compile(
    r"\b(?:got (?:myself |ourselves |themselves |themself |himself |herself )?(?:an?|my|our)"
    r"|picked up|bought|ported|said goodbye|rip|joined|signed up|opened"
    r"|(?:went|gone|going) (?:vegan|vegetarian|veggie|pescatarian|keto|plant-based)"
    r"|moved|promot(?:ed|ion)|finally|made it official|got (?:engaged|married|together"
    r"|divorced)|broke up|split up|proposed)\b", _I)


def attribute_conflict(new: str, old: str, *, names: frozenset[str] = frozenset(),
                       told: bool = False, message: str = "", new_event: bool = False,
                       old_event: bool = False) -> str | None:
    """The attribute `new` (the newer claim) gives another value of than `old`, or None.

    `told`: the newer claim's message says something changed (supersession.change_told);
    `message`: that message; `new_event` / `old_event`: the claim tells a finished event
    (supersession._past_event). A finished event is no state to be replaced ("went to
    Leeds" is no home); the newer claim may be one when its message tells the change
    ("got myself a Kia Picanto"). An attribute one holds several of at once needs the
    change said in so many words (CHANGE)."""
    if old_event or _ADDITIVE.search(claim_body(new)):
        return None
    told = told or bool(ACQUIRED.search(message or new))
    if new_event and not told:
        return None
    theirs = dict(attributes(old, names))
    for key, values in attributes(new, names):
        before = theirs.get(key)
        if before is None or not values or not before:
            continue
        if not (values - before) or not (before - values):
            continue  # a restatement or a refinement, not another value
        if key.split(":", 1)[0] in _SEVERAL and not CHANGE.search(message or new):
            continue
        return f"attr:{key}"
    return None


def shares_attribute(a: str, b: str, names: frozenset[str] = frozenset()) -> bool:
    """Do two claims state one attribute of their subject (whatever the values)?"""
    return bool({k for k, _ in attributes(a, names)} & {k for k, _ in attributes(b, names)})
