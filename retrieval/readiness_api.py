"""GET /api/v1/readiness: projection and skill readiness for a read at a scope.

A thin view over retrieval.readiness. The reader is built as for search (`peer_key`
within the credential's act-for grant), the scope is authorised by scope_for_read
(unauthorised and missing scopes are the same 404; `/` when absent, as for search), and
`subject` names the peer the report is about (400 `unknown_subject` for a key the Account
does not have); without it the report is about the scope. Content-free unless the
reader is the subject.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from knowledge import selectors
from knowledge.models import Peer
from memhouse.core.errors import ApplicationError
from memhouse.core.principal import principal_of
from retrieval.readiness import readiness


class ReadinessApi(APIView):
    """GET ?scope&subject&peer_key: which projections of a read at `scope` are fresh and
    which readiness gaps (needs_revalidation, expired, missing) the scope or the subject
    has. Only the subject reading their own report gets the gap statements."""

    class InputSerializer(serializers.Serializer):
        scope = serializers.CharField(max_length=500, required=False, default="/")
        subject = serializers.CharField(max_length=200, required=False)
        peer_key = serializers.CharField(max_length=200, required=False)

    @extend_schema(operation_id="v1_readiness_retrieve", parameters=[InputSerializer])
    def get(self, request: Request) -> Response:
        params = request.query_params
        data = self.InputSerializer(data={k: params.get(k) for k in params})
        data.is_valid(raise_exception=True)
        v = data.validated_data
        reader = selectors.reader_for(principal=principal_of(request),
                                      peer_key=v.get("peer_key"))
        scope = selectors.scope_for_read(reader=reader, path=v["scope"])
        subject = None
        if v.get("subject"):
            subject = Peer.objects.filter(account_id=reader.account_id,
                                          key=v["subject"]).first()
            if subject is None:
                raise ApplicationError("unknown_subject",
                                       f"no peer with key {v['subject']!r}")
        return Response(readiness(reader=reader, scope=scope, subject=subject))
