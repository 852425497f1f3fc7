"""Who a statement is about when it names a person who is not the speaker.

A claim about someone else never becomes a fact about the person who said it (the
seed's gates: a peer-level claim by someone else waits for its subject, anything wider
waits for a curator). Extractors do not always say so: the rule-based one keeps "Jordan
told me he is quitting Google" as "Jordan told Sam he is quitting Google." about Sam, and
"Jordan is quitting Google" as what Sam said; a model may file a claim about an unlisted
person under the speaker. `named_person` reads the statement as written (third person,
the speaker by name) and returns the person it is about, from the subject position only:

* the statement starts with the name and a verb ("Jordan told Sam he...", "Jordan's dad
  is sick"); "Jordan and Sam went hiking" is about Sam too and is not matched;
* a report by the speaker starts with it ("Sam said Jordan is quitting Google.",
  "Sam heard that Jordan...");
* a person noun of the speaker's introduces it ("Sam's sister Jordan works at Acme.",
  "Sam's coworker, Jordan, ...").

A capitalised word is a person's name when it is a given name (the census- and
registry-derived lists in data/, rebuilt by bench/build_person_names.py) or a person noun
introduces it. A given name that is also a place ("Jordan", "Austin", "Georgia") counts
only with a person's cue: a person noun, a verb of saying, thinking or feeling after it,
or he/she/his/her later in the statement. The speaker's own names never count. Pure: no
database; the caller says who is registered (`known`) and who spoke (`speaker_names`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from knowledge.ingest.lexicon import _inflected

_DATA = Path(__file__).resolve().parent / "data"


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# A given name or surname as written: accented letters ("Tomás", "Zoë"), and "O'Brien",
# "McKenzie", "Anne-Marie".
_UPPER, _LOWER = "A-Z\u00c0-\u00d6\u00d8-\u00de", "a-z\u00df-\u00f6\u00f8-\u00ff"
_NAME = (rf"(?:[{_UPPER}]'|Mc|Mac)?[{_UPPER}][{_LOWER}]+(?:[{_UPPER}][{_LOWER}]+)?"
         rf"(?:-[{_UPPER}][{_LOWER}]+)?")
# Person nouns a speaker introduces someone with ("my sister Jordan").
PERSON_NOUNS = (
    "friend|best friend|buddy|pal|roommate|flatmate|neighbou?r|partner|boyfriend|girlfriend|"
    "husband|wife|spouse|fiancée?|ex|mom|mum|mother|dad|father|parent|sister|brother|sibling|"
    "son|daughter|kid|child|baby|cousin|aunt|uncle|niece|nephew|grandma|grandmother|grandpa|"
    "grandfather|grandson|granddaughter|in-law|mother-in-law|father-in-law|sister-in-law|"
    "brother-in-law|boss|manager|coworker|co-worker|colleague|teammate|classmate|teacher|"
    "coach|mentor|student|tutor|doctor|therapist|dentist|landlord|tenant|client|customer|"
    "lead|intern|assistant|friend from work|new hire|neighbor|godson|goddaughter|godmother|"
    "godfather|stepmom|stepmother|stepdad|stepfather|stepson|stepdaughter|stepsister|"
    "stepbrother|half-brother|half-sister|fiance|bestie|bff|babysitter|nanny|caregiver|"
    "ex-wife|ex-husband|ex-boyfriend|ex-girlfriend|sweetheart|date|crush|mate|housemate|"
    "supervisor|director|ceo|founder|cofounder|co-founder|partner in crime|vicar|priest|"
    "rabbi|imam|minister|midwife|carer|physio|surgeon|hairdresser|barber|cleaner|childminder|"
    "godparent")
OCCUPATIONS = (
    "nurse|engineer|developer|programmer|designer|lawyer|accountant|artist|painter|writer|"
    "author|musician|singer|chef|cook|pilot|driver|officer|scientist|researcher|professor|"
    "architect|pharmacist|vet|mechanic|electrician|plumber|carpenter|farmer|firefighter|"
    "soldier|journalist|photographer|actor|actress|dancer|athlete|player|founder|ceo|"
    "consultant|analyst|recruiter|librarian|barista|waiter|waitress|cashier|volunteer")
# Verbs after a name that only a person does: saying, thinking, feeling, living a life.
PERSON_VERBS = _words("""
told tells tell said says say asked asks ask mentioned mentions texted texts called
calls emailed emails messaged thinks thought think feels felt feel believes believed
wants wanted wishes hopes hoped loves loved hates hated likes liked misses missed
knows knew quit quits quitting resigned resigns retired retires married marries
divorced dating dates was were is has had got gets getting became becomes moved moves
moving lives lived works worked studies studied graduated graduates born died passed
pregnant sick ill diagnosed promoted hired fired laid left leaving joined joins
started starts visited visits retiring engaged expecting divorcing resigning
""")
# Life events only a person has: these make any capitalised word a person ("Raj got
# promoted"); saying and thinking do not ("Google told me ...").
LIFE_EVENTS = _words("""
quit quits quitting resigned resigns married marries divorced dating promoted hired
fired laid graduated graduates born died pregnant diagnosed retiring retired engaged
expecting divorcing resigning sick ill
""")
# "is"/"was"/"has"/"got" alone are no cue for a place homograph ("Jordan is hot in July");
# a verb of saying, thinking, feeling or a life event is.
_WEAK = frozenset({"was", "were", "is", "has", "had", "got", "gets", "getting", "became",
                   "becomes", "moves", "moving", "lives", "lived", "works", "worked",
                   "started", "starts", "left", "visited", "visits", "joined", "joins"})
_PRONOUN = re.compile(r"\b(?:he|she|his|her|him|himself|herself)\b", re.I)
_PERSON_NOUN = re.compile(rf"^(?:a |an )?(?:\w+ )?(?:{PERSON_NOUNS}|{OCCUPATIONS})s?\b")
# What only a person has ("Florian's knee surgery went well", "Tariq's divorce came
# through"): a body part, their health, a rite of passage. Not "wedding" or "birthday"
# alone, which are events a speaker goes to ("Sam said Charlotte's wedding was lovely" is
# the speaker's evening too).
_PERSONS_OWN = re.compile(
    r"^(?:(?:left|right|bad|broken|new|first|\w+ed) )?(?:knee|hip|back|arm|leg|wrist|ankle"
    r"|shoulder|neck|foot|feet|hand|eyes?|eyesight|ears?|teeth|tooth|heart|lungs?|kidneys?"
    r"|liver|skin|hair|health|mental health|blood pressure|surgery|operation|diagnosis"
    r"|divorce|retirement|graduation|pregnancy|due date|engagement|funeral|cancer|chemo"
    r"|recovery|symptoms|condition|illness|injury|allergy|allergies)\b")
# A clause the speaker reports, knows or perceives: its subject is what it is about.
# Not "sees", "saw" or "read": their object is a person or a thing more often than a
# clause ("Sam sees Dr. Eriksen now" is Sam's dentist; knowledge_fresh5 g06).
# ("Sam found out Dmitri is colorblind", "Sam said turns out Gloria is allergic").
# Only verbs that pass the clause on as news: a wish, a hope or being glad ("Tim hopes
# John enjoys it", "Maria is glad John is alright") is the speaker's own attitude, most
# often to the listener (LoCoMo dev: 17 such claims moved off their speakers otherwise).
_REPORT = (r"(?:(?:just|recently|finally|also|only) )?"
           r"(?:said|says|told \w+|heard|hears|thinks|mentioned|explained|wrote|shared"
           r"|found out|finds out|learned|learnt|learns|realized|realised|noticed"
           r"|was told|got told|discovered)"
           r"(?: that)?:?(?: (?i:turns out|apparently|according to (?:\w+ )?\w+|word is"
           r"|(?:the )?rumou?r is|word has it"
           r"|the word is|rumou?r has it|guess what|fun fact|reportedly|supposedly|allegedly)"
           r"(?: that)?[,:]?)?")
# -ing nouns a possessive takes ("Dmitri's wedding"): no contraction of "is".
_ING_NOUN = re.compile(r"^'s (?:wedding|ceiling|clothing|morning|evening|thing|ring|king"
                       r"|spring|string|sibling|darling|offspring|earring|birthday|outing"
                       r"|belongings|savings|ending|housing|bedding|listing|posting)\b")
# -ing words that are a noun after a possessive ("Anouk's training was tough") or a verb
# after a contracted "is" ("Anouk's training to be a midwife", "Dmitri's building a
# shed"): a verb only when what follows is what a verb takes (_VERB_AFTER).
_ING_EITHER = re.compile(r"^'s (?:building|meeting|painting|drawing|training|funding"
                         r"|feeling|recording|writing|reading|setting|landing|booking"
                         r"|filling|cooking|baking|singing|dancing|swimming|running)"
                         r"(?=(?P<after>[ ,.!?;:]*\S*))")
# What a verb's -ing form takes and a noun's does not: an object, "to", a particle
# ("Anouk's training to be", "Oluwaseun's writing a novel"). Anything else keeps the noun
# ("Zoom's meeting feature", "Anouk's training was tough").
_VERB_AFTER = frozenset({"to", "for", "a", "an", "the", "his", "her", "their", "my", "our",
                         "some", "up", "out", "again", "hard", "every", "all", "this",
                         "that", "with", "better", "worse", "much", "so", "really", "quite"})


def _ing_noun(rest: str) -> bool:
    """`rest` ("'s training to be...") starts with a possessive's -ing noun, not "is"."""
    if _ING_NOUN.match(rest):
        return True
    either = _ING_EITHER.match(rest)
    if either is None:
        return False
    after = either.group("after")
    return after[:1] != " " or after.strip().lower() not in _VERB_AFTER


_NOT_NAMES = _words("""
The A An My Our Your Their His Her Its This That These Those There Here It They We You
He She I Me Mr Mrs Ms Dr St Saint Mount Lake North South East West New Old Big Little
Good Great
""")


# Titles a person's name follows ("Aunt Martha passed away", "Mr. Patel retired").
TITLES = ("mr|mrs|ms|miss|mx|dr|doctor|prof|professor|aunt|auntie|uncle|grandma|grandpa|"
          "granny|grandmother|grandfather|nana|nan|nanna|gran|grandad|granddad|cousin|coach|"
          "pastor|reverend|rev|vicar|rabbi|imam|officer|captain|judge|sir|dame")
# A word of fondness or age before a title ("Old Mr Hargreaves", "Poor Auntie Jean").
_BEFORE_TITLE = r"(?:(?i:old|young|little|poor|dear|lovely|good old) )?"
# Life events said in several words ("is moving back to", "passed away", "getting married").
_LIFE_PHRASE = re.compile(
    r"^(?:(?:is|was|are|were) )?(?:moving|relocating) (?:to|back|away|out|abroad|home)\b"
    r"|^passed away\b|^(?:(?:is|was) )?getting (?:married|divorced|engaged|promoted|fired)\b"
    r"|^(?:is|was) (?:having|expecting) a baby\b"
    # leaving a job, buying a home: a person's, not a company's
    r"|^(?:(?:has|had|is|was) )?(?:left|leaving|quit|quitting) (?:the|his|her|their) "
    r"(?:company|job|firm|team|band|school|army)\b"
    r"|^(?:(?:has|had|is|was) )?(?:bought|buying|rented|renting) (?:a|an|his|her|their) "
    r"(?:new )?(?:house|home|flat|apartment|condo|car)\b"
    # losing a job in British and American words ("got made redundant", "was let go")
    r"|^(?:(?:has|had|have) )?(?:(?:got|gets|getting|been|was|were|is) )?(?:made redundant"
    r"|laid off|let go|sacked|given the sack|given notice)\b"
    # what only a person studies for, sits or runs ("is doing a PhD", "failed his
    # driving test", "is training for an ironman")
    r"|^(?:(?:is|was|has|had|has been) )?(?:doing|taking|sitting|studying for|training for"
    r"|starting|started|finishing|finished|completing|completed|passed|failed|retook"
    r"|retaking|resitting|did|does) (?:a |an |the |his |her |their )?(?:[\w-]+ ){0,2}?"
    r"(?:phd|doctorate|degree|masters|master's|mba|apprenticeship|internship|residency"
    r"|diploma|a-levels|gcses|exams?|driving test|theory test|bar exam|marathon"
    r"|triathlon|ironman|gap year)\b", re.I)
# What a person does with more words than a verb, for a name on no list ("Seraphina lives
# in Bath", "Lysander plays the cello", "Barnaby has two kids", "Barnaby just turned
# forty"): companies and places do not live anywhere, play an instrument, have children
# or turn an age (written from the fresh sets' misses, checked on LoCoMo dev).
_PERSON_PREDICATE = re.compile(
    r"^(?:(?:is|was|has been|had been) )?(?:in hospital|in rehab|in prison|in jail"
    r"|on (?:maternity|paternity|sick|compassionate) leave|on honeymoon|(?:moving|moved) in "
    r"with)\b"
    r"|^(?:(?:is|was|has|had|has been|had been) )?(?:lives|lived|living) (?:in|with|near|on"
    r"|abroad|alone|next door|nearby|round the corner|down the road)\b"
    r"|^(?:plays|played|is playing) (?:the |in a |for the )?(?:guitar|piano|cello|violin|viola"
    r"|drums|bass|sax\w*|flute|clarinet|trumpet|trombone|harp|ukulele|banjo|organ|keys"
    r"|football|rugby|cricket|tennis|golf|hockey|netball|basketball|baseball|chess|squash"
    r"|badminton|darts|bridge|poker|band|orchestra)\b"
    r"|^(?:has|had|has got|is having|had) (?:\w+ )?(?:a|an|two|three|four|five|six|\d+) "
    r"(?:\w+ )?(?:kids|children|sons|daughters|grandkids|grandchildren|siblings|brothers"
    r"|sisters|boyfriend|girlfriend|husband|wife|partner|baby|son|daughter|kid)\b"
    r"|^(?:turned|turns|is turning|will be) (?:\d{1,3}|twenty|thirty|forty|fifty|sixty"
    r"|seventy|eighty|ninety|a hundred)\b"
    r"|^(?:works|worked|is working) (?:nights|nightshifts|shifts|weekends|part[- ]time"
    r"|full[- ]time|from home|as an? |two jobs|three jobs)"
    r"|^(?:goes|went|is going) to (?:the same )?(?:gym|school|church|uni|university|college"
    r"|class|classes|yoga|pilates|therapy|rehab)\b"
    r"|^(?:got|gets|adopted|rescued|is getting|bought) (?:a|an|two|another) (?:\w+ )?(?:puppy"
    r"|kitten|dog|cat|rabbit|hamster|pony|guinea pig)\b"
    r"|^(?:has|had|has got|got|caught|is recovering from|has been diagnosed with|is off with)"
    r" (?:the |a |an )?(?:flu|shingles|covid|chickenpox|measles|mumps|pneumonia|bronchitis"
    r"|glandular fever|tonsillitis|appendicitis|gallstones|kidney stones|hernia|migraine"
    r"|concussion|cancer|dementia|arthritis)\b"
    r"|^(?:got|gets|has got) into (?:uni|university|college|medical school|med school|law school"
    r"|grad school|drama school|art school|oxford|cambridge|harvard|yale|stanford|mit)\b"
    r"|^(?:is|was) (?:such )?(?:a |an )(?:\w+ )?(?:bloke|guy|lad|chap|gent|gentleman|woman"
    r"|man|lady|girl|boy|person|kid|character|sweetheart|sweetie|legend)\b", re.I)
# What only a person (or an animal) does or is: with one of these after it, a word that
# is on no list of given names is still a person ("Jun is studying law", "Theo can't
# swim", "Dmitri is colorblind"). Companies and places hire, open, grow and sell; they do
# not swim, think or fall pregnant.
HUMAN_VERBS = _words("""
think feel want love hate like prefer enjoy know believe hope wish learn study swim read
sing dance cook marry date graduate retire quit resign cry laugh smile sleep eat drink
travel miss meet speak talk agree decide dream worry care forget remember understand
practise practice train exercise hike climb ski surf knit paint draw adopt celebrate
volunteer mentor coach teach tutor babysit breastfeed propose divorce recover relapse
limp snore faint sneeze blush apologise apologize struggle procrastinate
appreciate admire praise congratulate compliment cherish treasure reminisce empathize
empathise sympathize sympathise audition bake crochet sew aspire emigrate immigrate
commute nap jog cuddle hug kiss grieve mourn pray meditate reckon confide gossip flirt
""")
_HUMAN_IRREGULAR = _words("""thought felt knew swam sang ate drank slept met spoke forgot
understood taught drew fell""")
HUMAN_STATES = _words("""pregnant sick ill colorblind colourblind allergic vegetarian vegan
married single divorced engaged widowed retired diabetic deaf blind left-handed
right-handed tired exhausted burned burnt stressed depressed anxious homesick unemployed
bilingual shy lactose intolerant celiac asthmatic epileptic autistic dyslexic sober
heartbroken""")
_AUXILIARIES = _words("""is was are were has have had 's will would can could should
might may must does did do can't won't wouldn't couldn't shouldn't doesn't didn't don't
isn't wasn't hasn't hadn't cannot never not been being got gets getting just also still
already finally recently really actually apparently""")


_NEGATED_MODALS = _words("can't won't couldn't wouldn't shouldn't doesn't didn't")
# After a name, these start its object ("Joanna wishes Nate the best"), not its verb.
_DETERMINERS = _words("""the a an my his her their our your this that these those some all
any every no it him them us me you""")
_FINITE_AUX = _words("""is was are were has have had 's will would can could should might
may must does did can't won't wouldn't couldn't shouldn't doesn't didn't isn't wasn't
hasn't hadn't cannot""")


def human_predicate(words: list[str]) -> bool:
    """The predicate (the words after a name) says a person: a verb only people do, or
    "is" with a state only people are in, or "is a <occupation>"."""
    rest = [w.lower().strip(",.:;!?") for w in words[:6]]
    copula = finite = False
    while rest and rest[0] in _AUXILIARIES:
        copula = copula or rest[0] in ("is", "was", "are", "were", "'s", "been", "being")
        finite = finite or rest[0] in _FINITE_AUX
        rest = rest[1:]
    if not rest:
        return False
    head = rest[0]
    # A finite verb: after an auxiliary ("is studying", "can't swim"), or inflected for
    # it ("thinks", "learned", "swam"). A bare word after a capital is more often a
    # noun phrase the capital starts ("Unconditional love is...", "Moments like these").
    if head in _HUMAN_IRREGULAR:
        return True
    if _inflected(head, HUMAN_VERBS) and (finite or (
            head not in HUMAN_VERBS and not head.endswith("ing"))):
        return True
    if copula and (head in HUMAN_STATES or (len(rest) > 1 and head in ("a", "an", "so", "off")
                                            and rest[1] in HUMAN_STATES)):
        return True  # "is colorblind", "is so tired", "has been off sick"
    return copula and _PERSON_NOUN.match(" ".join(rest[:3])) is not None and (
        head in ("a", "an"))


def _finite(words: list[str]) -> bool:
    """The words after a name start with a finite verb: an auxiliary, or a verb in the
    past or third person ("broke", "called", "texts")."""
    head = words[0].lower().strip(",.:;!?") if words else ""
    if head in ("is", "are", "was", "were", "'s"):
        # "Veggies are his fave": a copula says nothing of who; "is moving in with his
        # girlfriend" is a verb
        nxt = words[1].lower() if len(words) > 1 else ""
        return len(nxt) > 4 and nxt.endswith("ing") and nxt not in ("nothing", "something",
                                                                   "everything", "anything")
    return head in _FINITE_AUX or head in _HUMAN_IRREGULAR or head in _IRREGULAR_PAST or (
        len(head) > 4 and head.endswith("ed"))


_IRREGULAR_PAST = _words("""broke took gave made got went came ran lost won left found
told sold bought brought caught fell hit hurt cut put set shut quit spent sent""")


# "Dmitri's moving", "Dmitri's been ill", "Dmitri's a nurse": the 's of "is" or "has",
# not of whose.
_CONTRACTED = re.compile(r"^'s (?=(?:\w+ing|been|got|gone|not|never|a|an|so|very|really|"
                         r"always|still|also|just|finally|now|back|" + "|".join(sorted(
                             HUMAN_STATES)) + r")\b)")


# Verbs of saying: with he/she after them they make any capitalised word a person ("Hiro
# told Sam he is getting married"); companies tell people things too, but not as he/she.
_SAYING = _words("told tells said says texted texts emailed emails called calls messaged")
# A place does not work or live anywhere: these are cues even for "Jordan", "Diego".
_PLACE_PROOF = _words("works worked lives lived studies studied")

# Words after a name that are no verb of it ("Jordan and Sam", "Rosa from work").
_NOT_VERBS = _words("and or of in at with for to from on by as than like")

_ADVERBS = _words("just also still already finally recently never always even really "
                  "now soon apparently actually")


def _predicate(words: list[str]) -> list[str]:
    """The words from the verb on, past an adverb ("Priyanka just got promoted") or a
    short "from X" after the name ("Derek from accounting got fired")."""
    if len(words) > 2 and words[0].lower() == "from":
        for skip in (2, 3):  # "from accounting", "from the gym"
            if len(words) > skip and words[skip].lower() in PERSON_VERBS:
                return words[skip:]
    while words and (words[0].lower() in _ADVERBS or words[0].lower().endswith("ly")):
        words = words[1:]
    return words


def _person_cue(rest: str, nxt: str, then: str, nouns: str, *, strong_only: bool,
                definite: bool = False, plain: bool = False) -> bool:
    """Whether what follows a capitalised word says it names a person: a verb only a
    person does ("told", "got promoted"), a person noun of theirs ("Emma's dad") or one
    they are ("is a nurse"). A `plain` given name (neither a place nor an English word)
    needs only a verb after it; one that is also a place needs more than "is", "was" or
    "moved"; a word that is no given name (`definite`) needs a person noun, a life event
    or he/she after a verb of saying."""
    if rest.startswith("'s"):
        return _PERSON_NOUN.match(nouns) is not None or _PERSONS_OWN.match(nouns) is not None
    words = rest.split()
    if nxt in ("is", "was", "'s") and _PERSON_NOUN.match(" ".join(words[1:4]).lower()) \
            and not (len(words) > 1 and words[1].lower().endswith("ing")):
        return True  # "is a nurse", not "is hiring engineers"
    if _LIFE_PHRASE.match(" ".join(_predicate(words)[:4])) or _PERSON_PREDICATE.match(
            " ".join(_predicate(words)[:7])):
        return True
    if nxt in _SAYING and _PRONOUN.search(rest):
        return True  # "Hiro told Sam he ..."
    if nxt == "and" and re.match(rf"(?:his|her) (?:\w+ )?(?:{PERSON_NOUNS})s?\b",
                                 " ".join(words[1:4]).lower()):
        return True  # "Leah and her husband split up"
    if definite:
        return nxt in LIFE_EVENTS or (nxt in _WEAK and then in LIFE_EVENTS)
    if plain and (nxt.isalpha() or nxt in _NEGATED_MODALS) and nxt.islower() \
            and nxt not in _NOT_VERBS and nxt not in _DETERMINERS:
        return True  # "Freya is learning the cello": a given name and its verb
    if nxt in _PLACE_PROOF:
        return True
    if not strong_only and _PRONOUN.search(rest):
        return True  # "Hannah broke her leg": a given name someone calls he or she
    strong = nxt in PERSON_VERBS and nxt not in _WEAK
    weak_then_strong = nxt in _WEAK and then in PERSON_VERBS and then not in _WEAK
    if strong or weak_then_strong:
        return True
    return not strong_only and nxt in PERSON_VERBS and nxt not in ("is", "was", "has", "had")


@cache
def _list(name: str) -> frozenset[str]:
    text = (_DATA / name).read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines()
                     if line.strip() and not line.startswith("#"))


def given_names() -> frozenset[str]:
    return _list("person_names.txt")


def place_homographs() -> frozenset[str]:
    return _list("place_names.txt")


def word_names() -> frozenset[str]:
    return _list("word_names.txt")


@dataclass(frozen=True)
class NamedPerson:
    name: str  # as written: "Jordan", "Jordan Lee"
    peer_key: str | None  # the registered peer of that name, else None


def _speaker_alternation(speaker_names: list[str]) -> str:
    names = sorted({n for n in speaker_names if n}, key=len, reverse=True)
    return "|".join(re.escape(n) for n in names) or r"(?!x)x"


def named_person(statement: str, *, speaker_names: list[str],
                 known: dict[str, str] | None = None) -> NamedPerson | None:
    """The named person other than the speaker that `statement` is about, or None.

    `speaker_names`: the speaker's display name, key and aliases; `known`: lower-cased
    registered names and aliases -> peer key (a registered name needs no lexicon)."""
    known = known or {}
    text = statement.strip()
    speaker = _speaker_alternation(speaker_names)
    own = {part.lower() for n in speaker_names if n for part in n.split()}
    # The speaker passing on what someone else told them ("Sam said Mum says Auntie
    # Brenda had a fall", "Sam heard from... ", "Sam's sister told Sam Jordan is..."): the
    # subject of the clause passed on is still who the claim is about.
    relay = (rf"(?:(?:(?:{speaker})'s |(?i:my|our) )?(?i:{PERSON_NOUNS}|{TITLES})|{_NAME})"
             rf" (?:says|said|told (?:{speaker}|me|us)|reckons|thinks|heard|mentioned"
             rf"|texted|wrote)(?: that)?,? ")
    # ... or naming who it came from first ("According to my mum, Auntie Winifred...")
    lead = rf"(?:(?:{speaker}) {_REPORT} )?(?:(?i:according to) [^,]{{1,40}}, )?(?:{relay})?"
    candidates: list[tuple[re.Match[str], bool]] = []  # (match, introduced by a person noun)
    # "Sam's sister Jordan ...", "Sam said Sam's coworker Dmitri ...", "Sam's friend from
    # college, Dmitri, ..."
    introduced = re.match(
        rf"(?:(?:{speaker}) {_REPORT} )?"
        rf"(?i:(?:{speaker})'s (?:\w+ ){{0,2}}?(?:{PERSON_NOUNS})(?: from [\w ]{{1,24}}?)?),? "
        rf"(?:(?i:{TITLES})\.? )?(?P<name>{_NAME}(?: {_NAME})?)(?P<rest>.*)$", text)
    if introduced is not None:
        candidates.append((introduced, True))
    # "Dmitri, Sam's old roommate, is getting married": the apposition says a person
    apposed = re.match(
        rf"(?:(?:{speaker}) {_REPORT} )?(?P<name>{_NAME}(?: {_NAME})?), "
        rf"(?i:(?:{speaker})'s (?:\w+ ){{0,2}}?(?:{PERSON_NOUNS}|{OCCUPATIONS})),"
        rf"(?P<rest> .*)$", text)
    if apposed is not None:
        candidates.append((apposed, True))
    named = rf"{_BEFORE_TITLE}(?P<name>{_NAME}(?: {_NAME})?)(?P<rest>(?:'s)? .*)$"
    titled = re.match(rf"{lead}{_BEFORE_TITLE}(?:(?i:{TITLES})\.? ){named}", text)
    if titled is not None:
        candidates.append((titled, True))  # a title says it is a person
    # the statement's subject, or the subject of what the speaker reported
    for pattern in (named, rf"(?:{speaker}) {_REPORT} (?:[a-z]+ly,? )?{named}",
                    rf"{lead}(?:[a-z]+ly,? )?{named}"):
        match = re.match(pattern, text)
        if match is not None:
            candidates.append((match, False))
    for match, by_noun in candidates:
        name, rest = match.group("name"), match.group("rest")
        parts = name.split()
        if len(parts) == 2 and parts[1].lower() in known and parts[0] not in given_names():
            continue  # "Impressive Tim is learning German": a word before a known name
        if _CONTRACTED.match(rest) and not _ing_noun(rest):
            rest = " is " + rest[3:]  # "Dmitri's moving" is "Dmitri is moving"
        first = name.split()[0]
        if first in _NOT_NAMES or first.endswith("ing") or any(
                part.lower() in own for part in name.split()):
            continue  # a gerund ("Seeing Mel's kids..."), or the speaker
        if not by_noun and re.match(rf"^ (?:is|was) (?:now |also |still )?(?:(?:{speaker})'s"
                                    rf"|their|his|her) ", rest, re.I):
            continue  # "Marisol is Priya's new babysitter": who the speaker's babysitter is
        after = rest.removeprefix("'s").split()
        if after and after[0][:1].isupper() and not by_noun:
            continue  # a longer name cut short ("Emma Watson, she's..."): not a subject
        if not rest.startswith("'s"):
            after = _predicate(after)
        nxt = after[0].lower().strip(",.:;") if after else ""
        if not by_noun and (not nxt or nxt in ("or", "&") or rest.startswith(",")):
            continue  # "Jordan, ..." or "Jordan or ...": no subject of its own
        if not by_noun and nxt == "and" and not re.match(r"and (?:his|her) ", rest.strip()):
            continue  # "Jordan and Sam went...": the speaker is a subject too
        key = known.get(name.lower()) or known.get(first.lower())
        then = after[1].lower().strip(",.:;") if len(after) > 1 else ""
        nouns = " ".join(after[:3]).lower()
        homograph = first in place_homographs()
        if not by_noun and key is None and not homograph and human_predicate(after):
            return NamedPerson(name, key)  # "Jun is studying law", "Theo can't swim"
        if not by_noun and key is None and not homograph and first not in word_names() \
                and _finite(after) and _PRONOUN.search(rest):
            return NamedPerson(name, key)  # "Leontyne broke her wrist"
        if not (by_noun or _person_cue(
                rest, nxt, then, nouns, strong_only=key is None and homograph,
                definite=key is None and first not in given_names(),
                # the weakest cue never takes a claim that names the speaker from them
                # ("Stanford is Sam's dream school")
                plain=(key is not None or (not homograph and first not in word_names()))
                and not own & {w.lower().removesuffix("'s") for w in rest.split()})):
            continue
        return NamedPerson(name, key)
    return None


# Capitalised words that open a clause without being anyone's name ("Anyone can...",
# "Absolutely loved it", "Hey Sam's..."): the name typer never sees them.
_NO_NAME_OPENERS = _words("""Anyone Anybody Someone Somebody Everyone Everybody Nobody
Noone Absolutely Definitely Certainly Honestly Seriously Literally Totally Really Maybe
Perhaps Hey Hi Hello Wow Yes Yeah Yep Nope Okay Ok Thanks Thank Congrats Please Sorry
Cheers Again Also Still Today Tonight Tomorrow Yesterday Everything Nothing Something
Anything Life People Guys Folks Mum Mom Dad""")


# What a shop, a brand or an employer does (the typer reads a name's word alone, and a
# brand's word looks like a name: "Lidl", "Ocado", "Monzo" pass it).
_TRADE = tuple(f"{verb} " for verb in (
    "opened", "opens", "closed", "closes", "shut", "shuts", "sells", "sold", "stocks",
    "delivers", "delivered", "charges", "charged", "launched", "launches", "released",
    "releases", "announced", "announces", "ships", "shipped", "sent", "sends", "emailed",
    "emails", "is hiring", "are hiring", "raised", "put up", "cut", "went bust",
    "has a sale", "is closing", "is opening", "is offering", "offers", "refunded"))


def unlisted_subject(statement: str, *, speaker_names: list[str]) -> str | None:
    """A one-word capitalised subject that no lexicon knows, of the statement or of the
    clause it reports ("Sam heard Lazarus won the pub quiz", "Sam said Jago's band is
    playing"), when a finite verb or a possessive follows it: whether it is a person's
    name is the name typer's to say (governance.intake.name_typer), not a list's."""
    speaker = _speaker_alternation(speaker_names)
    own = {part.lower() for n in speaker_names if n for part in n.split()}
    match = re.match(rf"^(?:(?:{speaker}) {_REPORT} )?(?P<name>{_NAME})(?P<rest>(?:'s)? .+)$",
                     statement.strip())
    if match is None:
        return None
    name, rest = match.group("name"), match.group("rest")
    if (name in _NOT_NAMES or name in _NO_NAME_OPENERS or name.lower() in own
            or name in place_homographs() or name in word_names()
            or name.endswith("ing") or "-" in name):
        return None
    after = rest.split()
    if rest.startswith("'s"):
        # whose thing does something ("Jago's band is playing the Half Moon"): a listed
        # name too, which named_person leaves when the thing is no person
        return name if len(after) > 2 and after[1][:1].islower() and _finite(
            _predicate(after[2:])) else None
    pair = len(after) > 2 and after[0] == "and" and re.fullmatch(
        _NAME, after[1].strip(",")) is not None and after[1].lower() not in own
    if name in given_names() and not pair:
        return None  # named_person has judged it
    if pair:
        after = after[2:]  # "Clementine and Hugo bought a house": two others
    after = _predicate(after)
    if not after or after[0].lower().strip(",.:;") in _NOT_VERBS:
        return None
    if " ".join(after[:3]).lower().startswith(_TRADE):
        return None  # "Lidl opened round the corner": what a shop does, whatever its name
    return name if _finite(after) or _present_tense(after[0]) else None


def _present_tense(word: str) -> bool:
    """A verb's third-person -s after a name ("Ottoline never replies", "Ines snores"):
    after a name a plural noun is rare, a possessive has its apostrophe."""
    low = word.lower().strip(",.:;!?")
    return (len(low) > 3 and low.isalpha() and low.endswith("s")
            and not low.endswith(("ss", "us", "is", "ous")))


# A claim whose subject is "he"/"she" left as said ("Sam said he's running a cheese
# stall now.", "She broke her wrist."): the extractor found no registered person it
# points at. The speaker never calls themself he or she, so the claim is about someone
# else; when the message before it names one person and nothing else a pronoun could
# point at, it is that person ("I bumped into Ignatius at the market, he's running a
# cheese stall now").
_LEFT_PRONOUN = r"(?P<pro>[Hh]e|[Ss]he)(?P<verb>'s|\u2019s|'ll|\u2019ll)?(?=[ ,.!?]|$)"
# Who or what else he/she may be: a relative, a colleague, a pet ("My dad took Rex to the
# vet, he..."): with one of these in the message, the pronoun is left as said.
_OTHER_REFERENT = re.compile(
    rf"\b(?:{PERSON_NOUNS}|{OCCUPATIONS}|guy|girl|boy|woman|man|lady|bloke|cat|dog|puppy"
    r"|kitten|pet|horse|bird|rabbit|hamster)s?\b", re.I)
# A pet's name takes he/she too ("Oliver's hilarious! He hid his bone in my slipper",
# LoCoMo dev): what only an animal has or does leaves the pronoun as said.
_ANIMAL = re.compile(r"\b(?:bones?|paws?|tail|leash|kibble|fur|fetch|walkies|litter|vet"
                     r"|bark\w*|purr\w*|meow\w*|wag\w*|sniff\w*|chew\w*|neigh\w*)\b", re.I)


def pronoun_person(statement: str, context: str, *, speaker_names: list[str],
                   known: dict[str, str] | None = None) -> tuple[NamedPerson, str] | None:
    """The one named person a leading he/she of `statement` points back at in `context`
    (the turns just before and the message's words before the claim), and the statement
    with the name put in:
    ("Sam said he's running a cheese stall now.", "I bumped into Ignatius at the market,")
    -> (Ignatius, "Sam said Ignatius is running a cheese stall now."). None when the
    pronoun is not the subject, when no person or more than one is named before it, or
    when a person noun ("my dad") or a registered person other than the speaker could be
    the one meant (the extractor's referents already had those)."""
    known = known or {}
    speaker = _speaker_alternation(speaker_names)
    match = re.match(rf"(?P<lead>(?:(?:{speaker}) {_REPORT} )?){_LEFT_PRONOUN}", statement)
    if match is None or not context.strip() or _ANIMAL.search(context + " " + statement):
        return None
    own = {part.lower() for n in speaker_names if n for part in n.split()}
    found: set[str] = set()
    for word in re.finditer(_NAME, context):
        name = word.group()
        lower = name.lower()
        if lower in own or name in _NOT_NAMES:
            continue
        if lower in known:
            return None  # a registered person: the extractor's referents decide
        # a word on no list of names, inside a sentence and followed by what only a
        # person does ("Turns out Barnaby is allergic"), not a sentence's first word
        # ("Let's hope...")
        inside = re.search(r"[\w,]\s+$", context[:word.start()]) is not None
        introduced = re.search(rf"\b(?i:{PERSON_NOUNS}),?\s+$", context[:word.start()])
        if introduced is not None or (name in given_names() and name not in word_names()
                and name not in place_homographs()) or (
                name not in given_names() and inside and context[word.end():][:1] == " "
                and human_predicate(_predicate(context[word.end():].split()))):
            found.add(name)  # a given name, or what only a person is ("Barnaby is allergic")
    if len(found) != 1:
        return None
    name = found.pop()
    at = context.find(name)
    for noun in _OTHER_REFERENT.finditer(context):
        if not (noun.end() <= at and re.fullmatch(r"[\s,]*", context[noun.end():at])):
            return None  # only "my cousin Rafferty" itself may name a person noun
    verb = (match.group("verb") or "").replace("\u2019", "'")
    rest = statement[match.end():]
    if verb == "'s":
        verb = " has" if re.match(r" (?:got|been|gone|had|done|made|taken)\b", rest) \
            else " is"
    elif verb == "'ll":
        verb = " will"
    if verb == " is" and re.match(rf" (?:now |also |still )?(?:(?:{speaker})'s|their) ",
                                  rest):
        return None  # "he's Sam's brother": who someone is to the speaker is theirs
    return NamedPerson(name, None), match.group("lead") + name + verb + rest
