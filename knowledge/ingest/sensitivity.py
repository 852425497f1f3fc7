"""Sensitivity of a piece of text, shared by the rule-based and the LLM extractor (moved out
of ``rule_extractor``), and of the claims drawn from one sentence.

:func:`classify_sensitivity` reads one clause. :func:`share_within_sentences` is the
sentence rule both extractors apply to what they extracted from a message: when one claim
of a sentence is ``personal`` or ``restricted``, every other claim drawn from that same
sentence about the same subject is at least as sensitive. "I was diagnosed with type 2
diabetes last year, so I'm watching my sugar" gives "Sam was diagnosed with type 2
diabetes." and "Sam is watching their sugar.", both personal: the second half of a health
disclosure is not shared while the first is private. The subject is the claim's
``subject_peer_key``, so wording that points back at the subject ("their sugar" for "my
sugar", "Sam's mom is helping Sam", "Sam said it changed their diet") goes with it, and so
does a later clause whose pronoun, left as said, points back at the third party a personal
claim is about ("Omar told me he's in debt, so he's selling his car": "Sam said he's
selling his car" is personal too). A claim about someone else that only mentions the
subject ("I had knee surgery and Mel drove me home": "Mel drove Sam home") keeps its own
level: it says what that person did. Claims from other sentences of the message are never
raised (a message is not made personal because one of its sentences is), and a claim whose
evidence runs over more than one sentence (a model's quote of the whole message) neither
raises nor is raised: its own level already reads all of its evidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from knowledge.ingest.extraction import SENSITIVITIES, ExtractedClaim
from memhouse.core.needles import lowered, may_match, needles

__all__ = ["classify_sensitivity", "share_within_sentences"]

_RESTRICTED_I = re.compile(
    r"\b(?:pass(?:word|code|phrase)s?(?!\s+managers?\b)|pin\s+(?:code|number)|my\s+pin|social\s+security"
    r"|passport\s+(?:number|no\b|#)|(?:credit|debit)\s+card\s+(?:number|no\b|details|#)"
    r"|card\s+number|cvv|cvc|security\s+code|(?:bank\s+)?account\s+(?:number|no\b|#)"
    r"|routing\s+number|sort\s+code|iban|swift\s+code|api\s+(?:key|token)|secret\s+key"
    r"|private\s+key|access\s+token|auth\s+token|(?:driver'?s\s+)?licen[cs]e\s+number"
    r"|tax\s+id|national\s+(?:insurance|id)\s+number|(?:a|my|our|the|big)\s+secret"
    r"|don't\s+tell\s+anyone)\b",
    re.I,
)
_RESTRICTED_CASED = re.compile(r"\bPIN\b|\bSSN\b|\b\d{3}-\d{2}-\d{4}\b|\b(?:\d[ -]?){12,18}\d\b")
_PERSONAL = re.compile(
    r"\b(?:diagnos\w*|therap(?:y|ist|ists|ies)|medicat\w*|meds|prescri(?:bed|ption)\w*"
    r"|antidepressants?|sick\s+leave"
    r"|depress\w*|anxiety|panic\s+attacks?|adhd|autis\w*|bipolar|ptsd|ocd|cancer|chemo\w*"
    # Being in hospital is health; working at one is a job ("a nurse at St. Mary's Hospital").
    r"|tumou?rs?|diabet\w*|asthma|surgery|surgeries|hospitali[sz]\w*|illness|disease"
    r"|(?:in|into|to|from|out\s+of|left\s+the|admitted\s+to)\s+(?:the\s+)?hospital"
    r"|hospital\s+(?:stay|visit|bed|room|appointment)s?|(?:er|a&e|emergency\s+room)\s+visit"
    r"|disorder|disabilit\w*|disabled|pregnan\w*|miscarriage|infertil\w*|ivf|rehab|sobriety"
    r"|sober|addict\w*|alcoholi\w*|overdose|hiv|psychiatr\w*|my\s+mental\s+health"
    r"|mental\s+illness|eating\s+disorder|anorexi\w*|bulimi\w*|insulin|chronic\s+pain"
    r"|migraines?|injur\w*|concussion|gay|lesbian|bisexual|queer|lgbt\w*|transgender|trans"
    r"|transition(?:ing|ed)?|non-?binary|genderqueer|genderfluid|asexual|pansexual"
    r"|coming\s+out|came\s+out\s+(?:as|to)|come\s+out\s+(?:as|to)|sexual\s+orientation"
    r"|sexuality|gender\s+identity|pronouns|pride\s+(?:parade|march|month|event|festival|flag)|religio\w*|church\w*|mosque|synagogue|christian\w*"
    r"|catholic\w*|protestant|muslim|islam\w*|jewish|judaism|hindu\w*|buddhis\w*|sikh\w*"
    r"|atheis\w*|agnostic|pray\w*|bible|quran|koran|torah|my\s+faith|spiritual\w*|baptiz\w*"
    r"|baptis\w*|ramadan|passover|politic\w*|democrat\w*|republican\w*|left-wing|right-wing"
    r"|voted?\s+for|voting\s+for|election\w*|ballot|activis\w*|(?:labou?r|green|conservative"
    r"|liberal)\s+party|union\s+member\w*|debts?|in\s+debt|loans?|mortgage|salary|salaries"
    r"|income|paycheck|wages?|bankrupt\w*|savings|credit\s+score|net\s+worth|owe[sd]?"
    r"|taxes|tax\s+return|laid\s+off|unemploy\w*|fired(?!\s+up)|inheritance|alimony"
    r"|child\s+support|ethnicity|immigration\s+status|undocumented|criminal\s+record"
    r"|arrested|convicted|prison|jail|probation)\b",
    re.I,
)


# Money trouble, illness and belief in the words people use for them (issue 33 item 4: "We're
# behind on rent" read as nothing personal). Written from everyday British and American
# chat and checked against LoCoMo dev's claims and the extraction gold set (bench/README.md,
# "Clause sensitivity from real language"): the words alone where they have one sense
# ("arrears", "overdraft", "chemo"), a frame where they have more ("behind on rent", not
# "behind the shed"; "on benefits", not "the benefits of yoga"; "I'm broke", not "broke my
# arm" or "broke up"; "had a stroke", not "a stroke of luck").
_PERSONAL_PHRASES = re.compile(
    # finances
    r"\b(?:behind\s+(?:on|with)\s+(?:(?:the|my|our|his|her|their)\s+)?(?:rent|mortgage|bills?"
    r"|payments?|council\s+tax|car\s+payments?|repayments?)|arrears|overdraft|overdrawn"
    r"|(?:my|our|his|her|their|the)\s+rent|rent\s+(?:is|was)\s+(?:due|late|overdue)"
    r"|payday\s+loans?|maxed\s+out|credit\s+card\s+(?:debt|bills?)"
    r"|(?:can(?:'t|not|\s+not)|couldn't|could\s+not|cannot)\s+afford"
    r"|make\s+ends\s+meet|paycheck\s+to\s+paycheck|pay\s*check\s+to\s+pay\s*check"
    r"|(?:'m|'re|am|is|are|was|were|so|flat|stony|totally|completely|pretty|dead)\s+broke\b"
    r"(?!\s+(?:up|down|in|into|out|off|through|the|a|an|my|his|her|their|our|its|it|me|him|them)\b)"
    r"|skint|hard\s+up|strapped\s+for\s+cash|short\s+of\s+(?:cash|money)"
    r"|money\s+(?:problems|worries|troubles|issues)|financial(?:ly)?\s+(?:trouble|difficult"
    r"|struggl|stress|problem|hardship|worr)\w*|struggling\s+financially|hardship\s+fund"
    r"|bailiffs?|debt\s+collectors?|evict\w*|repossess\w*|foreclos\w*"
    r"|(?:on|claiming|claim|applied\s+for|apply\s+for|lost\s+(?:my|our|his|her|their))"
    r"\s+(?:benefits|welfare|universal\s+credit|food\s+stamps|unemployment)"
    r"|universal\s+credit|jobseeker'?s\s+allowance|food\s+stamps"
    r"|pay\s+cut|made\s+redundant|redundanc(?:y|ies)|sacked|pawn(?:ed|ing)?"
    r"|remortgag\w*|(?:my|our|his|her|their)\s+pension"
    r"|(?:my|our|his|her|their)\s+benefits\b(?!\s+of\b)"
    # using a food bank, not volunteering at one (LoCoMo dev: "at the food bank")
    r"|(?:use|used|using|rely\s+on|relied\s+on|relying\s+on|need(?:ed)?)\s+(?:a|the)\s+food"
    r"\s+banks?"
    # health
    r"|allerg(?:y|ies|ic)|anaphyla\w*|(?:lactose|gluten|food)\s+intoleran\w*|coeliac|celiac|epipen|antibiotics|inhaler|blood\s+pressure"
    r"|cholesterol|heart\s+attack|(?:had|having|suffered)\s+a\s+(?:mini-?)?stroke"
    r"|seizures?|epilep\w*|dementia|alzheimer\w*|parkinson\w*|arthritis|biopsy"
    # getting counselling, not a career in it (LoCoMo dev: "a career in counseling")
    r"|(?:for|getting|having|started|starting|go\s+to|going\s+to|went\s+to|been\s+to"
    r"|attend\w*|grief|couples|marriage)\s+counsell?ing|(?:my|our)\s+counsell?or"
    # medicines people take, by class or common name
    r"|statins?|metformin|steroids|beta[\s-]blockers|blood\s+thinners|warfarin|sertraline"
    r"|prozac|fluoxetine|citalopram|lithium|methadone|hrt|opioids|ozempic|wegovy"
    r"|mri|ct\s+scan|scan\s+results|lump\s+in|long\s+covid|(?:had|got|have|has|caught"
    r"|tested\s+positive\s+for)\s+covid|physio\w*|chemo|radiotherapy|remission"
    r"|terminal(?:ly)?\s+ill|prognosis|a&e|intensive\s+care|icu"
    r"|(?:doctor'?s|gp|hospital)\s+appointments?|off\s+sick|signed\s+off"
    # "I got sick", "Dad is unwell"; not "sick of", nor a thing that "was sick" (slang)
    r"|sick\s+note|(?:got|been|fell|feeling|felt|am|'m|are|'re)\s+(?:really\s+|very\s+|so\s+"
    r"|quite\s+)?(?:sick|ill|unwell|poorly)\b(?!\s+(?:of|and\s+tired)\b)"
    r"|(?:is|was|were)\s+(?:really\s+|very\s+|quite\s+)?(?:ill|unwell|poorly)\b"
    # hurt in body or mind (LoCoMo dev: "Melanie got hurt", "got into an accident",
    # "struggled with mental health"); not a pet's paw
    r"|got\s+(?:badly\s+|seriously\s+)?(?:hurt|injured)|(?:was|were|been)\s+(?:badly\s+"
    r"|seriously\s+)?(?:hurt|injured)\s+(?:in|at|during|when|by)\b"
    r"|(?:car|bike|cycling|skiing|climbing|motorbike|motorcycle)\s+(?:accident|crash)"
    r"|(?:got\s+into|had|was\s+in|were\s+in|been\s+in)\s+(?:an?|the)\s+(?:bad\s+|serious\s+)?"
    r"(?:accident|crash)|(?:struggl\w*|issues|problems|battl\w*|suffer\w*|dealing)\s+with\s+"
    r"(?:(?:my|his|her|their|our|poor)\s+)?(?:mental\s+health|depression|anxiety|addiction"
    r"|alcohol|drinking|drugs|grief)|(?:his|her|their|our)\s+mental\s+health\s+(?:is|was|has"
    r"|got|struggles|issues|problems)"
    r"|burn(?:ed|t)\s+out|burnout|stress\s+leave|breakdown|self-?harm\w*|suicid\w*"
    r"|insomnia|sleeping\s+pills|antibiotic|painkillers|abortion|contracepti\w*"
    r"|birth\s+control|fertility|endometriosis|pcos|menopaus\w*|stis?|stds?|herpes"
    r"|chlamydia|broke\s+(?:my|his|her|their|a)\s+(?:arm|leg|wrist|ankle|hip|rib|ribs|collarbone"
    r"|foot|hand|finger|toe|nose|back|neck|jaw)|broken\s+(?:arm|leg|wrist|ankle|hip|ribs?"
    r"|collarbone|foot|hand|finger|toe|nose|back|neck|jaw)|stitches|had\s+an\s+operation"
    r"|(?:knee|hip|back|heart|eye)\s+operation|expecting\s+(?:a\s+baby|twins)"
    # beliefs
    r"|pagan\w*|mormon\w*|jehovah\w*|evangelical|quaker\w*|born\s+again|kosher|halal"
    r"|(?:my|our|his|her|their)\s+(?:priest|vicar|rabbi|imam|pastor|minister|faith|god)"
    r"|bar\s+mitzvah|bat\s+mitzvah|eid|diwali|hanukk?ah|chanukah|yom\s+kippur"
    r"|rosh\s+hashanah|vaisakhi|navratri|tory|tories|trump\s+supporter|maga"
    r"|voted?\s+(?:leave|remain|tory|labour|reform|lib\s+dem|green|conservative|trump|biden"
    r"|harris|republican|democrat)|pro-life|pro-choice|anti-abortion|socialis[tm]|communis[tm]"
    r"|marxis[tm]|libertarian|feminis[tm]|believ\w*\s+in\s+god|(?:go|goes|went|going)\s+to\s+"
    r"(?:mass|temple|gurdwara)"
    # immigration status, not travel ("visa requirements for places I want to visit")
    r"|(?:work|student|spouse|partner|marriage)\s+visa|visa\s+(?:was\s+|got\s+|has\s+been\s+)?"
    r"(?:refused|denied|rejected|revoked|expired|application)|green\s+card|asylum"
    r"|refugee\s+status|deport\w*)\b",
    re.I,
)


def classify_sensitivity(text: str) -> str:
    """``restricted``, ``personal`` or ``internal`` for a piece of text (never ``public``)."""
    # Each word list is searched only when the text holds one of its words (exact, see
    # memhouse.core.needles): the three lists cost ~300 us per chat turn searched whole.
    low = lowered(text)
    if (may_match(_NEEDLES[0], low) and _RESTRICTED_I.search(text)) \
            or _RESTRICTED_CASED.search(text):
        return "restricted"
    if may_match(_NEEDLES[1], low) and _PERSONAL.search(text):
        return "personal"
    said = text.replace("\u2019", "'")
    if may_match(_NEEDLES[2], lowered(said)) and _PERSONAL_PHRASES.search(said):
        return "personal"
    return "internal"


# The word lists' needles (memhouse.core.needles), in the order classify_sensitivity asks.
_NEEDLES = (needles(_RESTRICTED_I), needles(_PERSONAL), needles(_PERSONAL_PHRASES))


#: The levels that spread to the other claims of a sentence.
_SPREADING = frozenset({"personal", "restricted"})
# A pronoun left as said, which in a later clause points back at a third party the sentence
# named before it: "Omar is in debt, so he's selling his car".
_THIRD_PERSON = re.compile(
    r"\b(?:he|she|they|him|her|them|his|hers|their|theirs|himself|herself|themself"
    r"|themselves)\b", re.I)


def _sentence_of(span: tuple[int, int], sentences: Sequence[tuple[int, int]]) -> int | None:
    """Index of the one sentence holding the whole span, or None."""
    for index, (start, end) in enumerate(sentences):
        if start <= span[0] and span[1] <= end:
            return index
    return None


def _about(claim: ExtractedClaim, source: ExtractedClaim, text: str) -> bool:
    """Whether ``claim`` is about the subject of ``source``, a claim of the same sentence:
    the same subject, or a later clause whose pronoun points back at the third party
    ``source`` is about (kept as what the speaker said: "Sam said he's selling his car")."""
    if claim.subject_peer_key == source.subject_peer_key:
        return True
    return (source.subject_peer_key is not None and not source.self_observation
            and claim.evidence_span[0] >= source.evidence_span[1]
            and _THIRD_PERSON.search(text[claim.evidence_span[0]:claim.evidence_span[1]])
            is not None)


def share_within_sentences(claims: Sequence[ExtractedClaim], text: str,
                           sentences: Sequence[tuple[int, int]]) -> list[ExtractedClaim]:
    """The claims, each at least as sensitive as the most sensitive personal or restricted
    claim drawn from the same sentence about the same subject (see the module docstring);
    ``text`` is the message text and ``sentences`` its sentences as offsets, as the
    evidence spans are. Order and every other field are unchanged."""
    places = [_sentence_of(claim.evidence_span, sentences) for claim in claims]
    out: list[ExtractedClaim] = []
    for claim, place in zip(claims, places, strict=True):
        level = SENSITIVITIES.index(claim.sensitivity)
        raised = max((SENSITIVITIES.index(source.sensitivity)
                      for source, where in zip(claims, places, strict=True)
                      if where is not None and where == place and source is not claim
                      and source.sensitivity in _SPREADING and _about(claim, source, text)),
                     default=level)
        out.append(replace(claim, sensitivity=SENSITIVITIES[raised]) if raised > level
                   else claim)
    return out
