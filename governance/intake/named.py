"""Claims about named people who are not the speaker (the seed's gates for someone else).

At intake (`settle_subject`): a claim an extractor filed under the speaker, or under no
one, that is about a named person (knowledge.ingest.named_persons) never becomes a fact
about the speaker:

* a registered person -> their claim: provisional for them, with a question (as any
  claim about someone else);
* nobody registered by that name -> no subject, the name recorded in `named_entity`,
  held for a curator (`f4_named_person_hold`).

At registration (`link_named_person`, a knowledge.services peer hook): every claim held
that way whose recorded name is the new peer's becomes theirs and takes the
registered-person path (held -> provisional, `f4_named_person_linked`, the curator's
review closed and a confirmation question opened to them).
"""

from __future__ import annotations

from dataclasses import replace

from governance.intake.name_typer import is_given_name
from knowledge.ingest.extraction import ExtractedClaim
from knowledge.ingest.named_persons import (
    NamedPerson,
    given_names,
    named_person,
    pronoun_person,
    unlisted_subject,
)
from knowledge.models import Peer
from memhouse.core.principal import Actor

REGISTRATION = Actor.system("registration")
HOLD_REASON = "f4_named_person_hold"


def speaker_names(peer: Peer | None) -> list[str]:
    if peer is None:
        return []
    return [peer.display_name, peer.key, *(peer.aliases or [])]


def settle_subject(claim: ExtractedClaim, *, speaker: Peer | None,
                   names: dict[str, str], context: str = "") -> tuple[ExtractedClaim, str]:
    """The claim with its subject settled for a named person, and the unregistered name
    to record ("" when none). A claim already about another registered peer is kept.
    `context` is the message's text before the claim's evidence: a he/she the extractor
    left as said may point back at the one person it names (named_persons.pronoun_person),
    and the statement then says who."""
    speaker_key = speaker.key if speaker is not None else None
    if claim.subject_peer_key not in (None, speaker_key):
        return claim, ""
    found = named_person(claim.statement, speaker_names=speaker_names(speaker), known=names)
    if found is None and context:
        resolved = pronoun_person(claim.statement, context,
                                  speaker_names=speaker_names(speaker), known=names)
        if resolved is not None:
            found, statement = resolved
            claim = replace(claim, statement=statement)
    if found is None:
        # a name no lexicon lists, as the subject of the claim or of what it reports
        word = unlisted_subject(claim.statement, speaker_names=speaker_names(speaker))
        if word is not None and (word in given_names() or is_given_name(word)):
            found = NamedPerson(word, names.get(word.lower()))
    if found is None or (found.peer_key is not None and found.peer_key == speaker_key):
        return claim, ""
    if found.peer_key is not None:
        return replace(claim, subject_peer_key=found.peer_key, self_observation=False), ""
    return replace(claim, subject_peer_key=None, self_observation=False), found.name


def prior_text(recent: tuple[tuple[str, str], ...], before: str) -> str:
    """What a he/she of a claim may point back at: the conversation's turns just before
    the message (oldest first, as the extractor sees them) and the message's own words
    before the claim."""
    return "\n".join([*(text for _, text in recent), before])


def names_of(peer: Peer) -> list[str]:
    """The lower-cased names a held claim may know `peer` by (display name, key, aliases)."""
    return sorted({n.strip().lower() for n in speaker_names(peer) if n and n.strip()})
