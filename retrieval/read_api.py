"""The agent read APIs beyond search: context, ask, lineage and the stable profile.

Thin views in the style of retrieval.api.SearchApi: validate, resolve the reader
(`peer_key` names the peer the read is for; an unknown key is 400 `unknown_peer_key`),
authorise the scope (unauthorised and missing scopes are the same 404), call the domain
function. RLS confines everything to the caller's Account, so another Account's scopes,
sessions and statements are 404s.
"""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from knowledge import usage
from knowledge.selectors import reader_for, scope_for_read, session_for_read
from memhouse.core.db_router import replica_safe
from memhouse.core.errors import ApplicationError
from memhouse.core.principal import principal_of
from retrieval import context as context_mod
from retrieval import lineage as lineage_mod
from retrieval.api import refuse_strategy_override
from retrieval.ask import EFFORTS, ask
from retrieval.profiles import resolve_profile
from retrieval.stable_profile import stable_profile


class ContextApi(APIView):
    """Text to paste into a prompt, at most `budget_chars` long, and the same content
    structured. Every line is dated: `[7 May 2023]` (valid time at the precision it was
    stated: a day, `May 2023`, `2022`, `29 May - 4 June 2023`, `since ...`, `until ...`),
    else `[said 8 May 2023]` (when its source was said), else `[recorded ...]`.

    With a `query` the knowledge head is the scope's search profile (balanced unless the
    scope sets another), as deep as the budget allows; under a statement whose source turn
    holds detail the statement lost comes that turn, dated and with its speaker
    (`  > [8 May 2023] Caroline: "..."`, at most 300 characters around the sentence nearest
    the question; once per message; only when the reader may see every statement drawn
    from it and none was refused, redacted, retracted or superseded; a claim refused only as
    a fragment, small talk or a repeat does not count). Entity cards, the
    session summary, the peer profile and scope cards follow, with a query only their
    lines that share its words. A line the text already says is left out; `left_out`
    counts what did not fit (`over_budget`, `excerpts_over_budget`), the repeats
    (`duplicates`) and names the sections none of whose lines was placed. Each entry has
    `when`, and `source` (message_id, speaker, said_at, excerpt) when its excerpt is in
    the text. `projection_cache_hit` and `fast_fallback` report the projections; no
    generation model is called."""

    class InputSerializer(serializers.Serializer):
        scope = serializers.CharField(max_length=500)
        peer_key = serializers.CharField(max_length=200, required=False, allow_null=True)
        session = serializers.CharField(max_length=200, required=False, allow_null=True)
        query = serializers.CharField(max_length=2000, required=False, allow_blank=True,
                                      allow_null=True, default="")
        budget_chars = serializers.IntegerField(min_value=context_mod.MIN_BUDGET,
                                                max_value=context_mod.MAX_BUDGET,
                                                default=context_mod.DEFAULT_BUDGET)

    @replica_safe
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        reader = reader_for(principal=principal_of(request), peer_key=v.get("peer_key"))
        scope = scope_for_read(reader=reader, path=v["scope"])
        session = (session_for_read(reader=reader, scope=scope, external_id=v["session"])
                   if v.get("session") else None)
        body = context_mod.get_context(reader=reader, scope=scope, session=session,
                                       query=v.get("query") or "", budget_chars=v["budget_chars"])
        usage.record(principal_of(request), "context")
        return Response(body)


class AskApi(APIView):
    class InputSerializer(serializers.Serializer):
        query = serializers.CharField(max_length=2000, trim_whitespace=True)
        scope = serializers.CharField(max_length=500)
        peer_key = serializers.CharField(max_length=200, required=False, allow_null=True)
        effort = serializers.ChoiceField(choices=EFFORTS, required=False, allow_null=True)
        include_source_recall = serializers.BooleanField(required=False, default=False)

    def post(self, request: Request) -> Response:
        refuse_strategy_override(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        reader = reader_for(principal=principal_of(request), peer_key=v.get("peer_key"))
        scope = scope_for_read(reader=reader, path=v["scope"])
        # Fixed ask retrieves with thorough whatever the scope searches with (the seed);
        # the scope chain's overrides of thorough still apply.
        profile = resolve_profile(requested="thorough", scope=scope, default="thorough")
        body = ask(reader=reader, scope=scope, query=v["query"], profile=profile,
                   effort=v.get("effort"), include_source_recall=v["include_source_recall"])
        usage.record(principal_of(request), "ask")
        return Response(body)


class LineageApi(APIView):
    """Provenance (source messages and document versions), typed relations and supersession
    around one statement, bounded by `depth`, `fan_out` and `max_nodes`; rows the reader may
    not see are opaque `hidden`/`missing` references. Each knowledge node names the typed
    `operation` that produced it: `extraction`, `document_extraction`, `consolidation`, or
    `reasoning_synthesis` for a deduction, read from the durable prompt identity the
    deduction was written with (a digest of the prompt's version, text and schema). The
    identity and the prompt's version string stay private: neither is ever returned."""

    class InputSerializer(serializers.Serializer):
        knowledge_id = serializers.UUIDField()
        peer_key = serializers.CharField(max_length=200, required=False, allow_null=True)
        depth = serializers.IntegerField(min_value=1, max_value=lineage_mod.MAX_DEPTH, default=2)
        fan_out = serializers.IntegerField(min_value=1, max_value=lineage_mod.MAX_FAN_OUT,
                                           default=8)
        max_nodes = serializers.IntegerField(min_value=1, max_value=lineage_mod.MAX_NODES,
                                             default=50)

    @replica_safe
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        reader = reader_for(principal=principal_of(request), peer_key=v.get("peer_key"))
        body = lineage_mod.lineage(reader=reader, knowledge_id=v["knowledge_id"],
                                   depth=v["depth"], fan_out=v["fan_out"],
                                   max_nodes=v["max_nodes"])
        usage.record(principal_of(request), "lineage")
        return Response(body)


class StableProfileApi(APIView):
    class InputSerializer(serializers.Serializer):
        peer_key = serializers.CharField(max_length=200, required=False, allow_null=True)
        scope = serializers.CharField(max_length=500, required=False, allow_null=True)

    @replica_safe
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        reader = reader_for(principal=principal_of(request), peer_key=v.get("peer_key"))
        scope = scope_for_read(reader=reader, path=v["scope"]) if v.get("scope") else None
        profile = stable_profile(reader=reader, scope=scope)
        if profile is None:
            raise ApplicationError("peer_required", "a stable profile is about a peer: this "
                                   "credential has none, so name one with peer_key")
        usage.record(principal_of(request), "stable_profile")
        return Response(profile)
