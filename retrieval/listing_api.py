"""GET /api/v1/knowledge and /api/v1/knowledge/<id>: governed statements for a reader.

Thin views over knowledge.selectors.knowledge_listing / knowledge_listed. The reader is
built exactly as for search (reader_for: `peer_key` within the credential's act-for
grant; an unknown key is 400 `unknown_peer_key`), a named scope is authorised by
scope_for_read (unauthorised and missing scopes are the same 404), and visibility is the
search filter, widened by a `state` filter only to what docs/lifecycle.md lets the reader
inspect. A statement the reader may not see is absent from the list and a 404 on detail.
"""

from __future__ import annotations

import uuid

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from knowledge import presenters, selectors
from knowledge.models import Knowledge
from memhouse.core.db_router import replica_safe
from memhouse.core.principal import Principal, Reader, principal_of
from retrieval import conflicts


def _as_subject(principal: Principal, reader: Reader) -> bool:
    """A human credential reading as itself sees its own rows in every state (the
    contract's subject column); an agent acting for that human does not."""
    return principal.is_human and reader.peer_id == principal.peer.id


def _roles(principal: Principal, reader: Reader) -> dict[str, bool]:
    """The contract's visibility columns this request reads in (docs/lifecycle.md):
    subject, curator and admin only for a human's own credential."""
    own = _as_subject(principal, reader)
    return {"as_subject": own, "as_curator": own and principal.is_curator,
            "as_admin": own and principal.is_admin}


class _ReaderQuery(serializers.Serializer):
    peer_key = serializers.CharField(max_length=200, required=False)


class KnowledgeListApi(APIView):
    """GET ?scope&peer_key&state&kind&subject&updated_since&cursor&limit"""

    class InputSerializer(_ReaderQuery):
        scope = serializers.CharField(max_length=500, required=False)
        state = serializers.CharField(max_length=500, required=False)
        kind = serializers.ChoiceField(choices=Knowledge.Kind.choices, required=False)
        subject = serializers.CharField(max_length=200, required=False)
        updated_since = serializers.DateTimeField(required=False)
        cursor = serializers.CharField(max_length=500, required=False)
        limit = serializers.IntegerField(min_value=1, max_value=selectors.LISTING_MAX_LIMIT,
                                         default=selectors.LISTING_DEFAULT_LIMIT)

    @extend_schema(operation_id="v1_knowledge_list", parameters=[InputSerializer])
    @replica_safe
    def get(self, request: Request) -> Response:
        params = request.query_params
        data = self.InputSerializer(data={k: params.get(k) for k in params})
        data.is_valid(raise_exception=True)
        v = data.validated_data
        principal = principal_of(request)
        reader = selectors.reader_for(principal=principal, peer_key=v.get("peer_key"))
        scope = selectors.scope_for_read(reader=reader, path=v["scope"]) if v.get(
            "scope") else None
        roles = _roles(principal, reader)
        # `state` may repeat or be comma-separated: ?state=active,superseded
        raw_states = [s for value in params.getlist("state") for s in value.split(",")]
        states = selectors.listing_states(states=raw_states, **roles)
        page = selectors.knowledge_listing(
            reader=reader, scope=scope, states=states, **roles,
            kind=v.get("kind"), subject_key=v.get("subject"),
            updated_since=v.get("updated_since"), cursor=v.get("cursor"), limit=v["limit"])
        # The listing keeps its keyset order; an older claim of an unsettled pair says
        # which newer one the reader may see instead (retrieval.conflicts).
        marks = conflicts.outdated_by(reader=reader, ids=[k.pk for k in page.items])
        return Response({"items": [{**presenters.knowledge_out(k),
                                    conflicts.FIELD: marks.get(str(k.pk))}
                                   for k in page.items],
                         "next_cursor": page.next_cursor, "reader_posture": reader.posture})


class KnowledgeDetailApi(APIView):
    """GET ?peer_key: one statement, or the same 404 as an unknown id."""

    @extend_schema(operation_id="v1_knowledge_retrieve", parameters=[_ReaderQuery])
    @replica_safe
    def get(self, request: Request, knowledge_id: uuid.UUID) -> Response:
        data = _ReaderQuery(data={"peer_key": request.query_params["peer_key"]}
                            if "peer_key" in request.query_params else {})
        data.is_valid(raise_exception=True)
        principal = principal_of(request)
        reader = selectors.reader_for(principal=principal,
                                      peer_key=data.validated_data.get("peer_key"))
        item = selectors.knowledge_listed(reader=reader, knowledge_id=knowledge_id,
                                          **_roles(principal, reader))
        marks = conflicts.outdated_by(reader=reader, ids=[item.pk])
        return Response({"knowledge": {**presenters.knowledge_out(item),
                                       conflicts.FIELD: marks.get(str(item.pk))},
                         "reader_posture": reader.posture})
