"""OpenAPI for thin APIViews: request bodies come from each view's nested
`InputSerializer`, and every operation documents the one error shape."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField(help_text="machine-readable, e.g. unknown_peer_key")
    message = serializers.CharField(help_text="for people")
    details = serializers.JSONField(required=False, help_text="per-field errors")


class ErrorSerializer(serializers.Serializer):
    error = ErrorBodySerializer()


class MemhouseAutoSchema(AutoSchema):
    def get_request_serializer(self) -> Any:
        if self.method not in ("POST", "PUT", "PATCH"):
            return None
        return getattr(self.view, "InputSerializer", None)  # None: the body is empty

    def get_response_serializers(self) -> Any:
        output = getattr(self.view, "OutputSerializer", None)
        ok = output if output is not None else OpenApiResponse(
            description="JSON object; see the example and docs/api-guide.md")
        code = "201" if self.method == "POST" and output is not None else "200"
        return {
            code: ok,
            "400": OpenApiResponse(ErrorSerializer, description="invalid input"),
            "401": OpenApiResponse(ErrorSerializer, description="no or bad credential"),
            "403": OpenApiResponse(ErrorSerializer, description="not allowed"),
            "404": OpenApiResponse(ErrorSerializer, description="missing or not yours"),
            "409": OpenApiResponse(ErrorSerializer, description="conflicts with state"),
            "429": OpenApiResponse(ErrorSerializer, description="rate limited"),
        }

    def _get_serializer(self) -> Any:
        # Our APIViews declare no serializer_class; bodies are described explicitly.
        return None

    def _get_serializer_name(self, serializer: Any, direction: Any,
                             bypass_extensions: bool = False) -> str:
        # Nested classes share the name InputSerializer; name components after the view.
        name = str(super()._get_serializer_name(serializer, direction, bypass_extensions))
        if type(serializer).__name__ == "InputSerializer" or name.startswith("Input"):
            view = type(self.view).__name__.removesuffix("Api")
            return f"{view}{name}"
        return name


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "memhouse.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "http", "scheme": "bearer",
                "description": "An API key or login token: mh_<prefix>_<secret>"}


class ConsoleSessionScheme(OpenApiAuthenticationExtension):
    target_class = "memhouse.authentication.ConsoleSessionAuthentication"
    name = "consoleSession"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "apiKey", "in": "cookie", "name": "sessionid"}


def postprocess_examples(result: dict[str, Any], generator: Any, request: Any,
                         public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: each operation gets its summary, its request
    and response examples from memhouse.schema_examples, its real success status (201/202 where the
    view answers so) and an example of the error shape under every error response."""
    from memhouse.schema_examples import ERRORS, EXAMPLES, SUMMARIES

    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            if not isinstance(operation, dict) or "operationId" not in operation:
                continue
            example = EXAMPLES.get(operation["operationId"])
            if operation["operationId"] in SUMMARIES:
                operation["summary"] = SUMMARIES[operation["operationId"]]
            responses = operation.setdefault("responses", {})
            for code, body in ERRORS.items():
                content = responses.get(code, {}).get("content", {}).get("application/json")
                if content is not None:
                    content["examples"] = {code: {"value": body}}
            if example is None:
                continue
            request_body = operation.get("requestBody", {}).get("content", {})
            if "request" in example and "application/json" in request_body:
                request_body["application/json"]["examples"] = {
                    "example": {"value": example["request"]}}
            status = str(example["status"])
            success = next((c for c in list(responses) if c.startswith("2")), None)
            documented = responses.pop(success) if success is not None else {}
            content = documented.setdefault("content", {}).setdefault("application/json", {})
            content.setdefault("schema", {"type": "object"})
            content["examples"] = {"example": {"value": example["response"]}}
            responses[status] = documented
            operation["responses"] = dict(sorted(responses.items()))
    return result
