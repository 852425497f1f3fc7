"""Thin DRF views for governance: curator decisions, subject self-governance, peer
questions and erasure. Each parses input, calls one selector and one service, and
serialises the result."""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance import selectors, services
from governance.models import PeerQuestion, Validation
from knowledge.models import Knowledge, Message
from knowledge.presenters import iso as _ts
from knowledge.presenters import knowledge_out
from memhouse.core.db_router import replica_safe
from memhouse.core.errors import ApplicationError
from memhouse.core.permissions import IsHuman, IsHumanCurator
from memhouse.core.principal import Principal, principal_of


class IsAccountAdmin(BasePermission):
    message = "only account administrators may do this"

    def has_permission(self, request: Any, view: Any) -> bool:
        return isinstance(request.user, Principal) and request.user.is_admin


def validation_out(v: Validation) -> dict[str, Any]:
    return {"id": str(v.id), "kind": v.kind, "status": v.status, "reason": v.reason,
            "target_level": v.target_level or None,
            "target_scope": v.target_scope.path if v.target_scope is not None else None,
            "due_at": _ts(v.due_at), "created_at": _ts(v.created_at), "note": v.note}


def question_out(q: PeerQuestion) -> dict[str, Any]:
    return {"id": str(q.id), "kind": q.kind, "text": q.text, "status": q.status,
            "answers": list(services.ANSWERS[PeerQuestion.Kind(q.kind)]),
            "deadline": _ts(q.deadline), "created_at": _ts(q.created_at),
            "answer": q.answer or None, "answered_at": _ts(q.answered_at),
            "knowledge": {"id": str(q.knowledge_id), "statement": q.knowledge.statement,
                          "state": q.knowledge.state, "scope": q.knowledge.scope.path}}


class _PageQuery(serializers.Serializer):
    cursor = serializers.CharField(required=False, allow_blank=True, max_length=500)
    limit = serializers.CharField(required=False, allow_blank=True, max_length=10)


def _page_args(request: Request) -> dict[str, Any]:
    data = _PageQuery(data=request.query_params)
    data.is_valid(raise_exception=True)
    return {"cursor": data.validated_data.get("cursor") or None,
            "limit": selectors.parse_limit(data.validated_data.get("limit"))}


class _NoteInput(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, default="",
                                 max_length=services.MAX_REASON_CHARS)


# --- curators ---------------------------------------------------------------------------

class CuratorQueueApi(APIView):
    """GET ?state=held|contested|contradiction|revalidation&cursor&limit: statements
    awaiting a curator."""

    permission_classes = [IsHumanCurator]

    @replica_safe
    def get(self, request: Request) -> Response:
        p = principal_of(request)
        page = selectors.curator_queue(principal=p, state=request.query_params.get("state"),
                                       **_page_args(request))
        items = [{**knowledge_out(k),
                  "validations": [validation_out(v) for v in k.open_validations]}
                 for k in page.items]
        return Response({"items": items, "next_cursor": page.next_cursor})


class _CuratorHeldDecisionApi(APIView):
    """POST {"note"}: a curator's decision on a held statement (`decide` is the service)."""

    InputSerializer = _NoteInput
    permission_classes = [IsHumanCurator]
    decide: Any = None

    def post(self, request: Request, knowledge_id: uuid.UUID) -> Response:
        p = principal_of(request)
        data = _NoteInput(data=request.data)
        data.is_valid(raise_exception=True)
        item = selectors.knowledge_for_curator(principal=p, knowledge_id=knowledge_id)
        item = type(self).decide(item=item, actor=p.peer, **data.validated_data)
        return Response({"knowledge": knowledge_out(item)})


class CuratorApproveApi(_CuratorHeldDecisionApi):
    decide = staticmethod(services.knowledge_approve)


class CuratorRejectApi(_CuratorHeldDecisionApi):
    decide = staticmethod(services.knowledge_reject)


class CuratorResolveApi(APIView):
    """POST {"outcome": "for"|"against", "note"}: decide a subject's dispute."""

    permission_classes = [IsHumanCurator]

    class InputSerializer(_NoteInput):
        outcome = serializers.ChoiceField(choices=["for", "against"])

    def post(self, request: Request, knowledge_id: uuid.UUID) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        item = selectors.knowledge_for_curator(principal=p, knowledge_id=knowledge_id)
        item = services.contest_resolve(item=item, actor=p.peer, **data.validated_data)
        return Response({"knowledge": knowledge_out(item)})


class CuratorPromoteApi(APIView):
    """POST {"level": "scope"|"account", "scope": "/path"}: request a wider placement."""

    permission_classes = [IsHumanCurator]

    class InputSerializer(serializers.Serializer):
        level = serializers.ChoiceField(choices=[Knowledge.Level.SCOPE, Knowledge.Level.ACCOUNT])
        scope = serializers.CharField(required=False, max_length=500)

    def post(self, request: Request, knowledge_id: uuid.UUID) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        item = selectors.knowledge_for_curator(principal=p, knowledge_id=knowledge_id)
        scope = selectors.scope_for_curator(principal=p, path=v["scope"]) if v.get(
            "scope") else None
        item = services.knowledge_promote(item=item, actor=p.peer, level=v["level"],
                                          scope=scope)
        return Response({"knowledge": knowledge_out(item)}, status=202)


class CuratorEditApi(APIView):
    """POST {"statement", "note"}: correct a statement (a new row supersedes it)."""

    permission_classes = [IsHumanCurator]

    class InputSerializer(_NoteInput):
        statement = serializers.CharField(max_length=services.MAX_STATEMENT_CHARS)

    def post(self, request: Request, knowledge_id: uuid.UUID) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        item = selectors.knowledge_for_curator(principal=p, knowledge_id=knowledge_id)
        new = services.knowledge_edit(item=item, actor=p.peer, **data.validated_data)
        return Response({"knowledge": knowledge_out(new), "superseded": [str(item.pk)]},
                        status=201)


class CuratorMergeApi(APIView):
    """POST {"ids": [...], "statement", "note"}: merge statements about one subject in
    one scope into one row; each original is superseded."""

    permission_classes = [IsHumanCurator]

    class InputSerializer(_NoteInput):
        ids = serializers.ListField(child=serializers.UUIDField(), min_length=2,
                                    max_length=services.MAX_MERGE)
        statement = serializers.CharField(max_length=services.MAX_STATEMENT_CHARS,
                                          required=False)

    def post(self, request: Request) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        items = [selectors.knowledge_for_curator(principal=p, knowledge_id=i) for i in v["ids"]]
        new = services.knowledge_merge(items=items, actor=p.peer, statement=v.get("statement"),
                                       note=v["note"])
        return Response({"knowledge": knowledge_out(new),
                         "superseded": [str(i) for i in v["ids"]]}, status=201)


class CuratorContradictionApi(APIView):
    """POST {"outcome": "keep"|"retire", "note"}: settle a contradiction review."""

    permission_classes = [IsHumanCurator]

    class InputSerializer(_NoteInput):
        outcome = serializers.ChoiceField(choices=["keep", "retire"])

    def post(self, request: Request, knowledge_id: uuid.UUID) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        item = selectors.knowledge_for_curator(principal=p, knowledge_id=knowledge_id)
        item = services.contradiction_resolve(item=item, actor=p.peer, **data.validated_data)
        return Response({"knowledge": knowledge_out(item)})


class CuratorRevalidationApi(APIView):
    """POST {"outcome": "reconfirm"|"retire", "note"}: settle the revalidation of a
    statement with no human subject (the queue's "revalidation" list)."""

    permission_classes = [IsHumanCurator]

    class InputSerializer(_NoteInput):
        outcome = serializers.ChoiceField(choices=["reconfirm", "retire"])

    def post(self, request: Request, knowledge_id: uuid.UUID) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        item = selectors.knowledge_for_curator(principal=p, knowledge_id=knowledge_id)
        item = services.revalidation_decide(item=item, actor=p.peer, **data.validated_data)
        return Response({"knowledge": knowledge_out(item)})


# --- subjects ---------------------------------------------------------------------------

class MyKnowledgeApi(APIView):
    """GET ?cursor&limit: everything about me, in any scope and state."""

    permission_classes = [IsHuman]  # an agent's key: 403 human_only

    @replica_safe
    def get(self, request: Request) -> Response:
        page = selectors.knowledge_about_me(principal=principal_of(request),
                                            **_page_args(request))
        return Response({"items": [knowledge_out(k) for k in page.items],
                         "next_cursor": page.next_cursor})


class MyKnowledgeConfirmApi(APIView):
    permission_classes = [IsHuman]  # an agent's key: 403 human_only

    def post(self, request: Request, knowledge_id: uuid.UUID) -> Response:
        p = principal_of(request)
        item = selectors.knowledge_for_subject(principal=p, knowledge_id=knowledge_id)
        item = services.knowledge_confirm(item=item, actor=p.peer)
        return Response({"knowledge": knowledge_out(item)})


class _ReasonInput(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, default="",
                                   max_length=services.MAX_REASON_CHARS)


class _RequiredReason(serializers.CharField):
    """A reason the service requires: required in the schema (so docs/api.md says so),
    and missing or blank is the service's own 400 `reason_required`, one code for both."""

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data is empty or data is None or (isinstance(data, str) and not data.strip()):
            raise ApplicationError("reason_required", "say why (a non-empty reason)")
        return super().validate_empty_values(data)


class _RequiredReasonInput(serializers.Serializer):
    reason = _RequiredReason(max_length=services.MAX_REASON_CHARS)


class _SubjectReasonedActionApi(APIView):
    """POST {"reason"}: a subject's action on a statement about them (`act` is the
    service; it decides whether the reason is required)."""

    permission_classes = [IsHuman]  # an agent's key: 403 human_only

    InputSerializer: type[serializers.Serializer] = _ReasonInput
    act: Any = None

    def post(self, request: Request, knowledge_id: uuid.UUID) -> Response:
        p = principal_of(request)
        item = selectors.knowledge_for_subject(principal=p, knowledge_id=knowledge_id)
        data = type(self).InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        item = type(self).act(item=item, actor=p.peer, **data.validated_data)
        return Response({"knowledge": knowledge_out(item)})


class MyKnowledgeContestApi(_SubjectReasonedActionApi):
    """POST {"reason": "..."} (required)."""

    InputSerializer = _RequiredReasonInput
    act = staticmethod(services.knowledge_contest)


class MyKnowledgeCorrectApi(APIView):
    """POST {"statement", "reason"}: my statement is outdated; this is what is true now."""

    permission_classes = [IsHuman]  # an agent's key: 403 human_only

    class InputSerializer(_ReasonInput):
        statement = serializers.CharField(max_length=services.MAX_STATEMENT_CHARS)

    def post(self, request: Request, knowledge_id: uuid.UUID) -> Response:
        p = principal_of(request)
        item = selectors.knowledge_for_subject(principal=p, knowledge_id=knowledge_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        new = services.knowledge_correct(item=item, actor=p.peer, **data.validated_data)
        return Response({"knowledge": knowledge_out(new), "superseded": [str(item.pk)]},
                        status=201)


class MyKnowledgeRedactApi(_SubjectReasonedActionApi):
    """POST {"reason": "..."} (optional, kept in the lifecycle evidence)."""

    act = staticmethod(services.knowledge_redact)


# --- questions --------------------------------------------------------------------------

class MyQuestionsApi(APIView):
    """GET ?status=open|answered|expired&cursor&limit: questions put to me."""

    permission_classes = [IsHuman]  # an agent's key: 403 human_only

    @replica_safe
    def get(self, request: Request) -> Response:
        page = selectors.questions_for_me(
            principal=principal_of(request),
            status=request.query_params.get("status") or PeerQuestion.Status.OPEN,
            **_page_args(request))
        return Response({"items": [question_out(q) for q in page.items],
                         "next_cursor": page.next_cursor})


class QuestionAnswerApi(APIView):
    """POST {"answer": "yes"|"no"} (consent questions: "consent"|"decline")."""

    permission_classes = [IsHuman]  # an agent's key: 403 human_only

    class InputSerializer(serializers.Serializer):
        answer = serializers.CharField(max_length=20)

    def post(self, request: Request, question_id: uuid.UUID) -> Response:
        p = principal_of(request)
        question = selectors.question_for_me(principal=p, question_id=question_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        question = services.question_answer(question=question, actor=p.peer,
                                            answer=data.validated_data["answer"])
        question.knowledge.refresh_from_db()
        return Response({"question": question_out(question)})


# --- erasure ----------------------------------------------------------------------------

class ScopeBeliefTimeApi(APIView):
    """PUT {"scope": "/path", "belief_time": {...} | null}: a scope's belief-time override
    (account administrators); GET ?scope=/path: the override and the effective policy."""

    permission_classes = [IsAccountAdmin]

    class InputSerializer(serializers.Serializer):
        scope = serializers.CharField(max_length=500)
        belief_time = serializers.JSONField(allow_null=True)

    @staticmethod
    def _out(scope: Any) -> dict[str, Any]:
        from governance import belief_time

        policy = belief_time.policy_for(scope)
        return {"scope": scope.path,
                "belief_time": (scope.settings or {}).get(belief_time.SETTING_KEY),
                "effective": {"revalidate_days": policy.revalidate_days,
                              "sensitivity_factor": policy.sensitivity_factor,
                              "expiry_grace_days": policy.expiry_grace_days,
                              "expire": policy.expire}}

    def get(self, request: Request) -> Response:
        p = principal_of(request)
        scope = selectors.scope_for_curator(principal=p,
                                            path=request.query_params.get("scope", "/"))
        return Response(self._out(scope))

    def put(self, request: Request) -> Response:
        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        scope = selectors.scope_for_curator(principal=p, path=v["scope"])
        scope = services.scope_belief_time_set(scope=scope, actor=p.peer,
                                               policy=v["belief_time"])
        return Response(self._out(scope))


class ErasureApi(APIView):
    """POST exactly one of {"message_id"}, {"document_id"}, {"peer_key"}: hard-delete it."""

    permission_classes = [IsAccountAdmin]

    class InputSerializer(serializers.Serializer):
        message_id = serializers.UUIDField(required=False)
        document_id = serializers.UUIDField(required=False)
        peer_key = serializers.CharField(required=False, max_length=200)

    def post(self, request: Request) -> Response:
        from governance.erasure import erasure_execute

        p = principal_of(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        outcome = erasure_execute(actor=p.peer, **data.validated_data)
        r = outcome.record
        return Response({"erasure": {
            "id": str(r.id), "kind": r.kind, "target_id": str(r.target_id), "sha256": r.sha256,
            "erased_at": _ts(r.erased_at), "knowledge_retracted": outcome.retracted,
            "knowledge_deleted": outcome.deleted_knowledge,
            "messages_deleted": outcome.deleted_messages,
            "versions_deleted": outcome.deleted_versions}}, status=200)


# --- operators: dead letters -----------------------------------------------------------

class DeadLettersApi(APIView):
    """GET ?kind&cursor&limit: messages and document versions set aside (dead-lettered),
    newest failure first, in the administrator's Account and scopes. `kind` (`message`
    or `document_version`) keeps one kind. Each item has the same keys: `kind`, `id`
    (the message's or the version's), `error` (a code: `extraction_failed`,
    `processing_failed`, `too_many_statements` or `crashed_repeatedly`),
    `error_message` (for a person), `failed_at` and `attempts` (times its processing
    started since it was stored or last retried), with the message's or the document's
    ids; never the text or a document's title."""

    permission_classes = [IsAccountAdmin]

    def get(self, request: Request) -> Response:
        from knowledge.ingest import dead_letter

        page = selectors.dead_letters(principal=principal_of(request),
                                      kind=request.query_params.get("kind") or None,
                                      **_page_args(request))
        return Response({"items": [dead_letter.dead_letter_out(row)
                                   if isinstance(row, Message)
                                   else dead_letter.dead_version_out(row)
                                   for row in page.items],
                         "next_cursor": page.next_cursor})


class DeadLetterRetryApi(APIView):
    """POST: clear the mark and extract the message again (202; it may fail again). The
    attempt count starts again; the audit entry (`message.extraction_retried`, in the
    administrator's name) keeps the old one. 409 `not_dead_lettered` for a message that
    is not set aside; 404 for one that is not in this Account (or the administrator's
    scopes)."""

    permission_classes = [IsAccountAdmin]

    def post(self, request: Request, message_id: uuid.UUID) -> Response:
        from knowledge.ingest import dead_letter

        msg = dead_letter.retry(principal=principal_of(request), message_id=message_id)
        return Response({"kind": "message", "id": str(msg.pk), "status": "queued"},
                        status=202)


class DeadVersionRetryApi(APIView):
    """POST: clear the mark and process the document version again (202; it may fail
    again), as a message's retry. A version a newer processed version of its document
    has replaced meanwhile is marked processed without writing anything. 409
    `not_dead_lettered` for a version that is not set aside; 404 for one that is not in
    this Account (or the administrator's scopes) or whose document was deleted."""

    permission_classes = [IsAccountAdmin]

    def post(self, request: Request, version_id: uuid.UUID) -> Response:
        from knowledge.ingest import dead_letter

        version = dead_letter.retry_version(principal=principal_of(request),
                                            version_id=version_id)
        return Response({"kind": "document_version", "id": str(version.pk),
                         "document_id": str(version.document_id),
                         "version": version.number, "status": "queued"}, status=202)
