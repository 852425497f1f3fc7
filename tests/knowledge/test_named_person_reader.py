"""knowledge.ingest.named_persons reads the person a statement is about from its subject
position; the model-backed extractor's claims about an unlisted person go through the
same intake rule as the rule-based one's (held with the name, never the speaker's)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from knowledge import services
from knowledge.ingest.named_persons import named_person, pronoun_person
from knowledge.ingest.services import IncomingMessage, messages_ingest
from knowledge.models import Knowledge
from memhouse.core.principal import Principal
from memhouse.core.tenancy import account_context
from tests.fake_llm import FakeOpenAI, ok


@pytest.mark.parametrize(("statement", "name"), [
    ("Jordan told Sam he is quitting Google.", "Jordan"),
    ("Sam said Jordan is quitting Google.", "Jordan"),
    ("Sam's sister Jordan works at Acme.", "Jordan"),
    ("Sam's coworker, Dana, is leaving.", "Dana"),
    ("Sam said apparently Kevin was diagnosed with diabetes.", "Kevin"),
    ("Sam heard Raj got promoted to director.", "Raj"),
    ("Sam said Chen is a nurse at the county hospital.", "Chen"),
    ("Sam said Lisa's husband lost his job.", "Lisa"),
    ("Sam said Derek from accounting got fired.", "Derek"),
    ("Sam said Hannah broke her leg skiing.", "Hannah"),
    ("Sam said Priyanka just got promoted to VP.", "Priyanka"),
    ("Sam said: Emma Watson, she's a big supporter of gender equality.", None),
    ("Jordan and Sam went hiking.", None),
    ("Sam works with Jordan at Acme.", None),
    ("Sam said Austin is hot in July.", None),
    ("Sam said Google is hiring.", None),
    ("Google told Sam their account is locked.", None),
    ("Sam said Art can be so healing.", None),
    ("Seeing Sam's kids' smiles was so awesome.", None),
    ("Sam said: the office closes at 6pm on Fridays.", None),
])
def test_the_named_person_is_read_from_the_subject_position(statement: str,
                                                            name: str | None) -> None:
    found = named_person(statement, speaker_names=["Sam", "sam"], known={"alex": "alex"})
    assert (found.name if found else None) == name


def _claim(statement: str, subject: str) -> dict[str, Any]:
    return {"statement": statement, "subject": subject, "kind": "fact", "confidence": 0.8,
            "sensitivity": "internal", "relative_date": None, "absolute_from": None,
            "absolute_until": None, "evidence": "Jordan told me", "replaces": None}


@pytest.mark.django_db(transaction=True)
def test_a_models_claim_about_an_unlisted_person_is_held_not_the_speakers(
        committed_world: Any, fake_openai: FakeOpenAI, settings: Any) -> None:
    settings.MEMHOUSE_LLM_MAX_RETRIES = 0
    fake_openai.default = lambda request: ok({"claims": [
        _claim("Jordan is quitting Google.", "speaker"),
        _claim("Jordan's sister Ana works at Acme.", "scope"),
        _claim("Caroline is relieved for Jordan.", "speaker")]})
    w = committed_world
    with account_context(w.account.id):
        services.peer_create(account_id=w.account.id, key="caroline", kind="human",
                             display_name="Caroline")
        messages_ingest(principal=Principal(account_id=w.account.id, peer=w.agent,
                                            act_for_all=True, via="api_key"),
                        scope_path="/", messages=[IncomingMessage(
                            text="Jordan told me he is quitting Google, and his sister Ana "
                                 "works at Acme. I'm relieved for him.",
                            occurred_at=timezone.now(), peer_key="caroline")])
    with account_context(w.account.id):
        rows = {k.statement: k for k in Knowledge.objects.select_related("subject_peer")}
    quitting = rows["Jordan is quitting Google."]
    assert (quitting.state, quitting.subject_peer, quitting.named_entity) == (
        "held", None, "Jordan")
    assert quitting.state_reason == "f4_named_person_hold"
    sister = rows["Jordan's sister Ana works at Acme."]
    assert (sister.state, sister.named_entity) == ("held", "Jordan")
    own = rows["Caroline is relieved for Jordan."]
    assert own.state == "active" and own.subject_peer.key == "caroline"


@pytest.mark.parametrize(("statement", "name"), [
    # the subject of a clause the speaker reports, knows or perceives, mid-sentence
    ("Sam found out Dmitri is colorblind.", "Dmitri"),
    ("Sam just learned Anneliese is expecting twins.", "Anneliese"),
    ("Sam heard that Marguerite quit the choir.", "Marguerite"),
    ("Sam said turns out Gloria is allergic to cats.", "Gloria"),
    # introduced by a person noun after a report, with "from ...", or in apposition
    ("Sam said Sam's coworker Dmitri is leaving.", "Dmitri"),
    ("Sam's friend from college, Dmitri, just got engaged.", "Dmitri"),
    ("Dmitri, Sam's old roommate, is getting married.", "Dmitri"),
    # names written with accents or an apostrophe
    ("Sam said Tomás is moving to Lima.", "Tomás"),
    ("Sam said O'Brien is retiring.", "O'Brien"),
    # the 's of "is" or "has" after a name, not of whose
    ("Sam said Dmitri's moving to Oslo.", "Dmitri"),
    ("Dmitri's been sick all week.", "Dmitri"),
    # names on no list, known by what only a person does or is
    ("Sam said Jun is studying law at Columbia.", "Jun"),
    ("Sam heard Yuki left the company.", "Yuki"),
    ("Sam said Wei just bought a house in Oakland.", "Wei"),
    ("Sam said Theo can't swim.", "Theo"),
    ("Sam said Xochitl thinks the plan is risky.", "Xochitl"),
    ("Sam said Ottoline broke her ankle at netball.", "Ottoline"),
    ("Sam said Leopoldine has been off sick since March.", "Leopoldine"),
    # a capital that starts a quoted sentence, an object after the verb, a place, the
    # possessive of a thing
    ("Sam said Unconditional love is so important.", None),
    ("Sam said Events like these are great for the community.", None),
    ("Moments like these remind Sam why Sam keeps going.", None),
    ("Sam said Strength training is important for runners.", None),
    ("Sam wishes Nate the best on Nate's party.", None),
    ("Sam found out Lisbon is beautiful in June.", None),
    ("Sam said Google is hiring again.", None),
    ("Sam said Dmitri's wedding was lovely.", None),
    # who someone is to the speaker is the speaker's own fact
    ("Sam said Marisol is Sam's new babysitter.", None),
    # the speaker's own wish or feeling about someone, not news of them
    ("Sam hopes Dmitri enjoys the trip.", None),
    ("Sam is glad Dmitri is alright.", None),
    ("Sam sees Dr. Eriksen now.", None),
    ("Sam saw Dmitri at the gym.", None),
])
def test_a_named_person_mid_clause_contracted_or_unlisted(statement: str,
                                                        name: str | None) -> None:
    found = named_person(statement, speaker_names=["Sam", "sam"], known={"alex": "alex"})
    assert (found.name if found else None) == name


@pytest.mark.parametrize(("statement", "name"), [
    # news the speaker passes on from someone else, with a kinship title on the name
    ("Sam said Mum says Auntie Brenda had a fall.", "Brenda"),
    ("Sam's dad told Sam Auntie Grace is back in hospital.", "Grace"),
    ("Sam said Dad reckons Uncle Mick is retiring.", "Mick"),
    # an -ing word after 's: a verb when an object or "to" follows, else a noun
    ("Sam said Anouk's training to be a midwife.", "Anouk"),
    ("Sam said Oluwaseun's baking a cake for the fete.", "Oluwaseun"),
    ("Sam said Killian's training for the Dublin marathon.", "Killian"),
    ("Sam said Anouk's training was tough.", None),
    ("Sam said Zoom's meeting feature is clunky.", None),
    ("Sam said Lidl's reading glasses are cheap.", None),
    # what only a person has, does or is, for names on no list
    ("Sam said Florian's knee surgery went well.", "Florian"),
    ("Sam heard Lysander got made redundant.", "Lysander"),
    ("Sam said Seraphina is doing a PhD in marine biology.", "Seraphina"),
    ("Sam said Seraphina lives in Bath.", "Seraphina"),
    ("Sam said Lysander plays the cello.", "Lysander"),
    ("Sam said Barnaby has two kids.", "Barnaby"),
    ("Sam said Barnaby just turned forty.", "Barnaby"),
    ("Sam said Barnaby has been in hospital all week.", "Barnaby"),
    ("Sam said Lysander is moving in with his girlfriend.", "Lysander"),
    ("Sam said Barnaby is a lovely bloke.", "Barnaby"),
    ("Sam said Jolyon got a puppy, a little beagle called Pip.", "Jolyon"),
    ("Sam just heard Peregrine got into Oxford.", "Peregrine"),
    # a title after a word of age or fondness, and clergy
    ("Sam said Old Mr Hargreaves next door is in a care home now.", "Hargreaves"),
    ("Sam's vicar, Reverend Pam, is retiring at Easter.", "Pam"),
    # hearsay said in other words, a word of fondness before the name, an illness
    ("Sam said according to Mum, Auntie Sheila is moving to Spain.", "Sheila"),
    ("Sam said Word is that Ottoline's pregnant.", "Ottoline"),
    ("Sam said Rumour has it Bartholomew is leaving the firm.", "Bartholomew"),
    ("Sam said Poor Anselm has shingles.", "Anselm"),
    # companies and places do none of these
    ("Sam said Google is hiring engineers in Dublin.", None),
    ("Sam said Acme works with three suppliers.", None),
    ("Sam said Tesco sells cheap flowers.", None),
    ("Sam said Brighton is lovely in May.", None),
])
def test_relayed_news_verbs_after_s_and_unlisted_names(statement: str,
                                                      name: str | None) -> None:
    found = named_person(statement, speaker_names=["Sam", "sam"], known={"alex": "alex"})
    assert (found.name if found else None) == name


@pytest.mark.parametrize(("statement", "context", "expected"), [
    # the one person the message names before the he/she the extractor left as said
    ("Sam said he's running a cheese stall now.",
     "I bumped into Ignatius at the market, ",
     ("Ignatius", "Sam said Ignatius is running a cheese stall now.")),
    ("Sam said he ended up in A&E.", "Turns out Barnaby is allergic to wasps, ",
     ("Barnaby", "Sam said Barnaby ended up in A&E.")),
    ("She's got a new job in Leeds.", "Have you heard from Marguerite? ",
     ("Marguerite", "Marguerite has got a new job in Leeds.")),
    ("Sam said he's running a cheese stall now.", "My cousin Rafferty, ",
     ("Rafferty", "Sam said Rafferty is running a cheese stall now.")),
    # two people, a person noun that could be the one meant, a registered person (the
    # extractor's referents decide), a pet, a sentence's first word on no list: as said
    ("Sam said he's running a cheese stall now.", "Ignatius and Dmitri were there, ", None),
    ("Sam said he's running a cheese stall now.", "Ignatius came with his dad, ", None),
    ("Sam said he's running a cheese stall now.", "I saw Alex at the market, ", None),
    ("Sam said he hid his bone in Sam's slipper.", "Oliver's hilarious! ", None),
    ("Sam said he'll love it.", "Let's hope the weather holds. ", None),
    # who someone is to the speaker stays the speaker's ("X is Sam's new babysitter")
    ("Sam said he's Sam's new babysitter.", "That's Ignatius in the photo. ", None),
    # the speaker's own words, and a pronoun that is no subject
    ("Sam is running a cheese stall now.", "I bumped into Ignatius, ", None),
    ("Sam gave him a lift.", "I bumped into Ignatius, ", None),
])
def test_a_he_or_she_left_as_said_points_back_at_the_one_person_named(
        statement: str, context: str, expected: tuple[str, str] | None) -> None:
    found = pronoun_person(statement, context, speaker_names=["Sam", "sam"],
                           known={"alex": "alex", "sam": "sam"})
    assert (None if found is None else (found[0].name, found[1])) == expected
