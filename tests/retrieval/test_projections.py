"""Context projections: shareable filtering, dirty marking from the lifecycle hook,
bounded compaction, version invalidation, liveness checks and the erasure cascade."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import F

from knowledge import services
from knowledge.lifecycle import transition
from knowledge.models import Knowledge, Message, Peer, Scope, Session
from memhouse.core.tenancy import account_context
from retrieval import projections
from retrieval.models import Projection, ProjectionSource
from retrieval.projections import Audience, Key, Kind
from tests.retrieval.test_search import _add, corpus  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)


def _keys(w: Any, *, peer: str | None = None, session: Session | None = None,
          audience: str = Audience.SHARED) -> list[Key]:
    with account_context(w.account.id):
        chain = list(Scope.objects.filter(path__in=["/marketing/social", "/marketing", "/"])
                     .values_list("id", flat=True))
        pid = Peer.objects.get(key=peer).id if peer else None
    keys = [Key(Kind.SCOPE_CARD, audience, s) for s in chain]
    if pid:
        keys += [Key(Kind.PEER_PROFILE, Audience.SUBJECT, s, peer_id=pid) for s in chain]
    if session is not None:
        keys += [Key(Kind.SESSION_SUMMARY, audience, s, session_id=session.id) for s in chain]
    return keys


def _build(w: Any, keys: list[Key]) -> projections.Loaded:
    """Read once (creates the rows; the eager queue rebuilds them on commit), read again."""
    with account_context(w.account.id):
        first = projections.load(w.account.id, keys)
    assert not first.complete
    with account_context(w.account.id):
        second = projections.load(w.account.id, keys)
    assert second.complete, (second.missing, second.dirty, second.stale)
    return second


def _entry_ids(loaded: projections.Loaded, kind: str) -> set[str]:
    return {e["id"] for k, p in loaded.payloads.items() if k.kind == kind
            for e in p["entries"]}


def test_shared_projections_carry_shareable_statements_only(corpus):  # noqa: F811
    w, ids = corpus
    with account_context(w.account.id):
        promoted = _add(w, "Alice's personal budget rule is approved for the team.",
                        sensitivity="personal")
        Knowledge.objects.filter(pk=promoted).update(level="scope")  # promoted: agreed to
        about_scope = _add(w, "The social channel keeps a restricted escalation list.",
                           subject=None, sensitivity="restricted")
    loaded = _build(w, _keys(w, peer="bob"))
    cards = _entry_ids(loaded, Kind.SCOPE_CARD)
    assert {ids["support"], ids["hiking"], ids["public"], ids["team"], ids["bob_hike"],
            promoted, about_scope} <= cards
    # a personal peer-level statement and another subject's provisional row never do
    assert ids["asthma"] not in cards and ids["bob_prov"] not in cards
    assert ids["paid"] not in cards  # a sibling scope is not on the chain
    # bob's own profile is subject-keyed: it holds his provisional row
    assert _entry_ids(loaded, Kind.PEER_PROFILE) == {ids["bob_prov"], ids["bob_hike"]}


def test_public_audience_holds_public_statements_only(corpus):  # noqa: F811
    w, ids = corpus
    loaded = _build(w, _keys(w, audience=Audience.PUBLIC))
    assert _entry_ids(loaded, Kind.SCOPE_CARD) == {ids["public"]}


def test_lifecycle_hook_marks_dirty_in_the_transaction_and_rebuilds_after_commit(
        corpus, monkeypatch):  # noqa: F811
    w, ids = corpus
    keys = _keys(w, peer="alice")
    _build(w, keys)
    queued: list[list[str]] = []
    monkeypatch.setattr(projections, "enqueue_rebuild",
                        lambda account_id, pids: queued.append([str(i) for i in pids]))
    with account_context(w.account.id):
        card = Projection.objects.get(kind=Kind.SCOPE_CARD, scope=w.scope)
        profile = Projection.objects.get(kind=Kind.PEER_PROFILE, scope=w.scope,
                                         peer=w.subject)
        untouched = Projection.objects.get(kind=Kind.SCOPE_CARD, scope=w.root)
        before = {p.pk: p.version for p in (card, profile, untouched)}
        transition(Knowledge.objects.get(pk=ids["hiking"]), "redacted", actor="system:test",
                   reason="f4_subject_redacted")
        # inside the same transaction: already dirty, version bumped, nothing queued yet
        card.refresh_from_db()
        profile.refresh_from_db()
        assert card.dirty and card.version == before[card.pk] + 1
        assert profile.dirty and profile.version == before[profile.pk] + 1
        assert queued == []
    assert sorted(queued[0]) == sorted([str(card.pk), str(profile.pk)])
    with account_context(w.account.id):
        untouched.refresh_from_db()
        assert not untouched.dirty and untouched.version == before[untouched.pk]
        # a dirty projection is never served
        loaded = projections.load(w.account.id, keys)
    assert not loaded.complete and ids["hiking"] not in _entry_ids(loaded, Kind.SCOPE_CARD)
    projections.rebuild_many(w.account.id, queued[0])
    with account_context(w.account.id):
        loaded = projections.load(w.account.id, keys)
    assert loaded.complete and ids["hiking"] not in _entry_ids(loaded, Kind.SCOPE_CARD)


def test_a_new_statement_dirties_only_the_projections_it_belongs_in(corpus):  # noqa: F811
    w, _ = corpus
    _build(w, _keys(w, peer="alice") + _keys(w, peer="bob"))
    with account_context(w.account.id):
        versions = dict(Projection.objects.values_list("pk", "version"))
        new_id = _add(w, "Alice mentors two junior designers.")  # rebuilt on commit
    with account_context(w.account.id):
        changed = {p.pk: (p.kind, p.peer_id) for p in Projection.objects.all()
                   if p.version != versions[p.pk]}
        card = Projection.objects.get(kind=Kind.SCOPE_CARD, audience=Audience.SHARED,
                                      scope=w.scope)
        assert not card.dirty and new_id in [str(i) for i in card.source_ids]
    # alice's profile and the shared + public cards of her scope; never bob's profile
    assert set(changed.values()) <= {(Kind.SCOPE_CARD, None), (Kind.PEER_PROFILE, w.subject.id)}
    assert (Kind.PEER_PROFILE, w.subject.id) in changed.values()


def test_rebuild_replaces_the_payload_within_a_bounded_size(corpus, monkeypatch):  # noqa: F811
    w, _ = corpus
    monkeypatch.setattr(projections, "MAX_ENTRIES", 5)
    key = Key(Kind.SCOPE_CARD, Audience.SHARED, w.scope.id)
    with account_context(w.account.id):
        for n in range(4):
            _add(w, f"The social team publishes recap number {n}.", subject=None)
    loaded = _build(w, [key])
    payload = loaded.payloads[key]
    assert len(payload["entries"]) == 5 and payload["truncated"]
    assert payload["total"] == 9  # 5 shareable corpus rows at this scope + 4
    with account_context(w.account.id):
        p = Projection.objects.get(kind=Kind.SCOPE_CARD, audience="shared", scope=w.scope)
        assert [str(i) for i in p.source_ids] == [e["id"] for e in payload["entries"]]
        # The id pool links every statement it is built from, not only the 5 shown.
        assert ProjectionSource.objects.filter(projection=p).count() == 9
        assert p.payload["pool"] == 9
        first = p.payload["delta"]
        assert first == {"added": 9, "removed": 0}
    projections.rebuild(w.account.id, p.pk)  # no change: replaced, not appended to
    with account_context(w.account.id):
        p.refresh_from_db()
        assert len(p.payload["entries"]) == 5 and p.payload["delta"] == {"added": 0,
                                                                         "removed": 0}
        assert ProjectionSource.objects.filter(projection=p).count() == 9
    monkeypatch.setattr(projections, "POOL_MAX", 7)  # the pool is bounded too
    projections.rebuild(w.account.id, p.pk)
    with account_context(w.account.id):
        assert ProjectionSource.objects.filter(projection=p).count() == 7


def test_session_summary_keeps_the_newest_statements(corpus, monkeypatch):  # noqa: F811
    w, _ids = corpus
    monkeypatch.setattr(projections, "MAX_ENTRIES", 2)
    with account_context(w.account.id):
        session = Session.objects.create(account=w.account, scope=w.scope, external_id="s-9")
        added = []
        for n in range(4):
            msg = Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                         session=session, text=f"Step {n} of the launch.",
                                         occurred_at=datetime.now(UTC))
            added.append(_add(w, f"The team finished launch step {n}.", subject=None,
                              sources=[{"message": msg, "excerpt": f"Step {n}"}]))
    key = Key(Kind.SESSION_SUMMARY, Audience.SHARED, w.scope.id, session_id=session.id)
    payload = _build(w, [key]).payloads[key]
    assert [e["id"] for e in payload["entries"]] == [added[3], added[2]]  # newest first
    assert payload["total"] == 4 and payload["truncated"] and payload["pool"] == 4


def test_version_counter_invalidates_other_processes_local_copies(corpus):  # noqa: F811
    w, _ids = corpus
    key = Key(Kind.SCOPE_CARD, Audience.SHARED, w.scope.id)
    _build(w, [key])
    with account_context(w.account.id):
        again = projections.load(w.account.id, [key])
    assert again.local_hits == 1 and again.loaded == 0
    # another process rebuilds: it bumps the version in the database ...
    with account_context(w.account.id):
        pid = Projection.objects.get(kind=Kind.SCOPE_CARD, audience="shared", scope=w.scope).pk
        Projection.objects.filter(pk=pid).update(payload={"entries": [], "marker": True},
                                                 version=again.versions[key] + 1)
    # ... so this process's copy no longer matches and is reloaded
    with account_context(w.account.id):
        after = projections.load(w.account.id, [key])
    assert after.local_hits == 0 and after.loaded == 1
    assert after.payloads[key].get("marker") is True


def test_expiry_before_the_sweeper_makes_a_projection_stale(corpus):  # noqa: F811
    w, ids = corpus
    key = Key(Kind.SCOPE_CARD, Audience.SHARED, w.scope.id)
    _build(w, [key])
    with account_context(w.account.id):
        # No transition (the sweeper has not run), so no hook fired.
        Knowledge.objects.filter(pk=ids["hiking"]).update(
            expires_at=datetime.now(UTC) - timedelta(seconds=1))
    with account_context(w.account.id):
        loaded = projections.load(w.account.id, [key])
    assert loaded.stale == [key] and key not in loaded.payloads
    with account_context(w.account.id):
        loaded = projections.load(w.account.id, [key])
    assert loaded.complete and ids["hiking"] not in _entry_ids(loaded, Kind.SCOPE_CARD)


def test_hard_deleting_a_statement_deletes_its_projections_in_the_same_transaction(
        corpus):  # noqa: F811
    w, ids = corpus
    keys = _keys(w, peer="alice")
    _build(w, keys)
    with account_context(w.account.id):
        holding = set(ProjectionSource.objects.filter(knowledge_id=ids["hiking"])
                      .values_list("projection_id", flat=True))
        assert holding
        Knowledge.objects.filter(pk=ids["hiking"]).delete()
        assert not Projection.objects.filter(pk__in=holding).exists()
        assert Projection.objects.exists()  # the others stay
    with account_context(w.account.id):
        text = str(list(Projection.objects.values_list("payload", flat=True)))
    assert "hiking in the mountains" not in text


def test_erasing_a_peer_removes_its_profile(corpus):  # noqa: F811
    w, _ = corpus
    from governance.erasure import peer_erase

    _build(w, _keys(w, peer="bob"))
    with account_context(w.account.id):
        admin = services.peer_create(account_id=w.account.id, key="root-admin", kind="human",
                                     display_name="Admin", password="admin-pass-123",
                                     is_admin=True)
        peer_erase(actor=admin, peer_key="bob")
    with account_context(w.account.id):
        text = str(list(Projection.objects.values_list("payload", flat=True)))
        assert not Projection.objects.filter(kind=Kind.PEER_PROFILE).exists()
    assert "Oslo" not in text and "Bob enjoys hiking" not in text


def test_session_summary_holds_shareable_statements_from_the_session(corpus):  # noqa: F811
    w, _ids = corpus
    with account_context(w.account.id):
        session = Session.objects.create(account=w.account, scope=w.scope, external_id="s-1")
        msg = Message.objects.create(account=w.account, peer=w.subject, scope=w.scope,
                                     session=session, text="We agreed on a new logo today.",
                                     occurred_at=datetime.now(UTC))
        in_session = _add(w, "The team agreed on a new logo.", subject=None,
                          sources=[{"message": msg, "excerpt": "agreed on a new logo"}])
        personal = _add(w, "Alice felt anxious in the logo meeting.", sensitivity="personal",
                        sources=[{"message": msg, "excerpt": "anxious"}])
    key = Key(Kind.SESSION_SUMMARY, Audience.SHARED, w.scope.id, session_id=session.id)
    loaded = _build(w, [key])
    assert _entry_ids(loaded, Kind.SESSION_SUMMARY) == {in_session}
    assert personal not in str(loaded.payloads)
    with account_context(w.account.id):
        transition(Knowledge.objects.get(pk=in_session), "redacted", actor="system:test",
                   reason="f4_subject_redacted")
    with account_context(w.account.id):
        loaded = projections.load(w.account.id, [key])
    assert loaded.complete and _entry_ids(loaded, Kind.SESSION_SUMMARY) == set()


def test_projection_tables_are_under_tenant_rls(corpus):  # noqa: F811
    w, _ = corpus
    _build(w, [Key(Kind.SCOPE_CARD, Audience.SHARED, w.scope.id)])
    with account_context(w.other_account.id):
        assert Projection.objects.count() == 0 and ProjectionSource.objects.count() == 0
    with connection.cursor() as cur:
        cur.execute("SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE relname IN "
                    "('memhouse_projection', 'memhouse_projection_source')")
        assert cur.fetchall() == [(True, True), (True, True)]


def test_a_rebuild_racing_a_state_change_cannot_leave_a_stale_clean_payload(
        corpus):  # noqa: F811
    w, ids = corpus
    key = Key(Kind.SCOPE_CARD, Audience.SHARED, w.scope.id)
    _build(w, [key])
    errors: list[BaseException] = []

    def redact() -> None:
        try:
            with account_context(w.account.id):
                transition(Knowledge.objects.get(pk=ids["hiking"]), "redacted",
                           actor="system:test", reason="f4_subject_redacted")
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    with account_context(w.account.id):
        # A rebuild in progress: it holds the row lock and has read the old statements.
        p = Projection.objects.select_for_update().get(kind=Kind.SCOPE_CARD,
                                                       audience="shared", scope=w.scope)
        old = [projections.entry(k) for k in projections.statements_for(p)
               .select_related("scope", "subject_peer")]
        assert ids["hiking"] in {e["id"] for e in old}
        change = threading.Thread(target=redact)
        change.start()
        time.sleep(0.5)
        assert change.is_alive()  # the state change waits for the projection lock
        Projection.objects.filter(pk=p.pk).update(payload={"entries": old}, dirty=False,
                                                  version=F("version") + 1)
    change.join(20)
    assert not change.is_alive() and not errors
    with account_context(w.account.id):
        loaded = projections.load(w.account.id, [key])
    # the dirty mark landed after the stale write, and its rebuild ran on commit
    assert loaded.complete and ids["hiking"] not in _entry_ids(loaded, Kind.SCOPE_CARD)
