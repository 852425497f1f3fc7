"""Thin DRF views for accounts, peers and credentials."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import authenticate
from django.db import transaction
from django.utils.decorators import method_decorator
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from knowledge import people, scope_relations, services, usage
from knowledge.credentials import principal_for_user
from knowledge.selectors import DOCUMENTS_DEFAULT_LIMIT, DOCUMENTS_MAX_LIMIT
from memhouse.core.errors import ApplicationError, error_response
from memhouse.core.fields import AwareDateTimeField, is_naive
from memhouse.core.permissions import IsHuman, IsHumanAdmin
from memhouse.core.principal import principal_of


def _sign_in_check(request: Request, username: str, password: str
                   ) -> tuple[Any, Response | None]:
    """Check a password through Django's backends, so django-axes counts a failure and
    refuses a locked username and address pair: (user, None), (None, None) for a wrong
    password, or (None, the 429 answer). Callers return (not raise) their refusal, so the
    request's transaction commits the failure axes recorded."""
    from axes.exceptions import AxesBackendPermissionDenied
    from django.conf import settings as conf

    try:
        user = authenticate(request._request, username=username, password=password)
    except AxesBackendPermissionDenied:
        user = None
    if getattr(request._request, "axes_locked_out", False):
        # Returned too, so the failure that reached the limit is kept.
        wait = conf.AXES_COOLOFF_MINUTES * 60
        return None, error_response("rate_limited", "too many failed sign-ins for this "
                                    f"username from this address; try again in {wait} "
                                    "seconds", 429, headers={"Retry-After": str(wait)})
    return user, None


class AuthTokenApi(APIView):
    """POST {username, password} -> a short-lived API token for a human peer."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]

    class InputSerializer(serializers.Serializer):
        username = serializers.CharField(max_length=150)
        password = serializers.CharField(max_length=200, trim_whitespace=False)

    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user, locked = _sign_in_check(request, data.validated_data["username"],
                                      data.validated_data["password"])
        if locked is not None:
            return locked
        principal = principal_for_user(user) if user is not None else None
        if principal is None:
            # Returned, not raised: the request's transaction commits, and with it the
            # failed attempt django-axes recorded (a rollback would forget it).
            return error_response("invalid_login", "unknown username or wrong password", 401)
        cred, key = services.token_issue(peer=principal.peer)
        return Response({"token": key, "prefix": cred.prefix,
                         "expires_at": cred.expires_at, "peer_key": principal.peer.key},
                        status=201)


class AuthTokenRevokeApi(APIView):
    """POST {"all": false}: revoke the login token this request is made with, or with
    {"all": true} every login token of the signed-in human."""

    permission_classes = [IsHuman]  # agent keys: 403 human_only (an admin revokes those)

    class InputSerializer(serializers.Serializer):
        all = serializers.BooleanField(required=False, default=False)

    def post(self, request: Request) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        if not data.validated_data["all"] and p.via != "token":
            raise ApplicationError("not_a_token", "this request is not made with a login "
                                   "token; send {\"all\": true} to revoke all of yours")
        only = None if data.validated_data["all"] else p.credential_id
        revoked = services.tokens_revoke(peer=p.peer, only=only)
        return Response({"revoked": revoked})


class WhoAmIApi(APIView):
    def get(self, request: Request) -> Response:
        p = principal_of(request)
        return Response({
            "peer_key": p.peer.key if p.peer else None,
            "peer_kind": p.peer.kind if p.peer else None,
            "via": p.via,
            "scopes": list(p.scope_paths),
            "curator": p.is_curator,
            "admin": p.is_admin,
            # Whom this credential may name with peer_key (besides itself).
            "act_for": ("all" if p.act_for_all else list(p.act_for)) if p.is_machine else [],
        })


# --- People (administrators) and one's own password -----------------------------------

def _invitation_out(request: Request, cred: Any, token: str) -> dict[str, Any]:
    # The token appears in this answer once; the console link is its only other use.
    return {"token": token, "url": people.invitation_url(request.build_absolute_uri("/"), token),
            "expires_at": cred.expires_at}


class _PersonInput(serializers.Serializer):
    role = serializers.ChoiceField(choices=list(people.ROLES), required=False)
    scopes = serializers.ListField(child=serializers.CharField(max_length=500),
                                   required=False, max_length=people.MAX_SCOPES)
    display_name = serializers.CharField(max_length=200, required=False, allow_blank=True)


class PeopleApi(APIView):
    """GET: the Account's people. POST {key, display_name, role, scopes, username,
    invite}: add a person; with invite (default) the answer carries a one-time link."""

    permission_classes = [IsHumanAdmin]

    class InputSerializer(_PersonInput):
        key = serializers.CharField(max_length=200)
        # No default: which scopes a new person may use is the administrator's choice
        # ('/' is the whole Account), never an implicit one.
        scopes = serializers.ListField(
            child=serializers.CharField(max_length=500), max_length=people.MAX_SCOPES,
            error_messages={"required": "name the scopes this person may use ('/' is the "
                                        "whole Account)"})
        username = serializers.CharField(max_length=150, required=False)
        invite = serializers.BooleanField(required=False, default=True)

    @extend_schema(summary="The Account's people (administrators)")
    def get(self, request: Request) -> Response:
        rows = people.people_list(principal=principal_of(request))
        return Response({"people": [r.as_dict() for r in rows]})

    @extend_schema(summary="Add a person with a role and scopes; with invite, a one-time link")
    def post(self, request: Request) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        actor = f"peer:{p.peer.key}"
        peer = people.person_create(account_id=p.account_id, key=v["key"], actor=actor,
                                    display_name=v.get("display_name", ""),
                                    role=v.get("role", "member"),
                                    scope_paths=v["scopes"],
                                    username=v.get("username"),
                                    granter_scopes=p.scope_paths)
        out: dict[str, Any] = {"person": people.person_row(principal=p, person_id=peer.pk)
                               .as_dict()}
        if v["invite"]:
            cred, token = people.invitation_create(peer=peer, actor=actor)
            out["invitation"] = _invitation_out(request, cred, token)
        return Response(out, status=201)


class PersonApi(APIView):
    """GET one person; PATCH {role, scopes, display_name, active}. Deactivating
    ({"active": false}) revokes their tokens, keys and console sessions at once."""

    permission_classes = [IsHumanAdmin]

    class InputSerializer(_PersonInput):
        active = serializers.BooleanField(required=False)

    @extend_schema(operation_id="v1_person_retrieve", summary="One person of the Account")
    def get(self, request: Request, person_id: uuid.UUID) -> Response:
        return Response(people.person_row(principal=principal_of(request),
                                           person_id=person_id).as_dict())

    @extend_schema(operation_id="v1_person_partial_update",
                   summary="Change a person's role, scopes, name or active state")
    def patch(self, request: Request, person_id: uuid.UUID) -> Response:
        p = principal_of(request)
        peer = people.person_get(principal=p, person_id=person_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        people.person_update(peer=peer, actor=f"peer:{p.peer.key}", role=v.get("role"),
                             scope_paths=v.get("scopes"), active=v.get("active"),
                             display_name=v.get("display_name"),
                             granter_scopes=p.scope_paths)
        return Response(people.person_row(principal=p, person_id=person_id).as_dict())


class PersonInvitationApi(APIView):
    """POST {reset}: a new one-time invitation link for this person (earlier ones stop
    working). For someone who already has a password, 409 `has_password` unless
    {"reset": true}: their password is made unusable, every token and key of theirs
    revoked and their console sessions ended, recorded as the administrator's reset."""

    permission_classes = [IsHumanAdmin]

    class InputSerializer(serializers.Serializer):
        reset = serializers.BooleanField(required=False, default=False)

    @extend_schema(operation_id="v1_person_invitation_create",
                   summary="A new one-time invitation link (earlier ones stop working); "
                           "reset: true for someone who has a password")
    def post(self, request: Request, person_id: uuid.UUID) -> Response:
        p = principal_of(request)
        peer = people.person_get(principal=p, person_id=person_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cred, token = people.invitation_create(peer=peer, actor=f"peer:{p.peer.key}",
                                               reset=data.validated_data["reset"],
                                               granter_scopes=p.scope_paths)
        return Response(_invitation_out(request, cred, token), status=201)


class MyPasswordApi(APIView):
    """POST {current_password, new_password}: change one's own password. The current
    password is checked like a sign-in, under the same lockout (429 `rate_limited`)."""

    permission_classes = [IsHuman]  # agent keys: 403 human_only

    class InputSerializer(serializers.Serializer):
        current_password = serializers.CharField(max_length=200, trim_whitespace=False)
        new_password = serializers.CharField(max_length=200, trim_whitespace=False)

    def post(self, request: Request) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        current = data.validated_data["current_password"]
        username = people.username_of(p.peer)
        user, locked = _sign_in_check(request, username or "", current)
        if locked is not None:
            return locked
        if user is None or user.pk != p.peer.user_id:
            return error_response("wrong_password", "the current password is not right",
                                  403, details={"field": "current_password"})
        people.password_change(peer=p.peer, current=current,
                               new=data.validated_data["new_password"])
        return Response({"changed": True})


# --- Scopes and peers ------------------------------------------------------------------

class ScopesApi(APIView):
    """GET: scopes this credential may see. POST {path}: create it (and its ancestors)."""

    class InputSerializer(serializers.Serializer):
        path = serializers.CharField(max_length=500)

    def get(self, request: Request) -> Response:
        from knowledge.models import Scope

        p = principal_of(request)
        rows = [s for s in Scope.objects.filter(account_id=p.account_id).order_by("path")
                .values("id", "path", "name") if p.may_access_scope(s["path"])]
        return Response({"scopes": rows})

    def post(self, request: Request) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        path = services.normalise_scope_path(data.validated_data["path"])
        if not p.may_access_scope(path):
            raise ApplicationError("scope_forbidden", "this credential may not write there",
                                   status_code=403)
        scope = services.scope_ensure(account_id=p.account_id, path=path)
        return Response({"id": scope.id, "path": scope.path}, status=201)


class ScopeRelationsApi(APIView):
    """GET: the Account's scope relations. POST {source, target}: link two existing scopes,
    so relation expansion may cross between them for readers authorised for both
    (account administrators; a link never grants access)."""

    permission_classes = [IsHumanAdmin]

    class InputSerializer(serializers.Serializer):
        # DRF's metaclass pops declared fields, so this does not shadow Field.source.
        source = serializers.CharField(max_length=500)  # type: ignore[assignment]
        target = serializers.CharField(max_length=500)

    def get(self, request: Request) -> Response:
        rows = scope_relations.relations_list(principal=principal_of(request))
        return Response({"relations": [scope_relations.relation_out(r) for r in rows]})

    def post(self, request: Request) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rel = scope_relations.relation_create(principal=p, **data.validated_data)
        return Response(scope_relations.relation_out(rel), status=201)


class ScopeRelationApi(APIView):
    """DELETE: remove a scope relation (account administrators)."""

    permission_classes = [IsHumanAdmin]

    @extend_schema(operation_id="v1_scope_relation_destroy",
                   summary="Remove a scope relation (administrators)")
    def delete(self, request: Request, relation_id: uuid.UUID) -> Response:
        scope_relations.relation_delete(principal=principal_of(request),
                                        relation_id=relation_id)
        return Response({"id": str(relation_id), "deleted": True})


class PeersApi(APIView):
    """POST {key, kind, display_name, aliases}: register a participant (no password). A
    human peer is a person: only an Account administrator registers one here (or adds a
    person through /api/v1/people), and a machine key whose act-for grant covers every
    peer (it may already speak as anyone); anyone else is 403 `people_admin_only`, so
    nobody squats a person's key before an administrator creates that person."""

    class InputSerializer(serializers.Serializer):
        key = serializers.CharField(max_length=200)
        kind = serializers.ChoiceField(choices=["human", "agent"])
        display_name = serializers.CharField(max_length=200, required=False, default="")
        aliases = serializers.ListField(child=serializers.CharField(max_length=200),
                                        required=False, default=list, max_length=20)

    def get(self, request: Request) -> Response:
        from knowledge.models import Peer

        p = principal_of(request)
        rows = list(Peer.objects.filter(account_id=p.account_id).order_by("key")
                    .values("key", "kind", "display_name", "aliases"))
        return Response({"peers": rows})

    def post(self, request: Request) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        if data.validated_data["kind"] == "human" and not (
                p.is_admin or (p.is_machine and p.act_for_all)):
            raise ApplicationError(
                "people_admin_only", "only an Account administrator (or a key that may act "
                "for every peer) registers a person; ask an administrator to add them "
                "with /api/v1/people", status_code=403)
        peer = services.peer_create(account_id=p.account_id, **data.validated_data)
        return Response({"key": peer.key, "kind": peer.kind,
                         "display_name": peer.display_name, "aliases": peer.aliases},
                        status=201)


# --- Ingest ----------------------------------------------------------------------------

def _unstorable_text(value: Any) -> str | None:
    """Why PostgreSQL cannot store this JSON value (a NUL or a lone surrogate in any key or
    string, which text and jsonb refuse), or None. Refused up front, never stripped."""
    if isinstance(value, str):
        if "\x00" in value:
            return "Null characters are not allowed."
        if any("\ud800" <= ch <= "\udfff" for ch in value):
            return "Surrogate characters are not allowed."
        return None
    if isinstance(value, dict):
        items: list[Any] = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    else:
        return None
    return next((why for why in map(_unstorable_text, items) if why), None)


class MessageInSerializer(serializers.Serializer):
    id = serializers.CharField(max_length=200, required=False, allow_null=True,
                               help_text="client message id; resending it is a no-op")
    peer_key = serializers.CharField(max_length=200, required=False, allow_null=True)
    text = serializers.CharField(trim_whitespace=False, allow_blank=True)
    occurred_at = AwareDateTimeField(required=False)
    metadata = serializers.DictField(required=False, default=dict)

    def validate_metadata(self, value: dict[str, Any]) -> dict[str, Any]:
        from django.conf import settings

        from memhouse.core.parsers import json_depth_exceeds

        depth = settings.MEMHOUSE_MAX_METADATA_DEPTH
        if json_depth_exceeds(value, depth):  # checked first: the walk below recurses
            raise serializers.ValidationError(f"metadata may nest at most {depth} levels")
        why = _unstorable_text(value)
        if why:
            raise serializers.ValidationError(why)
        return value


# Observation times the service stores: datetime arithmetic on year 1 or 9999 overflows
# in extraction, and nothing real was observed before the epoch or after tomorrow.
OCCURRED_AT_MIN = datetime(1970, 1, 1, tzinfo=UTC)
OCCURRED_AT_MAX_AHEAD = timedelta(days=1)


def _check_occurred_at(messages: list[dict[str, Any]], now: datetime) -> None:
    latest = now + OCCURRED_AT_MAX_AHEAD
    for index, m in enumerate(messages):
        at = m.get("occurred_at")
        if at is not None and not OCCURRED_AT_MIN <= at <= latest:
            raise ApplicationError(
                "occurred_at_out_of_range",
                f"message {index}: occurred_at must lie between 1970-01-01T00:00:00Z and "
                "one day from now", details={"index": index})


# The longest a write (POST /api/v1/messages, /documents, /documents/<id>/versions) may
# wait for what it stored to be processed.
MAX_WAIT_SECONDS = 10.0
# Polling while it waits: a short first sleep (eager and in-process extraction is
# usually done by then), doubling up to the cap.
_POLL_FIRST, _POLL_MAX = 0.05, 0.1


def _wait_seconds(data: Any) -> float:
    """The request's `wait`: a JSON number of seconds from 0 to the cap (absent: 0)."""
    value = data.get("wait") if isinstance(data, dict) else None
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or not 0 <= value <= MAX_WAIT_SECONDS:
        raise ApplicationError(
            "invalid_wait", f"wait must be a number of seconds from 0 to "
            f"{MAX_WAIT_SECONDS:g}", details={"max": MAX_WAIT_SECONDS})
    return float(value)


def _wait_field(what: str, outcome: str) -> serializers.FloatField:
    """The `wait` request field as the schema shows it (_wait_seconds validates it first,
    so a bad value is 400 `invalid_wait`, never a field error)."""
    return serializers.FloatField(
        required=False, allow_null=True, min_value=0, max_value=MAX_WAIT_SECONDS,
        help_text=f"seconds to wait for {what} to be processed (0-10, default 0); the "
                  f"answer then carries {outcome}")


def _poll_until_done(account_id: uuid.UUID, pending: Callable[[], int], *,
                     deadline: float) -> None:
    """Poll `pending` (how many of the stored sources the pipeline has neither processed
    nor set aside), each time in a short transaction of its own, until it is 0 or the
    deadline passes."""
    from memhouse.core.tenancy import account_context

    delay = _POLL_FIRST
    while True:
        with account_context(account_id):
            left_over = pending()
        left = deadline - time.monotonic()
        if not left_over or left <= 0:
            return
        time.sleep(min(delay, left))
        delay = min(delay * 2, _POLL_MAX)


@method_decorator(transaction.non_atomic_requests, name="dispatch")
class _WaitingWriteApi(APIView):
    """A write that may wait for the pipeline: the request's one transaction, as
    ATOMIC_REQUESTS gives every other view, but ended here. The pipeline sees the write
    only once it commits, so a wait runs after the commit: the handler calls
    `self._wait_after_commit(seconds, started)` and `_await` then polls and rewrites the
    answer."""

    wait_status = 201

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self._waiting: tuple[float, float] | None = None
        with transaction.atomic():
            response = super().dispatch(request, *args, **kwargs)
        if self._waiting is not None and response.status_code == self.wait_status:
            started, seconds = self._waiting
            response.data = self._await(principal_of(request), response.data,
                                        deadline=started + seconds)
        return response

    def _wait_after_commit(self, seconds: float, started: float) -> None:
        if seconds > 0:
            self._waiting = (started, seconds)

    def _await(self, p: Any, body: dict[str, Any], *, deadline: float) -> dict[str, Any]:
        raise NotImplementedError


MessageRefusal = Callable[[str], "str | None"]


def _outcome_out(outcome: Any, *, text: str | None = None,
                 refusal: MessageRefusal | None = None) -> dict[str, Any]:
    """A message's or document version's outcome: processing state, the derived
    statements the reader may read, refusals by reason code, and counts of what the
    reader may not read."""
    from knowledge import lifecycle, presenters, selectors

    refused = [{"reason": code, "message": lifecycle.reason_sentence(code), "count": n}
               for code, n in outcome.refused.items()]
    if (refusal is not None and text is not None and outcome.processing == selectors.PROCESSED
            and not outcome.statements and not outcome.hidden):
        # Nothing was proposed from it: say why when Gate A refuses the text as a whole
        # (an acknowledgement, a ping, machine output), whatever the extractor.
        code = refusal(text)
        if code:
            refused.append({"reason": code, "message": lifecycle.reason_sentence(code),
                            "count": 0})
    return {"processing": outcome.processing,
            "statements": [presenters.knowledge_out(k) for k in outcome.statements],
            "refused": refused,
            "not_visible": {"count": sum(outcome.hidden.values()),
                            "states": dict(sorted(outcome.hidden.items()))}}


def _as_subject(principal: Any, reader: Any) -> bool:
    """A human reading as itself sees its own rows in every state; an agent acting for
    that human does not (as GET /api/v1/knowledge/<id>)."""
    return bool(principal.is_human and principal.peer is not None
                and reader.peer_id == principal.peer.id)


class MessagesIngestApi(_WaitingWriteApi):
    """POST a batch of observations. 202: stored; extraction runs in the pipeline.

    Without `wait` (or with 0) the answer comes as soon as the batch is stored: each
    message's `id`, `client_message_id` and `status` (`created` or `duplicate`), nothing
    else. With `wait` (a number of seconds, at most 10; above that, negative or not a
    number is 400 `invalid_wait`) the answer comes once every message of the batch has
    been processed by the pipeline, or when the wait runs out, and carries `timed_out`
    (true when some message was still queued) and, for each message, its `outcome`:

    - `processing`: `queued` (stored, not yet extracted), `processed` (its statements are
      written) or `failed` (extraction failed; set aside for an administrator);
    - `statements`: the statements drawn from it that the writer may read (as GET
      /api/v1/knowledge/{id} shows them, read as the peer the message speaks for), in
      whatever state the gates left them (`active`, `provisional`, `held`, `rejected`...);
      a repeat that merged into a statement already held names that statement;
    - `refused`: the gates' refusals by reason code (`f4_gate_a_phatic`,
      `f4_gate_a_machine_output`, `f4_gate_a_duplicate`, `f4_gate_b_restricted_unattended`,
      ...; see docs/lifecycle.md) with the sentence for people and how many statements
      were refused; `count` 0 means nothing was proposed from the message because Gate A
      refuses its text as a whole (an acknowledgement such as "ok thanks", a ping,
      machine output);
    - `not_visible`: how many statements drawn from it the writer may not read, by state
      (another person's provisional claim, a scope claim held for a curator, a withheld
      restricted one): counts only, never their text.

    GET /api/v1/messages/{id} shows the same outcome later.
    """

    wait_status = 202
    # What Gate A says of a message's whole text (a reason code or None): the wiring
    # (memhouse.api_urls) passes governance's junk test, which this floor may not import.
    message_refusal: MessageRefusal | None = None

    class InputSerializer(serializers.Serializer):
        scope = serializers.CharField(max_length=500,
                                      help_text="the scope path the messages are stored in")
        session = serializers.CharField(
            max_length=200, required=False, allow_null=True,
            help_text="your conversation id; groups the messages into a session")
        messages = MessageInSerializer(many=True, allow_empty=False,
                                       help_text="the observations, in order")
        wait = _wait_field("the batch", "each message's outcome")

    def post(self, request: Request) -> Response:
        from django.utils import timezone

        from knowledge.ingest.services import IncomingMessage, messages_ingest

        started = time.monotonic()
        p = principal_of(request)
        wait = _wait_seconds(request.data)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        now = timezone.now()
        _check_occurred_at(v["messages"], now)
        usage.check_ingest_budget(p, sum(len(m["text"]) for m in v["messages"]))
        incoming = [IncomingMessage(text=m["text"], occurred_at=m.get("occurred_at") or now,
                                    client_message_id=m.get("id"), peer_key=m.get("peer_key"),
                                    metadata=m.get("metadata"),
                                    occurred_at_given=m.get("occurred_at") is not None)
                    for m in v["messages"]]
        results = messages_ingest(principal=p, scope_path=v["scope"], messages=incoming,
                                  session_id=v.get("session"))
        created = [m for m, r in zip(incoming, results, strict=True) if r["status"] == "created"]
        usage.record(p, "ingest", len(created))
        usage.record(p, "ingest_chars", sum(len(m.text) for m in created))
        self._wait_after_commit(wait, started)
        return Response({"messages": results}, status=202)

    def _await(self, p: Any, body: dict[str, Any], *, deadline: float) -> dict[str, Any]:
        """Poll until every message of the batch is processed (or set aside) or the
        deadline passes, then add each message's outcome for the peer it speaks as."""
        from knowledge import selectors
        from knowledge.models import Message
        from memhouse.core.tenancy import account_context

        ids = [uuid.UUID(m["id"]) for m in body["messages"]]
        _poll_until_done(p.account_id, lambda: selectors.messages_pending(
            account_id=p.account_id, message_ids=ids), deadline=deadline)
        with account_context(p.account_id):
            messages = {m.pk: m for m in Message.objects.filter(
                account_id=p.account_id, pk__in=ids).select_related("peer")}
            readers: dict[uuid.UUID, Any] = {}
            wanted = []
            for m in messages.values():
                if m.peer_id not in readers:  # the speaker's view: it wrote as that peer
                    own = p.peer is not None and p.peer.id == m.peer_id
                    readers[m.peer_id] = selectors.reader_for(
                        principal=p, peer_key=None if own else m.peer.key)
                reader = readers[m.peer_id]
                wanted.append((m, reader, _as_subject(p, reader)))
            outcomes = selectors.message_outcomes(messages=wanted)
            out = []
            for m in body["messages"]:
                mid = uuid.UUID(m["id"])
                out.append({**m, "outcome": _outcome_out(
                    outcomes[mid], text=messages[mid].text, refusal=self.message_refusal)})
        timed_out = any(m["outcome"]["processing"] == selectors.QUEUED for m in out)
        return {"messages": out, "timed_out": timed_out}


class _MessageQuery(serializers.Serializer):
    peer_key = serializers.CharField(
        max_length=200, required=False,
        help_text="read as this peer (within the key's act-for grant); default: the "
                  "credential's own peer")


class MessageDetailApi(APIView):
    """GET ?peer_key: one message, its processing state and its outcome (as POST
    /api/v1/messages with `wait` reports it), for a reader who may read the message.

    The reader is built as for search (`peer_key` within the credential's act-for
    grant, default the credential's own peer). It may read a message in a scope the
    credential may read that it spoke itself, or whose every derived statement it may
    read (the rule lineage applies to source messages). Unknown ids, other Accounts'
    messages and messages the reader may not read are the same 404 `not_found`.
    """

    message_refusal: MessageRefusal | None = None

    @extend_schema(operation_id="v1_messages_retrieve", parameters=[_MessageQuery])
    def get(self, request: Request, message_id: uuid.UUID) -> Response:
        from knowledge import selectors
        from knowledge.presenters import iso

        data = _MessageQuery(data={"peer_key": request.query_params["peer_key"]}
                             if "peer_key" in request.query_params else {})
        data.is_valid(raise_exception=True)
        p = principal_of(request)
        reader = selectors.reader_for(principal=p, peer_key=data.validated_data.get("peer_key"))
        m = selectors.message_for_read(reader=reader, message_id=message_id)
        outcome = selectors.message_outcomes(
            messages=[(m, reader, _as_subject(p, reader))])[m.pk]
        return Response({"message": {
            "id": str(m.id), "client_message_id": m.client_message_id,
            "scope": m.scope.path, "session": m.session.external_id if m.session else None,
            "peer_key": m.peer.key, "text": m.text, "occurred_at": iso(m.occurred_at),
            "inserted_at": iso(m.inserted_at),
            "outcome": _outcome_out(outcome, text=m.text, refusal=self.message_refusal)},
            "reader_posture": reader.posture})


class DocumentInSerializer(serializers.Serializer):
    text = serializers.CharField(required=False, trim_whitespace=False)
    content_base64 = serializers.CharField(required=False)
    media_type = serializers.CharField(max_length=100, required=False, default="text/plain")
    wait = _wait_field("the version", "its outcome")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        import base64
        import binascii

        if ("text" in attrs) == ("content_base64" in attrs):
            raise serializers.ValidationError("send exactly one of text or content_base64")
        if "text" in attrs:
            attrs["content"] = attrs.pop("text").encode("utf-8")
        else:
            try:
                attrs["content"] = base64.b64decode(attrs.pop("content_base64"), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise serializers.ValidationError(
                    {"content_base64": "not valid base64"}) from exc
        return attrs


def _document_chars(content: bytes) -> int:
    """The characters of text a document version would hand the pipeline (what the
    ingest budget counts; undecodable bytes are refused later with their own code)."""
    return len(content.decode("utf-8", errors="replace"))


def _version_out(version: Any) -> dict[str, Any]:
    return {"document_id": version.document_id, "version": version.number,
            "version_id": version.id, "sha256": version.sha256, "media_type": version.media_type}


def _document_out(document: Any, latest: Any, *, with_text: bool,
                  withheld: bool = False) -> dict[str, Any]:
    version = {**_version_out(latest), "created_at": latest.created_at}
    if with_text:
        version["text"] = None if withheld else latest.text
        version["text_withheld"] = withheld
    return {"id": document.id, "title": document.title, "scope": document.scope.path,
            "external_id": document.external_id, "created_at": document.created_at,
            "latest_version": version}


class _DocumentWriteApi(_WaitingWriteApi):
    """A document write (a first version or a new one) that may wait for its version."""

    def _stored(self, version: Any, *, wait: float, started: float) -> Response:
        self._wait_after_commit(wait, started)
        return Response(_version_out(version), status=201)

    def _await(self, p: Any, body: dict[str, Any], *, deadline: float) -> dict[str, Any]:
        """Poll until the version is processed (or set aside) or the deadline passes,
        then add its outcome for the writer (the credential's own peer; a peerless key
        reads public statements only)."""
        from knowledge import selectors
        from knowledge.models import DocumentVersion
        from memhouse.core.tenancy import account_context

        vid = body["version_id"]
        _poll_until_done(p.account_id, lambda: selectors.versions_pending(
            account_id=p.account_id, version_ids=[vid]), deadline=deadline)
        with account_context(p.account_id):
            version = DocumentVersion.objects.defer("blob", "text").get(
                account_id=p.account_id, pk=vid)
            reader = selectors.reader_for(principal=p)
            outcome = selectors.version_outcomes(
                versions=[(version, reader, _as_subject(p, reader))])[version.pk]
        out = {**_outcome_out(outcome), "error": selectors.version_error(version)}
        return {**body, "outcome": out, "timed_out": out["processing"] == selectors.QUEUED}


_DOCUMENT_WAIT = """

With `wait` (a number of seconds, at most 10; above that, negative or not a number is
400 `invalid_wait`), the answer comes once the pipeline has processed the version, or
when the wait runs out, and carries `timed_out` and the version's `outcome`, as POST
/api/v1/messages reports a message's: `processing` (`queued`, `processed` or `failed`),
the `statements` drawn from the version that the writer (the key's own peer) may read,
with their ids and states (a statement an earlier version already held and this one
still supports is named too), `refused` by reason code, `not_visible` counts and, when
`failed`, an `error` code (`too_many_statements`, `processing_failed` or
`crashed_repeatedly`). A search
right after a waited write finds what was kept. Without `wait` the answer is as soon as
the version is stored. GET /api/v1/documents/{id} shows each version's `processing`."""


class DocumentsApi(_DocumentWriteApi):
    """GET ?scope&external_id&include_text&cursor&limit: the live documents this
    credential may access, each with its latest version. With include_text, the version's
    `text`, or `text: null` and `text_withheld: true` when some statement drawn from it
    is one this credential may not read (its owner, curators and administrators always
    read it). POST: upload a document."""

    class InputSerializer(DocumentInSerializer):
        scope = serializers.CharField(max_length=500)
        title = serializers.CharField(max_length=500)
        external_id = serializers.CharField(max_length=200, required=False, allow_null=True)

    class ListSerializer(serializers.Serializer):
        scope = serializers.CharField(max_length=500, required=False)
        external_id = serializers.CharField(max_length=200, required=False)
        include_text = serializers.BooleanField(required=False, default=False)
        cursor = serializers.CharField(max_length=500, required=False)
        limit = serializers.IntegerField(min_value=1, max_value=DOCUMENTS_MAX_LIMIT,
                                         default=DOCUMENTS_DEFAULT_LIMIT)

    @extend_schema(operation_id="v1_documents_list", parameters=[ListSerializer])
    def get(self, request: Request) -> Response:
        from knowledge import selectors

        params = request.query_params
        data = self.ListSerializer(data={k: params.get(k) for k in params})
        data.is_valid(raise_exception=True)
        v = data.validated_data
        p = principal_of(request)
        reader = selectors.reader_for(principal=p)
        page = selectors.documents_listing(
            reader=reader, scope_path=v.get("scope"), external_id=v.get("external_id"),
            with_text=v["include_text"], cursor=v.get("cursor"), limit=v["limit"],
            as_subject=_as_subject(p, reader), reads_every_text=p.is_curator or p.is_admin)
        return Response({"items": [_document_out(d, latest, with_text=v["include_text"],
                                                 withheld=d.id in page.text_withheld)
                                   for d, latest in page.items],
                         "next_cursor": page.next_cursor})

    @extend_schema(description="Upload a document: its first version, whose statements "
                               "the pipeline extracts." + _DOCUMENT_WAIT)
    def post(self, request: Request) -> Response:
        from knowledge.ingest.services import document_create

        started = time.monotonic()
        p = principal_of(request)
        wait = _wait_seconds(request.data)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        usage.check_ingest_budget(p, _document_chars(v["content"]), what="a document version")
        version = document_create(principal=p, scope_path=v["scope"], title=v["title"],
                                  content=v["content"], media_type=v["media_type"],
                                  external_id=v.get("external_id"))
        usage.record(p, "document")
        usage.record(p, "ingest_chars", len(version.text))
        return self._stored(version, wait=wait, started=started)


class DocumentVersionsApi(_DocumentWriteApi):
    """POST: a new version of a document; statements it no longer supports are
    superseded."""

    InputSerializer = DocumentInSerializer

    @extend_schema(description="A new version of a document (the same bytes again: the "
                               "latest version, no new one); statements it no longer "
                               "supports are superseded." + _DOCUMENT_WAIT)
    def post(self, request: Request, document_id: str) -> Response:
        from knowledge.ingest.services import document_for_write, document_version_add

        started = time.monotonic()
        p = principal_of(request)
        document = document_for_write(principal=p, document_id=document_id)
        wait = _wait_seconds(request.data)
        data = DocumentInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        content = data.validated_data["content"]
        latest = document.versions.order_by("-number").values_list("id", flat=True).first()
        usage.check_ingest_budget(p, _document_chars(content), what="a document version")
        version = document_version_add(principal=p, document=document, content=content,
                                       media_type=data.validated_data["media_type"])
        if version.id != latest:  # the same bytes again store (and spend) nothing
            usage.record(p, "document")
            usage.record(p, "ingest_chars", len(version.text))
        return self._stored(version, wait=wait, started=started)


class DocumentDetailApi(APIView):
    def get(self, request: Request, document_id: str) -> Response:
        """A document and its versions, oldest first, each with its `processing` state
        (`queued`, `processed` or `failed`, as a write with `wait` reports it) and, when
        `failed`, an `error` code (`too_many_statements`: the version would yield more
        than MEMHOUSE_MAX_STATEMENTS_PER_VERSION statements, none was written and the
        earlier versions' statements stand, so split the document; `processing_failed`:
        its processing raised; `crashed_repeatedly`: its processing was cut off, a worker
        killed mid-task, MEMHOUSE_MAX_INGEST_ATTEMPTS times); the top-level `processing`
        is the latest version's. An administrator lists set-aside versions and retries
        one under /api/v1/admin/dead-letters."""
        from knowledge import selectors
        from knowledge.ingest.services import document_for_write

        document = document_for_write(principal=principal_of(request), document_id=document_id)
        versions = list(document.versions.defer("blob", "text").order_by("number"))
        return Response({"id": document.id, "title": document.title,
                         "scope": document.scope.path,
                         "processing": selectors.version_processing(versions[-1])
                         if versions else None,
                         "versions": [{**_version_out(v),
                                       "processing": selectors.version_processing(v),
                                       "error": selectors.version_error(v)}
                                      for v in versions]})

    def delete(self, request: Request, document_id: str) -> Response:
        from knowledge.ingest.services import document_delete, document_for_write

        p = principal_of(request)
        document = document_for_write(principal=p, document_id=document_id)
        retracted = document_delete(principal=p, document=document)
        return Response({"id": document.id, "deleted": True, "retracted_knowledge": retracted})


class UsageApi(APIView):
    """GET ?since=ISO: metered units by kind. Account administrators see the whole
    Account; everyone else sees their own credential (or, signed in, their own peer)."""

    def get(self, request: Request) -> Response:
        from django.db.models import Sum
        from django.utils.dateparse import parse_datetime

        from knowledge.models import UsageEntry

        p = principal_of(request)
        rows = UsageEntry.objects.filter(account_id=p.account_id)
        since_raw = request.query_params.get("since")
        if since_raw:
            try:
                since = parse_datetime(since_raw)
            except ValueError:  # well-formed but impossible, e.g. month 13
                since = None
            if since is None:
                raise ApplicationError("invalid_since",
                                       "since must be an ISO 8601 time with a time zone")
            if is_naive(since):
                raise ApplicationError("naive_datetime", "since must include a time zone, "
                                       "e.g. 2026-05-01T00:00:00Z", details={"field": "since"})
            rows = rows.filter(created_at__gte=since)
        if p.is_admin:
            scope = "account"
        elif p.credential_id is not None:
            scope, rows = "credential", rows.filter(credential_id=p.credential_id)
        else:
            scope, rows = "peer", rows.filter(peer_key=p.peer.key if p.peer else "")
        totals = {r["kind"]: r["units"] for r in
                  rows.values("kind").annotate(units=Sum("units")).order_by("kind")}
        return Response({"scope": scope, "since": since_raw, "totals": totals})
