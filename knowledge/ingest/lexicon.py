"""English word lists and the small word tests the rule-based extractor and the date rules
share (moved out of ``rule_extractor``)."""

from __future__ import annotations

import re


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_ADVERBS = _wordset(
    """really just also never always usually still recently finally often sometimes actually
    totally definitely absolutely truly honestly seriously literally basically already even
    only now then ever rarely seldom generally mostly barely hardly simply kinda sorta so
    personally certainly occasionally currently officially regularly constantly frequently
    lately all both again sure def soon"""
)
_LY_NOT_ADVERB = frozenset({"rely", "apply", "reply", "fly", "supply", "multiply", "imply",
                            "comply", "ally", "bully", "tally", "belly", "family", "july",
                            "italy", "holly", "lily", "sally", "emily", "molly", "kelly",
                            "jelly", "silly", "ugly", "only", "early", "daily", "weekly",
                            "monthly", "friendly", "lovely", "lonely", "curly", "rally"})

_IRREGULAR_PAST = _wordset(
    """went got had saw took made met did ran gave came found bought built began wrote won lost
    left felt thought told said heard sent spent brought caught taught ate drank drove flew
    swam sang slept kept held paid sold threw wore chose broke fell forgot hid fed led rode knew
    grew drew stood understood sat became shot fought sought meant dealt lent bent burnt
    learnt dreamt stuck struck hung shook woke spoke stole froze tore swore bit was were
    dug lit slid spun swung sprang sank shrank stank wept crept leapt knelt"""
)
_AMBIGUOUS_PAST = _wordset("read put cut hit set let hurt quit shut cost spread bet burst cast")
_PARTICIPLES = _wordset(
    """been seen done gone taken given eaten written driven known grown shown flown swum sung
    begun broken chosen spoken stolen forgotten gotten hidden ridden risen fallen worn torn
    sworn woken frozen drawn thrown blown become come run won met made had got found bought
    brought thought taught caught felt left kept held told sold paid sent spent built lost
    heard read put set cut hit let hurt quit shut understood stood sat slept led fed meant
    dealt"""
)
_MODALS = _wordset(
    """can could will would shall should may might must can't couldn't won't wouldn't
    shouldn't mustn't cannot"""
)
_STATIVE = _wordset(
    """felt thought knew wanted needed seemed liked loved hated hoped wished believed meant
    realized realised understood remembered appreciated preferred missed wondered used
    considered guessed imagined figured noticed"""
)
_VERB_BASES = _wordset(
    """be have do go get make know think take see come want look use find give tell work call
    try ask need feel become leave put mean keep let begin seem help talk turn start show hear
    play run move like live believe hold bring happen write provide sit stand lose pay meet
    include continue set learn change lead understand watch follow stop create speak read
    allow add spend grow open walk win offer remember love consider appear buy wait serve die
    send expect build stay fall cut reach kill remain suggest raise pass sell require report
    decide pull enjoy hate prefer visit attend join finish plan hope study teach cook bake
    paint draw sing dance swim hike travel drive fly ride climb eat drink sleep wear wish miss
    adopt volunteer practice practise train marry celebrate organize organise support share
    post explore relax rest shop clean fix save struggle manage handle apply earn graduate
    retire quit own rent research check pick choose fight focus admire appreciate care cry
    laugh smile worry agree disagree recommend mentor coach lift exercise jog bike camp fish
    garden knit sew blog record film collect feed adore dislike hire found launch design
    develop sign compete perform listen binge stream skate ski surf code program fail pass
    prepare practice treasure cherish value miss date host invite throw lead connect inspire
    motivate encourage feel thank volunteer donate raise foster rescue sponsor teach tutor
    mentor journal meditate pray vote protest campaign rally attend enroll enrol major minor
    own drive commute"""
)
_BE_FORMS = frozenset({"am", "is", "are", "was", "were", "'s", "'re", "'m", "be", "been"})
_FINITE = (
    _BE_FORMS
    | _MODALS
    | _IRREGULAR_PAST
    | {"has", "have", "had", "'ve", "'d", "'ll", "do", "does", "did", "don't", "doesn't",
       "didn't", "isn't", "aren't", "wasn't", "weren't", "hasn't", "haven't", "hadn't"}
)

_STOPWORDS = _wordset(
    """a an the and or but so yet nor of to in on at by for with from about as into onto over
    under up down out off than then that this these those there here it its it's i me my mine
    myself we us our ours ourselves you your yours yourself he him his she her hers they them
    their theirs what which who whom whose when where why how all any both each few more most
    other some such no not only own same too very can will just don't should now is am are was
    were be been being have has had having do does did doing would could might must shall may
    'm 're 've 'll 'd 's n't really also still even ever much many lot
    lots bit thing things stuff something anything everything nothing way ways kind sort
    well oh yeah yes ok okay sure maybe pretty quite rather super totally definitely
    absolutely always never usually sometimes often one ones time times day days again back
    gonna wanna going let lets wait though tho lol haha together here agree agreed"""
)
_FLUFF = _wordset(
    """great awesome amazing cool nice good fantastic wonderful lovely sweet incredible
    awesome fun exciting excited happy glad thankful grateful stoked pumped thrilled proud
    sorry sad bummed inspiring inspired powerful special beautiful gorgeous cute adorable
    hilarious funny crazy wild insane tough hard rough bad terrible awful fine best better
    worse worst huge big little whole real true sure important vital key true tho enjoyable
    helpful meaningful rewarding satisfying blessed lucky wow"""
)

_RELATION_NOUNS = (
    r"(?:husband|wife|spouse|partner|boyfriend|girlfriend|fianc[eé]e?|ex|son|sons|daughter"
    r"|daughters|kids?|children|child|baby|babies|mom|mum|mother|dad|father|parents?|sisters?"
    r"|brothers?|siblings?|cousins?|aunt|aunts|uncle|uncles|niece|nieces|nephew|nephews"
    r"|grand(?:ma|pa|mother|father|parents?|kids?|sons?|daughters?|children)|in-laws?"
    r"|(?:mother|father|sister|brother|son|daughter)-in-law|family|friends?|bff|bestie"
    r"|colleagues?|coworkers?|co-workers?|boss|manager|mentor|mentee|roommates?|flatmates?"
    r"|neighbou?rs?|classmates?|teammates?|stepmom|stepdad|stepson|stepdaughter|twin)"
)
_RELATION_PREDICATE = re.compile(
    r"\b(?:married|engaged|dating|divorced|separated|widowed|broke\s+up|broken\s+up|split\s+up"
    r"|works?\s+with|worked\s+with|working\s+with|related\s+to|in\s+a\s+relationship"
    r"|moved\s+in\s+with|proposed\s+to)\b"
)
# The relation itself is the claim: "my husband is a firefighter", "I have two kids";
# "I was at my cousin's wedding" or "my password manager kept logging me out" only
# mention someone and keep the kind of what they say.
_RELATION_NOUN_USE = re.compile(
    rf"(?:^(?:[a-z]+\s+)?(?:my|our|[a-z]+\s+'s)\s+(?:[a-z'-]+\s+)?{_RELATION_NOUNS}"
    rf"\s+(?:is|was|are|were|'s|'re)\b"
    rf"|\b(?:have|has|had|got)\s+(?:a|an|no|two|three|four|five|six|\d+)\s+(?:[a-z'-]+\s+)?"
    rf"{_RELATION_NOUNS}\b)"
)
_PREFERENCE_VERBS = _wordset(
    """like likes liked love loves loved loving enjoy enjoys enjoyed enjoying hate hates hated
    prefer prefers preferred adore adores adored dislike dislikes disliked recommend
    recommends recommended"""
)
_PREFERENCE_BLOCK_BEFORE = _wordset(
    """look looks looked looking feel feels felt feeling seem seems seemed sound sounds
    sounded be is was are were 's 're am 'm been something anything nothing more much act acts
    acted exactly kind sort stuff me him her us them you it this that my your our their the a
    an of with and or for to in on at from giving give gave got just would 'd"""
)
_PREFERENCE_PHRASE = re.compile(
    r"(?:\b(?:am|is|are|was|were|really|so|totally|been)|'m|'re|'s)\s+into\b"
    r"|\b(?:favou?rites?|fan\s+of|big\s+fan"
    r"|keen\s+on|passionate\s+about|obsessed\s+with|crazy\s+about|can\s+not\s+stand"
    r"|can't\s+stand|fond\s+of|can\s+not\s+get\s+enough|can't\s+get\s+enough)\b"
)
_SKILL = re.compile(
    r"\b(?:can|could)\s+(?:(?:really|also|actually|now|even|still|totally|already)\s+)?(?:speak|play|cook"
    r"|bake|swim|code|program|drive|dance|sing|paint|draw|write|knit|sew|ski|snowboard|surf"
    r"|skate|fix|repair|build|run|ride|climb|design|edit|translate|juggle|type|read)\b"
    r"|\bknows?\s+how\s+to\b|\bknew\s+how\s+to\b"
    r"|\b(?:good|great|skilled|talented|proficient|experienced|decent|excellent|expert|pro)\s+"
    r"(?:at|in)\b"
    r"|\b(?:skilled|fluent|proficient|certified|qualified|licensed)\b"
    r"|\blearn(?:ed|t)\s+(?:how\s+)?to\b|\btaught\s+(?:myself|himself|herself|themselves)\b"
    r"|\bspeaks?\s+(?:fluent\s+)?(?:english|spanish|french|german|italian|portuguese|chinese"
    r"|mandarin|cantonese|japanese|korean|arabic|russian|hindi|dutch|swedish|polish|turkish"
    r"|greek|hebrew)\b"
)


def _is_adverb(low: str) -> bool:
    return low in _ADVERBS or (low.endswith("ly") and len(low) > 4 and low not in _LY_NOT_ADVERB)


_NOT_PAST = _wordset("shed sled bed red wed hundred sacred naked wicked kindred")


def _is_regular_past(low: str) -> bool:
    return (len(low) > 3 and low.endswith("ed") and not low.endswith("eed") and low.isalpha()
            and low not in _NOT_PAST)


_ED_ADJECTIVES = _wordset(
    """tired excited married interested bored scared worried stressed exhausted amazed
    surprised thrilled pleased relieved impressed inspired motivated overwhelmed blessed
    obsessed engaged retired annoyed frustrated confused disappointed embarrassed ashamed
    delighted terrified frightened shocked stunned touched moved satisfied determined
    dedicated committed involved concerned prepared supposed used allowed"""
)


_WORD_SPLIT = re.compile(r"[^a-z0-9'-]+")


_TIDY_STEPS = (
    (re.compile(r"\s+"), " "),
    (re.compile(r"\s+([,.;:!?])"), r"\1"),
    (re.compile(r"([,;:])\1+"), r"\1"),
    (re.compile(r",\s*,"), ","),
    (re.compile(r"^[\s,;:.!?-]+"), ""),
    (re.compile(r"[\s,;:-]+$"), ""),
)


def _tidy(text: str) -> str:
    for pattern, replacement in _TIDY_STEPS:
        text = pattern.sub(replacement, text)
    return text.strip()


def _inflected(word: str, bases: frozenset[str]) -> bool:
    """`word` is a form of one of `bases` (regular inflections)."""
    if word in bases:
        return True
    for suffix, add in (("ies", "y"), ("ied", "y"), ("ying", "ie"), ("es", ""), ("s", ""),
                        ("ed", ""), ("ed", "e"), ("d", ""), ("ing", ""), ("ing", "e")):
        if word.endswith(suffix) and word[:-len(suffix)] + add in bases:
            return True
    # a doubled consonant: "swimming", "planned"
    return len(word) > 5 and word.endswith(("ing", "ed")) and word[-4 if word.endswith(
        "ing") else -3] == word[-5 if word.endswith("ing") else -4] and (
        word[:-4] if word.endswith("ing") else word[:-3]) in bases
