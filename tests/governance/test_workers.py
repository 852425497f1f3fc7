"""Dream-time deduction against a real fake OpenAI-compatible server, the contributor
hook, redelivery of every beat task, and the beat schedule itself."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from governance import services, tasks, workers
from governance.models import DeductionRun, PeerQuestion, Validation
from knowledge.models import AuditEntry, Knowledge, LifecycleEvent, Relation
from memhouse.core.celery_schedule import BEAT_SCHEDULE
from memhouse.core.tenancy import account_context
from retrieval.models import EmbeddingSpace, KnowledgeVector
from tests.fake_llm import Reply, ok
from tests.governance.helpers import active_about, held_scope_claim, provisional_about


def _deduction(statement="Alice enjoys outdoor music festivals.", refs=("S1", "S2")):
    return {"deductions": [{"statement": statement, "kind": "preference", "confidence": 0.9,
                            "contributors": list(refs)}]}


@pytest.mark.django_db
def test_deduction_without_a_provider_does_nothing_and_says_so(world, settings):
    settings.MEMHOUSE_LLM_BASE_URL = ""
    active_about(world, "Alice likes jazz.")
    active_about(world, "Alice likes camping.")
    before = Knowledge.objects.count()
    result = workers.deduce(world.account.id)
    assert result["status"] == "skipped" and "no generation provider" in result["reason"]
    assert Knowledge.objects.count() == before and not DeductionRun.objects.exists()


@pytest.mark.django_db
def test_deduction_with_a_model_creates_a_gated_derived_statement(world, fake_llm,
                                                                  django_capture_on_commit_callbacks):
    jazz = active_about(world, "Alice likes jazz.")
    camping = active_about(world, "Alice likes camping.", sensitivity="personal")
    active_about(world, "Bob likes chess.", subject=world.member)  # a group of one: skipped
    fake_llm.script.append(ok(_deduction()))
    result = workers.deduce(world.account.id)
    assert (result["status"], result["groups"], result["created"]) == ("ok", 1, 1)
    # The request is the OpenAI wire format with a strict schema; the prompt lists the
    # contributors by ref, never their ids.
    body = fake_llm.requests[0]["json"]
    assert fake_llm.requests[0]["path"] == "/v1/chat/completions"
    assert body["response_format"]["json_schema"]["name"] == "deduction_v1"
    prompt = json.loads(body["messages"][1]["content"])
    assert prompt["person"] == "Alice"
    assert sorted(s["statement"] for s in prompt["statements"]) == [
        "Alice likes camping.", "Alice likes jazz."]
    assert str(jazz.pk) not in body["messages"][1]["content"]
    derived = Knowledge.objects.get(extractor="deduction")
    assert derived.statement == "Alice enjoys outdoor music festivals."
    # Gates: someone else's (the system's) claim about a person is deferred to them.
    assert (derived.state, derived.state_reason) == ("provisional", "f4_gate_a_b_deferred")
    assert derived.sensitivity == "personal" and derived.confidence <= 0.8
    assert derived.source_count == 1 and derived.sources.count() == 2
    assert set(Relation.objects.filter(source=derived, type="derived_from")
               .values_list("target_id", flat=True)) == {jazz.pk, camping.pk}
    assert PeerQuestion.objects.filter(knowledge=derived, peer=world.subject).exists()
    # Redelivery: the same contributors are not sent to the model again.
    again = workers.deduce(world.account.id)
    assert (again["groups"], again["created"]) == (0, 0) and len(fake_llm.requests) == 1

    # The subject confirms it; later a contributor leaves `active`.
    derived = services.knowledge_confirm(item=derived, actor=world.subject)
    assert derived.state == "active"
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        services.knowledge_redact(item=jazz, actor=world.subject, reason="old news")
    assert callbacks  # the hook enqueued the dependency check on commit
    derived.refresh_from_db()
    assert (derived.state, derived.state_reason) == ("needs_revalidation",
                                                     "f4_contributor_changed")
    assert Validation.objects.filter(knowledge=derived, kind="revalidation",
                                     status="open").exists()
    ev = LifecycleEvent.objects.filter(knowledge=derived).order_by("-created_at").first()
    assert ev.evidence == {"contributor": str(jazz.pk), "contributor_state": "redacted"}
    assert workers.contributor_changed(world.account.id, jazz.pk) == 0  # redelivery


@pytest.mark.django_db
def test_a_failing_or_confused_model_invents_nothing(world, fake_llm):
    active_about(world, "Alice likes jazz.")
    active_about(world, "Alice likes camping.")
    fake_llm.script.append(Reply(503, {"error": {"message": "overloaded"}}))
    result = workers.deduce(world.account.id)
    assert (result["failed"], result["created"]) == (1, 0)
    assert not DeductionRun.objects.exists()  # retried on the next run
    # A deduction naming only one real contributor is dropped.
    fake_llm.script.append(ok(_deduction(refs=("S1", "S9"))))
    result = workers.deduce(world.account.id)
    assert result["created"] == 0 and not Knowledge.objects.filter(extractor="deduction").exists()
    fake_llm.script.append(ok({"deductions": "nope"}))  # schema violation
    assert workers.deduce(world.account.id)["groups"] == 0  # that group is recorded as done


@pytest.mark.django_db
def test_the_hook_skips_gate_outcomes_and_active_rows(world, django_capture_on_commit_callbacks):
    def ours(callbacks) -> int:
        return sum("on_knowledge_transition" in getattr(c, "__qualname__", "")
                   for c in callbacks)

    with django_capture_on_commit_callbacks() as callbacks:
        item = active_about(world, "Alice likes jazz.")
        provisional_about(world, "Alice prefers tea.")
        held_scope_claim(world, "The team meets Mondays.")
    assert ours(callbacks) == 0  # no follow-up work for pipeline gate outcomes
    with django_capture_on_commit_callbacks() as callbacks:
        services.knowledge_contest(item=item, actor=world.subject, reason="wrong")
    assert ours(callbacks) == 1


def _everything_due(w):
    """Rows every beat task has work for."""
    past = timezone.now() - timedelta(minutes=5)
    with account_context(w.account.id):
        active_about(w, "Alice is at the offsite.", expires_at=past)
        active_about(w, "Alice likes jazz.", revalidate_after=past)
        held = held_scope_claim(w, "The team meets Mondays.")
        Validation.objects.filter(knowledge=held).update(due_at=past)
        provisional_about(w, "Alice prefers tea.")
        PeerQuestion.objects.update(deadline=past)
        a = active_about(w, "Alice plays chess.")
        b = active_about(w, "Alice plays chess on Sundays.")
        space = EmbeddingSpace.objects.get_or_create(provider="t", model="m", version="1",
                                                     dims=3)[0]
        for k in (a, b):
            KnowledgeVector.objects.create(account=w.account, knowledge=k, space=space,
                                           embedding=[1, 0, 0])


BEAT_TASKS = [tasks.expire_due, tasks.revalidate_due, tasks.age_overdue_reviews,
              tasks.decay_unanswered_questions, tasks.consolidate_duplicates,
              tasks.resolve_entities, tasks.deduce, tasks.verify_audit_chains]


@pytest.mark.django_db(transaction=True)
def test_every_beat_task_survives_redelivery(committed_world):
    w = committed_world
    _everything_due(w)
    first = {t.name: t.delay().get() for t in BEAT_TASKS}
    acme = str(w.account.id)
    assert first["governance.expire_due"]["accounts"][acme] == 1
    assert first["governance.revalidate_due"]["accounts"][acme] == 1
    assert first["governance.age_overdue_reviews"]["accounts"][acme] == 1
    assert first["governance.decay_unanswered_questions"]["accounts"][acme] == 1
    assert first["governance.consolidate_duplicates"]["accounts"][acme] == 1
    assert first["governance.deduce"]["accounts"][acme]["status"] == "skipped"
    assert first["governance.verify_audit_chains"]["accounts"][acme]["ok"] is True
    assert "failed_accounts" not in first["governance.expire_due"]
    with account_context(w.account.id):
        states = sorted(Knowledge.objects.values_list("state", flat=True))
        events = LifecycleEvent.objects.count()
        audits = AuditEntry.objects.count()
        validations = list(Validation.objects.order_by("id").values_list("id", "status"))
    assert states == ["active", "expired", "needs_revalidation", "rejected", "stale",
                      "superseded"]
    # Redelivered (or overlapping) runs change nothing.
    second = {t.name: t.delay().get() for t in BEAT_TASKS}
    for name in ("governance.expire_due", "governance.revalidate_due",
                 "governance.age_overdue_reviews", "governance.decay_unanswered_questions",
                 "governance.consolidate_duplicates"):
        assert second[name].get("total", 0) == 0, name
    with account_context(w.account.id):
        assert LifecycleEvent.objects.count() == events
        assert AuditEntry.objects.count() == audits
        assert list(Validation.objects.order_by("id").values_list("id", "status")) == validations
    # A task can also be pointed at one Account.
    assert tasks.expire_due.delay(acme).get() == 0


@pytest.mark.django_db
def test_entity_resolution_skips_gracefully_without_the_retrieval_module(world, monkeypatch,
                                                                       caplog):
    import sys

    monkeypatch.setitem(sys.modules, "retrieval.entities", None)  # import fails
    with caplog.at_level("INFO", logger="governance.workers"):
        result = workers.resolve_entities(world.account.id)
    assert result["status"] == "skipped"
    assert "entity resolution skipped" in caplog.text


def test_beat_schedule_entries_are_crontab_with_expiry():
    from celery.schedules import crontab

    from memhouse.celery import app

    ours = {k: v for k, v in BEAT_SCHEDULE.items() if v["task"].startswith("governance.")}
    assert {v["task"] for v in ours.values()} == {
        "governance.expire_due", "governance.revalidate_due", "governance.age_overdue_reviews",
        "governance.decay_unanswered_questions", "governance.resolve_entities",
        "governance.consolidate_duplicates", "governance.deduce",
        "governance.sweep_unprocessed", "governance.verify_audit_chains",
        "governance.reconfirm_supported"}
    for entry in ours.values():
        assert isinstance(entry["schedule"], crontab)
        assert entry["options"]["expires"] > 0
        assert entry["task"] in app.tasks
    assert ours["governance-expire-due"]["options"]["expires"] == 5400  # 1.5 x hourly


@pytest.mark.django_db
def test_a_new_deduction_run_supersedes_the_deductions_it_replaces(world, fake_llm):
    """Accepted deduction replacement: when Alice's statements change, the next run's
    conclusion replaces the one drawn before; one resting on a statement the new run did
    not see stays."""
    jazz = active_about(world, "Alice likes jazz.")
    camping = active_about(world, "Alice likes camping.")
    fake_llm.script.append(ok(_deduction("Alice enjoys outdoor music festivals.")))
    assert workers.deduce(world.account.id)["created"] == 1
    old = services.knowledge_confirm(item=Knowledge.objects.get(extractor="deduction"),
                                     actor=world.subject)
    # Elsewhere (another scope), a deduction the new run never sees.
    other_scope = world.account.scope_set.get(path="/")
    hiking = active_about(world, "Alice likes hiking.", scope=other_scope)
    birds = active_about(world, "Alice likes birds.", scope=other_scope)
    fake_llm.script.append(ok(_deduction("Alice enjoys nature walks.")))
    assert workers.deduce(world.account.id)["created"] == 1  # the "/" group only
    elsewhere = Knowledge.objects.get(statement="Alice enjoys nature walks.")
    # A new statement joins Alice's first scope: a new run, a new conclusion.
    active_about(world, "Alice likes folk music.")
    fake_llm.script.append(ok(_deduction("Alice enjoys folk festivals outdoors.",
                                         refs=("S1", "S2", "S3"))))
    result = workers.deduce(world.account.id)
    assert result["created"] == 1
    new = Knowledge.objects.get(statement="Alice enjoys folk festivals outdoors.")
    old.refresh_from_db()
    assert (old.state, old.state_reason) == ("superseded", "f4_deduction_replaced")
    assert Relation.objects.filter(source=new, target=old, type="supersedes").exists()
    event = LifecycleEvent.objects.filter(knowledge=old).order_by("-created_at").first()
    assert event.evidence["replaced_by"] == [str(new.pk)]
    elsewhere.refresh_from_db()
    assert elsewhere.state == "provisional"  # another scope's conclusion is not touched
    assert {jazz.pk, camping.pk, hiking.pk, birds.pk}  # contributors themselves stay
    assert Knowledge.objects.filter(pk__in=[jazz.pk, camping.pk], state="active").count() == 2


@pytest.mark.django_db
def test_a_run_that_concludes_nothing_or_the_same_replaces_nothing(world, fake_llm):
    active_about(world, "Alice likes jazz.")
    active_about(world, "Alice likes camping.")
    fake_llm.script.append(ok(_deduction("Alice enjoys outdoor music festivals.")))
    workers.deduce(world.account.id)
    first = Knowledge.objects.get(extractor="deduction")
    active_about(world, "Alice likes folk music.")
    fake_llm.script.append(ok({"deductions": []}))
    workers.deduce(world.account.id)
    first.refresh_from_db()
    assert first.state == "provisional"
    active_about(world, "Alice likes blues.")
    fake_llm.script.append(ok(_deduction("Alice enjoys outdoor music festivals.")))
    workers.deduce(world.account.id)  # the same conclusion: merged into the first row
    first.refresh_from_db()
    assert first.state == "provisional"
    assert Knowledge.objects.filter(extractor="deduction").exclude(state="rejected").count() == 1
