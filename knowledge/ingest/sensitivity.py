"""Sensitivity of a piece of text, shared by the rule-based and the LLM extractor (moved out
of ``rule_extractor``)."""

from __future__ import annotations

import re

__all__ = ["classify_sensitivity"]

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
