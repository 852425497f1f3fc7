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


def classify_sensitivity(text: str) -> str:
    """``restricted``, ``personal`` or ``internal`` for a piece of text (never ``public``)."""
    if _RESTRICTED_I.search(text) or _RESTRICTED_CASED.search(text):
        return "restricted"
    if _PERSONAL.search(text):
        return "personal"
    return "internal"


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
