"""knowledge.ingest.named_persons reads the person a statement is about from its subject
position; the model-backed extractor's claims about an unlisted person go through the
same intake rule as the rule-based one's (held with the name, never the speaker's)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from knowledge import services
from knowledge.ingest.named_persons import named_person
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
