"""POST /api/v1/search: thin view over retrieval.engine.search."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from knowledge import usage
from knowledge.selectors import reader_for, scope_for_read
from memhouse.core.db_router import replica_safe
from memhouse.core.errors import ApplicationError
from memhouse.core.fields import AwareDateTimeField
from memhouse.core.principal import principal_of
from retrieval import engine
from retrieval.metrics import record_search
from retrieval.profiles import resolve_profile, with_deadline
from retrieval.stable_profile import stable_profile


def refuse_strategy_override(request: Request) -> None:
    """Raw strategy selection is internal to evaluation; external callers choose a profile."""
    if isinstance(request.data, dict) and "strategies" in request.data:
        raise ApplicationError("strategy_override_forbidden",
                               "strategies come from the profile; choose a profile instead")


class SearchApi(APIView):
    class InputSerializer(serializers.Serializer):
        query = serializers.CharField(max_length=2000, trim_whitespace=True)
        scope = serializers.CharField(max_length=500, required=False, default="/")
        peer_key = serializers.CharField(max_length=200, required=False, allow_null=True)
        profile = serializers.CharField(max_length=40, required=False, allow_null=True)
        limit = serializers.IntegerField(min_value=1, max_value=engine.MAX_LIMIT, default=10)
        offset = serializers.IntegerField(min_value=0, max_value=1000, default=0)
        as_of = AwareDateTimeField(required=False, allow_null=True)
        deadline_ms = serializers.IntegerField(min_value=10, max_value=10_000, required=False)
        include_identity_profile = serializers.BooleanField(required=False, default=False)

    @replica_safe
    def post(self, request: Request) -> Response:
        refuse_strategy_override(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        principal = principal_of(request)
        reader = reader_for(principal=principal, peer_key=v.get("peer_key"))
        scope = scope_for_read(reader=reader, path=v["scope"])
        profile = resolve_profile(requested=v.get("profile"), scope=scope, default="balanced")
        if v.get("deadline_ms"):
            profile = with_deadline(profile, v["deadline_ms"])
        result = engine.search(reader=reader, scope=scope, query=v["query"], profile=profile,
                               limit=v["limit"], offset=v["offset"], as_of=v.get("as_of"))
        body = result.as_dict()
        usage.record(principal, "search")
        record_search(result.profile, result.strategies, result.retrieval_outcomes)
        if v["include_identity_profile"]:
            # Orientation only: appended beside the ranked list, never merged into it.
            body["identity_profile"] = stable_profile(reader=reader, scope=scope)
        return Response(body)
