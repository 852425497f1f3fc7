"""MCP over Streamable HTTP at /mcp/, served by the Django app itself.

The web process is WSGI (gunicorn sync workers in the Dockerfile, runserver under
`manage.py serve`), so the endpoint is a plain Django view that implements the stateless,
JSON-response mode of Streamable HTTP: each POST carries one JSON-RPC message and gets
its answer as `application/json` (a notification gets 202), with no session to keep
between requests and no server-sent-event stream (GET and DELETE are 405, as the spec
allows). The view drives the MCP SDK's own transport and session manager for that one
request (`anyio.run` on the request's thread), so protocol handling - version headers,
Accept and Content-Type checks, JSON-RPC errors - is the SDK's, not ours.

The tools are memhouse.mcp.tools, the same definitions as the stdio server. Each tool
call is handed, in process, to this app's REST API through a WSGI transport with the
caller's own key, so authentication, act-for, scope grants, rate limits, usage metering
and error codes are exactly the REST API's. The endpoint itself checks the key first
(401 in the API's error shape), so nothing - not even the tool list - answers without
one.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import anyio
import httpx
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.db import connections, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from rest_framework import exceptions

from knowledge.credentials import principal_for_key
from memhouse.client import MemHouseClient
from memhouse.mcp.tools import build_server

# Longest a tool call may take in process (ask with a model is the slow one); the
# gunicorn worker timeout bounds the whole request anyway.
TOOL_TIMEOUT_SECONDS = 60.0
_wsgi_app: WSGIHandler | None = None


def _app() -> WSGIHandler:
    global _wsgi_app
    if _wsgi_app is None:
        _wsgi_app = WSGIHandler()
    return _wsgi_app


class _InProcessTransport(httpx.WSGITransport):
    """Requests to this app's own REST API, answered in the calling thread. The tool runs
    in a worker thread of the MCP event loop; the database connection Django opened for
    it there is closed once the answer is in, so no thread keeps one."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return super().handle_request(request)
        finally:
            connections.close_all()


def _error(code: str, message: str, status: int, **headers: str) -> JsonResponse:
    response = JsonResponse({"error": {"code": code, "message": message}}, status=status)
    for name, value in headers.items():
        response[name] = value
    return response


def _api_key(request: HttpRequest) -> str:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.headers.get("X-API-Key", "").strip()


def _authenticate(raw: str) -> JsonResponse | None:
    """The REST API's 401s, before any MCP message is read."""
    challenge = {"WWW-Authenticate": 'Bearer realm="memhouse"'}
    if not raw:
        return _error("not_authenticated", "Authentication credentials were not provided: "
                      "send Authorization: Bearer mh_...", 401, **challenge)
    try:
        with transaction.atomic():
            principal_for_key(raw)
    except exceptions.AuthenticationFailed as exc:
        return _error("authentication_failed", str(exc.detail), 401, **challenge)
    return None


def _asgi_scope(request: HttpRequest) -> dict[str, Any]:
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1"))
               for k, v in request.headers.items()]
    host, _, port = request.get_host().rpartition(":")
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
        "method": request.method, "scheme": request.scheme, "path": request.path,
        "raw_path": request.path.encode(), "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "server": (host or request.get_host(), int(port) if port.isdigit() else 80),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


async def _serve_one(manager: StreamableHTTPSessionManager, scope: dict[str, Any],
                     body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Run the SDK's Streamable HTTP handler on one request and collect its answer."""
    answered = anyio.Event()
    sent_body = False
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # the client "disconnects" only once it has its answer
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    async with manager.run():
        with anyio.fail_after(TOOL_TIMEOUT_SECONDS):
            await manager.handle_request(scope, receive, send)
    return status, headers, b"".join(chunks)


@csrf_exempt
@transaction.non_atomic_requests  # each tool call is its own REST request and transaction
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    refused = _authenticate(_api_key(request))
    if refused is not None:
        return refused
    if request.method != "POST":
        return _error("method_not_allowed", "this endpoint is stateless: POST one JSON-RPC "
                      "message per request (no event stream, no session to delete)", 405,
                      Allow="POST")
    origin = f"{request.scheme}://{request.get_host()}"
    client = MemHouseClient(origin, _api_key(request), retries=0,
                            timeout=TOOL_TIMEOUT_SECONDS,
                            transport=_InProcessTransport(app=_app()))
    server = build_server(client)
    manager = StreamableHTTPSessionManager(
        # The low-level server behind MCPServer: the manager drives it per request.
        app=server._lowlevel_server, json_response=True, stateless=True,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            # Django has already checked Host against ALLOWED_HOSTS.
            allowed_hosts=[request.headers.get("Host", "")],
            allowed_origins=[origin, *settings.CSRF_TRUSTED_ORIGINS]))
    try:
        status, headers, body = anyio.run(_serve_one, manager, _asgi_scope(request),
                                          request.body)
    except TimeoutError:
        return _error("timeout", f"the tool call took longer than {TOOL_TIMEOUT_SECONDS:g} "
                      "seconds", 504)
    finally:
        client.close()
    response = HttpResponse(body, status=status)
    for name, value in headers:
        key = name.decode("latin-1")
        if key.lower() != "content-length":
            response[key] = value.decode("latin-1")
    return response
