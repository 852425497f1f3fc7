"""Writes to the memory model. Each service is one transaction and takes keyword args."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import slugify

from knowledge import audit, lifecycle
from knowledge.credentials import KEY_MARK, hash_secret
from knowledge.lifecycle import transition
from knowledge.models import Account, Credential, Knowledge, KnowledgeSource, Peer, Scope
from memhouse.core.errors import ApplicationError
from memhouse.core.principal import ancestor_paths
from memhouse.core.tenancy import set_account

SYSTEM = "system:memhouse"


def normalise_scope_path(path: str) -> str:
    """'/marketing/social/' -> '/marketing/social'; raises on malformed paths."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ApplicationError("invalid_scope_path", "scope paths start with '/'")
    parts = [p for p in path.split("/") if p]
    for p in parts:
        if p in {".", ".."} or len(p) > 100 or not all(c.isalnum() or c in "-_." for c in p):
            raise ApplicationError(
                "invalid_scope_path",
                "scope path segments use letters, digits, '-', '_' or '.'",
            )
    return "/" + "/".join(parts) if parts else "/"


@transaction.atomic
def account_create(*, name: str, slug: str | None = None) -> Account:
    """Create an Account with its root scope '/'. Binds this transaction to it."""
    account_id = uuid.uuid4()
    set_account(account_id)
    account = Account.objects.create(id=account_id, name=name, slug=slugify(slug or name))
    Scope.objects.create(account=account, path="/", name="root")
    audit.append(account_id=account.id, event_type="account.created", actor=SYSTEM,
                 target_type="account", target_id=str(account.id), payload={"slug": account.slug})
    return account


@transaction.atomic
def scope_ensure(*, account_id: uuid.UUID, path: str) -> Scope:
    """Get or create the scope at `path`, creating missing ancestors on the way down."""
    path = normalise_scope_path(path)
    chain = list(reversed(ancestor_paths(path)))  # '/', '/a', '/a/b'
    existing = {s.path: s for s in Scope.objects.filter(account_id=account_id, path__in=chain)}
    parent: Scope | None = None
    for p in chain:
        scope = existing.get(p)
        if scope is None:
            scope = Scope.objects.create(account_id=account_id, path=p, parent=parent,
                                         name=p.rsplit("/", 1)[-1])
            audit.append(account_id=account_id, event_type="scope.created", actor=SYSTEM,
                         target_type="scope", target_id=str(scope.pk), payload={"path": p})
        parent = scope
    assert parent is not None
    return parent


@transaction.atomic
def scope_setting_write(*, scope: Scope, key: str, value: Any) -> Scope:
    """The one writer of `Scope.settings`: set `key` (or with None clear it) under the
    row's lock, so two writers of different keys never lose each other's change. Callers
    authorise, validate and audit (e.g. governance.services.scope_belief_time_set);
    reads inherit nearest-wins (knowledge.selectors.scope_setting)."""
    locked = Scope.objects.select_for_update().get(pk=scope.pk)
    settings = dict(locked.settings or {})
    if value is None:
        settings.pop(key, None)
    else:
        settings[key] = value
    Scope.objects.filter(pk=locked.pk).update(settings=settings)
    locked.settings = settings
    return locked


@transaction.atomic
def peer_create(*, account_id: uuid.UUID, key: str, kind: str, display_name: str = "",
                password: str | None = None, username: str | None = None,
                is_curator: bool = False, is_admin: bool = False,
                aliases: list[str] | None = None) -> Peer:
    """A peer; a human gets a linked Django user when a password is given."""
    if kind not in Peer.Kind.values:
        raise ApplicationError("invalid_peer_kind", "peer kind is 'human' or 'agent'")
    if not key or len(key) > 200:
        raise ApplicationError("invalid_peer_key", "peer_key must be 1-200 characters")
    if Peer.objects.filter(account_id=account_id, key=key).exists():
        raise ApplicationError("peer_exists", f"peer {key!r} already exists", status_code=409)
    user = None
    if password is not None:
        if kind != Peer.Kind.HUMAN:
            raise ApplicationError("agents_cannot_sign_in", "only humans have passwords")
        user = get_user_model().objects.create_user(username=username or key, password=password)
    peer = Peer.objects.create(account_id=account_id, key=key, kind=kind,
                               display_name=display_name or key, user=user,
                               is_curator=is_curator, is_admin=is_admin, aliases=aliases or [])
    audit.append(account_id=account_id, event_type="peer.created", actor=SYSTEM,
                 target_type="peer", target_id=str(peer.pk),
                 payload={"key": key, "kind": kind, "curator": is_curator})
    peer_registered(peer)
    return peer


# Called with a peer in the transaction that created or renamed it. Governance registers
# the hook that links held claims naming that person to them (knowledge cannot import it).
_peer_hooks: list[Callable[[Peer], Any]] = []


def register_peer_hook(hook: Callable[[Peer], Any]) -> None:
    if hook not in _peer_hooks:
        _peer_hooks.append(hook)


def peer_registered(peer: Peer) -> None:
    """Run the registration hooks for a new or renamed peer (inside its transaction)."""
    for hook in _peer_hooks:
        hook(peer)


def _new_key() -> tuple[str, str]:
    prefix = secrets.token_hex(6)
    return prefix, f"{KEY_MARK}_{prefix}_{secrets.token_urlsafe(32)}"


@transaction.atomic
def credential_create(*, account_id: uuid.UUID, peer: Peer | None, name: str = "",
                      scope_paths: list[str] | None = None, kind: str = Credential.Kind.API_KEY,
                      expires_at: datetime | None = None, actor: str = SYSTEM,
                      act_for_all: bool = False, act_for: list[str] | None = None
                      ) -> tuple[Credential, str]:
    """Mint a credential; the plaintext key is returned once and never stored.

    `act_for_all` / `act_for` is the act-for grant of a machine credential (an agent's or
    a peerless key): which peers it may name with `peer_key`. A human's credential gets
    none (400 `act_for_human`): a human acts only as themself."""
    paths = [normalise_scope_path(p) for p in (scope_paths or ["/"])]
    keys = sorted({str(k).strip() for k in (act_for or []) if str(k).strip()})
    if (act_for_all or keys) and peer is not None and peer.kind == Peer.Kind.HUMAN:
        raise ApplicationError("act_for_human", "a human's credential cannot act for others")
    unknown = set(keys) - set(Peer.objects.filter(account_id=account_id, key__in=keys)
                              .values_list("key", flat=True))
    if unknown:
        raise ApplicationError("unknown_peer_key", f"no peers with keys {sorted(unknown)}; "
                               "create them first with POST /api/v1/peers")
    prefix, key = _new_key()
    cred = Credential.objects.create(account_id=account_id, peer=peer, name=name, kind=kind,
                                     prefix=prefix, secret_hash=hash_secret(key),
                                     scope_paths=paths, expires_at=expires_at,
                                     act_for_all=act_for_all, act_for=[] if act_for_all else keys)
    audit.append(account_id=account_id, event_type="credential.created", actor=actor,
                 target_type="credential", target_id=str(cred.pk),
                 payload={"prefix": prefix, "kind": kind,
                          "peer": peer.key if peer else None, "scopes": paths,
                          "act_for": "all" if act_for_all else keys})
    return cred, key


@transaction.atomic
def token_issue(*, peer: Peer) -> tuple[Credential, str]:
    """A short-lived API token for a signed-in human."""
    if peer.kind != Peer.Kind.HUMAN:
        raise ApplicationError("agents_cannot_sign_in", "only humans get login tokens",
                               status_code=403)
    ttl = timedelta(seconds=settings.API_TOKEN_TTL_SECONDS)
    return credential_create(account_id=peer.account_id, peer=peer, name="login token",
                             kind=Credential.Kind.TOKEN, expires_at=timezone.now() + ttl,
                             actor=f"peer:{peer.key}")


@transaction.atomic
def credential_revoke(*, credential: Credential, actor: str) -> Credential:
    if credential.revoked_at is None:
        credential.revoked_at = timezone.now()
        credential.save(update_fields=["revoked_at"])
        audit.append(account_id=credential.account_id, event_type="credential.revoked",
                     actor=actor, target_type="credential", target_id=str(credential.pk),
                     payload={"prefix": credential.prefix})
    return credential


@transaction.atomic
def tokens_revoke(*, peer: Peer, only: uuid.UUID | None = None) -> int:
    """Revoke a human's own login tokens (all of them, or the one `only` names): what the
    owner asks for, and what signing out of the console does."""
    qs = Credential.objects.filter(account_id=peer.account_id, peer=peer,
                                   kind=Credential.Kind.TOKEN, revoked_at__isnull=True)
    if only is not None:
        qs = qs.filter(pk=only)
    revoked = 0
    for credential in qs:
        credential_revoke(credential=credential, actor=f"peer:{peer.key}")
        revoked += 1
    return revoked


@transaction.atomic
def knowledge_propose(*, account_id: uuid.UUID, statement: str, scope: Scope,
                      subject_peer: Peer | None, actor: lifecycle.ActorLike,
                      kind: str = Knowledge.Kind.FACT,
                      level: str = Knowledge.Level.PEER, confidence: float = 0.5,
                      sensitivity: str = Knowledge.Sensitivity.INTERNAL,
                      relevant_from: datetime | None = None,
                      relevant_until: datetime | None = None,
                      revalidate_after: datetime | None = None,
                      expires_at: datetime | None = None, proposed_by: Peer | None = None,
                      extractor: str = "", sources: list[dict[str, Any]] | None = None,
                      state: str = lifecycle.INITIAL_STATE,
                      prompt_identity: str = "", named_entity: str = "") -> Knowledge:
    """Create one proposed statement with its provenance. Any other start state is refused."""
    if state != lifecycle.INITIAL_STATE:
        raise lifecycle.TransitionError(f"knowledge starts as {lifecycle.INITIAL_STATE}")
    statement = statement.strip()
    if not statement:
        raise ApplicationError("empty_statement", "a statement needs text")
    item = Knowledge.objects.create(
        account_id=account_id, statement=statement, scope=scope, subject_peer=subject_peer,
        kind=kind, level=level, confidence=confidence, sensitivity=sensitivity,
        relevant_from=relevant_from, relevant_until=relevant_until,
        revalidate_after=revalidate_after, expires_at=expires_at, proposed_by=proposed_by,
        extractor=extractor, prompt_identity=prompt_identity, named_entity=named_entity,
    )
    for src in sources or []:
        KnowledgeSource.objects.create(account_id=account_id, knowledge=item, **src)
    if sources:
        item.source_count = independent_source_count(item)
        Knowledge.objects.filter(pk=item.pk).update(source_count=item.source_count)
    lifecycle.record_creation(item, actor=actor)
    return item


def knowledge_propose_many(*, account_id: uuid.UUID, proposals: list[dict[str, Any]],
                           actor: lifecycle.ActorLike) -> list[Knowledge]:
    """knowledge_propose for many statements of one Account, in order, with set-based
    writes: one insert of the rows, one of their sources, one lifecycle record (an event
    and an audit entry per row). Each proposal holds knowledge_propose's keyword
    arguments but account_id and actor; a source names a `message` or a
    `document_version` object."""
    items: list[Knowledge] = []
    sources: list[KnowledgeSource] = []
    last = None
    for proposal in proposals:
        fields = dict(proposal)
        srcs = fields.pop("sources", None) or []
        if fields.pop("state", lifecycle.INITIAL_STATE) != lifecycle.INITIAL_STATE:
            raise lifecycle.TransitionError(f"knowledge starts as {lifecycle.INITIAL_STATE}")
        fields["statement"] = fields["statement"].strip()
        if not fields["statement"]:
            raise ApplicationError("empty_statement", "a statement needs text")
        # Strictly increasing, as row-by-row inserts would be: readers order by it.
        now = timezone.now()
        inserted = now if last is None or now > last else last + timedelta(microseconds=1)
        last = inserted
        item = Knowledge(account_id=account_id, inserted_at=inserted, updated_at=inserted,
                         **fields)
        # What independent_source_count would read back: distinct speakers + documents.
        item.source_count = len({("m", src["message"].peer_id) if src.get("message")
                                 else ("d", src["document_version"].document_id)
                                 for src in srcs})
        items.append(item)
        sources.extend(KnowledgeSource(account_id=account_id, knowledge=item, **src)
                       for src in srcs)
    Knowledge.objects.bulk_create(items)
    KnowledgeSource.objects.bulk_create(sources)
    lifecycle.record_creation_many(items, actor=actor)
    return items


def independent_source_count(item: Knowledge) -> int:
    """Distinct speaking peers plus distinct documents: repeats by one source count once."""
    rows = KnowledgeSource.objects.filter(knowledge=item).values_list(
        "message__peer_id", "document_version__document_id")
    return len({("m", m) if m else ("d", d) for m, d in rows})


def knowledge_merge_sources(*, source: Knowledge, into: Knowledge) -> int:
    """Copy `source`'s provenance onto `into` (a duplicate or consolidated row) and
    refresh its independent-source count; returns the new count. Runs in the caller's
    transaction."""
    for src in KnowledgeSource.objects.filter(knowledge=source):
        origin = ({"message_id": src.message_id} if src.message_id
                  else {"document_version_id": src.document_version_id})
        KnowledgeSource.objects.get_or_create(account_id=into.account_id, knowledge=into,
                                              **origin, defaults={"excerpt": src.excerpt})
    count = independent_source_count(into)
    Knowledge.objects.filter(pk=into.pk).update(source_count=count)
    return count


def retract_unsupported(*, account_id: uuid.UUID, reason: str, actor: str,
                        version_ids: list[Any] | None = None,
                        message_ids: list[Any] | None = None) -> int:
    """Retract knowledge whose last live source was among the removed ones."""
    touched = Knowledge.objects.filter(account_id=account_id).filter(
        Q(sources__document_version_id__in=version_ids or [])
        | Q(sources__message_id__in=message_ids or [])).distinct()
    retracted = 0
    for item in touched:
        live = KnowledgeSource.objects.filter(knowledge=item).filter(
            Q(message__isnull=False) & ~Q(message_id__in=message_ids or [])
            | Q(document_version__tombstoned_at__isnull=True, document_version__isnull=False)
            & ~Q(document_version_id__in=version_ids or []))
        if live.exists() or item.state == lifecycle.RETRACTED:
            continue
        transition(item, lifecycle.RETRACTED, actor=actor, reason=reason,
                   verification=Knowledge.Verification.SOURCE_REMOVED)
        retracted += 1
    return retracted


# --- audit chain verification ------------------------------------------------------------

def audit_chain_verify(*, account_id: Any, trigger: str,
                       expected_head: tuple[int, str] | None = None) -> Any:
    """Recompute the Account's audit chain and record the outcome.

    The audit page reads the newest record (console) rather than re-hashing the chain on
    every view; this service is what the schedule, the console's "Verify now" and
    `manage.py verify_audit` call."""
    from knowledge.models import AuditVerification

    result = audit.verify(account_id, expected_head=expected_head)
    with transaction.atomic():
        return AuditVerification.objects.create(
            account_id=account_id, trigger=trigger, ok=result.ok, entries=result.entries,
            head_seq=result.head_seq, head_hash=result.head_hash,
            broken_seq=result.broken_seq, problem=result.problem[:200])
