"""Nothing falls out of use for good: a statement nobody can confirm (no human subject)
that passes revalidate_after goes to the curator queue with reconfirm and retire, over
real HTTP; the worker reconfirms the ones a live source still supports."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from governance import services, workers
from governance.models import PeerQuestion, Validation
from knowledge.models import DocumentVersion, Knowledge, KnowledgeSource
from memhouse.core.tenancy import account_context
from tests.governance.helpers import active_about, api, held_scope_claim


def _shared_fact(world: Any, statement: str, **kwargs: Any) -> Knowledge:
    """A curator-approved scope claim (no subject) whose revalidation date has passed."""
    item = held_scope_claim(world, statement,
                            revalidate_after=timezone.now() - timedelta(days=1), **kwargs)
    return services.knowledge_approve(item=item, actor=world.curator)


@pytest.mark.django_db(transaction=True)
def test_a_shared_fact_past_revalidation_goes_to_the_curator_who_reconfirms_or_retires(
        live_server: Any, keys: Any, committed_world: Any) -> None:
    w = committed_world
    with account_context(w.account.id):
        kept = _shared_fact(w, "The office closes at 6pm on Fridays.")
        gone = _shared_fact(w, "The team standup is at 9:30 every day.")
        alices = active_about(w, "Alice likes jazz.",
                              revalidate_after=timezone.now() - timedelta(days=1))
    assert workers.revalidate_due(w.account.id) == 3
    with account_context(w.account.id):
        # Nobody is asked about the shared facts (there is nobody to ask); Alice is.
        assert not PeerQuestion.objects.filter(knowledge__in=[kept, gone]).exists()
        assert PeerQuestion.objects.filter(knowledge=alices, peer=w.subject).exists()
    r = api(live_server, keys.carol, "GET", "curator/queue", state="revalidation")
    assert r.status_code == 200, r.text
    listed = {i["id"]: i for i in r.json()["items"]}
    assert set(listed) == {str(kept.pk), str(gone.pk)}  # never Alice's own statement
    assert [v["kind"] for v in listed[str(kept.pk)]["validations"]] == ["revalidation"]
    # Unfiltered, the queue shows them too.
    everything = api(live_server, keys.carol, "GET", "curator/queue").json()["items"]
    assert {str(kept.pk), str(gone.pk)} <= {i["id"] for i in everything}

    path = "curator/knowledge/{}/revalidation"
    r = api(live_server, keys.carol, "POST", path.format(kept.pk), {"outcome": "reconfirm"})
    assert r.status_code == 200, r.text
    body = r.json()["knowledge"]
    assert (body["state"], body["state_reason"]) == ("active", "f4_revalidation_confirmed")
    r = api(live_server, keys.carol, "POST", path.format(gone.pk),
            {"outcome": "retire", "note": "we stopped that"})
    assert (r.json()["knowledge"]["state"], r.json()["knowledge"]["state_reason"]) == (
        "rejected", "f4_curator_retired")
    assert workers.revalidate_due(w.account.id) == 0  # moved forward: left alone now
    with account_context(w.account.id):
        kept.refresh_from_db()
        assert kept.revalidate_after > timezone.now()
        assert not Validation.objects.filter(knowledge__in=[kept, gone],
                                             status=Validation.Status.OPEN).exists()
    assert api(live_server, keys.carol, "GET", "curator/queue",
               state="revalidation").json()["items"] == []
    # Alice's statement is hers to confirm; a member is no curator; bad input is a 400.
    r = api(live_server, keys.carol, "POST", path.format(alices.pk), {"outcome": "reconfirm"})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "subject_decides")
    r = api(live_server, keys.bob, "POST", path.format(kept.pk), {"outcome": "retire"})
    assert r.status_code == 403
    r = api(live_server, keys.carol, "POST", path.format(kept.pk), {"outcome": "maybe"})
    assert r.status_code == 400 and r.json()["error"]["code"]
    r = api(live_server, keys.carol, "POST", path.format(kept.pk), {"outcome": "retire"})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "not_due")


@pytest.mark.django_db
def test_the_worker_reconfirms_what_a_live_source_still_supports(world: Any) -> None:
    supported = _shared_fact(world, "The office closes at 6pm on Fridays.")
    orphan = _shared_fact(world, "Parking is free on the second floor.")
    # Its only source is a document version since tombstoned (the retraction path is
    # not what this test is about, so the source is moved there directly).
    doc = world.account.document_set.create(scope=world.scope, title="handbook")
    version = DocumentVersion.objects.create(account=world.account, document=doc, number=1,
                                             text="Parking is free on the second floor.",
                                             tombstoned_at=timezone.now())
    KnowledgeSource.objects.filter(knowledge=orphan).update(message=None,
                                                            document_version=version)
    assert workers.revalidate_due(world.account.id) == 2
    assert workers.reconfirm_supported(world.account.id) == 1
    supported.refresh_from_db()
    orphan.refresh_from_db()
    assert (supported.state, supported.state_reason) == ("active", "f4_revalidation_source_live")
    assert supported.revalidate_after > timezone.now()
    assert Validation.objects.get(knowledge=supported, kind="revalidation").resolution == \
        "source_live"
    assert orphan.state == "needs_revalidation"  # waits for the curator
    assert workers.reconfirm_supported(world.account.id) == 0  # redelivery: nothing left
