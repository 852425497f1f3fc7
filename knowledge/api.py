"""Thin DRF views for accounts, peers and credentials."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from knowledge import services
from memhouse.authentication import principal_for_user, principal_of
from memhouse.errors import ApplicationError


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
        user = authenticate(request._request, username=data.validated_data["username"],
                            password=data.validated_data["password"])
        principal = principal_for_user(user) if user is not None else None
        if principal is None:
            raise ApplicationError("invalid_login", "unknown username or wrong password",
                                   status_code=401)
        cred, key = services.token_issue(peer=principal.peer)
        return Response({"token": key, "prefix": cred.prefix,
                         "expires_at": cred.expires_at, "peer_key": principal.peer.key},
                        status=201)


class WhoAmIApi(APIView):
    def get(self, request: Request) -> Response:
        p = principal_of(request)
        return Response({
            "peer_key": p.peer.key if p.peer else None,
            "peer_kind": p.peer.kind if p.peer else None,
            "via": p.via,
            "scopes": list(p.scope_paths),
            "curator": p.is_curator,
        })
