"""Typed Python client for the MemHouse REST API (v1).

    from memhouse.client import MemHouseClient, Message, NotFoundError

Framework adapters built on it, each behind an optional extra (docs/integrations.md):
memhouse.client.langgraph_store.MemHouseStore (`memhouse[langgraph]`, a LangGraph store)
and memhouse.client.agents_session (`memhouse[agents]`, an OpenAI Agents SDK session and
memory tools). They are not imported here, so the client needs neither framework.
"""

from memhouse.client.client import (
    DocumentDeleted,
    DocumentOut,
    DocumentPage,
    DocumentVersion,
    IngestedMessage,
    IngestResult,
    JSONDict,
    KnowledgePage,
    Me,
    MemHouseClient,
    Message,
    Page,
    PeerOut,
    ScopeOut,
    SearchCandidate,
    SearchPage,
    SearchResult,
)
from memhouse.client.errors import (
    AuthenticationError,
    ConflictError,
    MemHouseError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    TransportError,
    ValidationError,
)

__all__ = [
    "AuthenticationError",
    "ConflictError",
    "DocumentDeleted",
    "DocumentOut",
    "DocumentPage",
    "DocumentVersion",
    "IngestResult",
    "IngestedMessage",
    "JSONDict",
    "KnowledgePage",
    "Me",
    "MemHouseClient",
    "MemHouseError",
    "Message",
    "NotFoundError",
    "Page",
    "PeerOut",
    "PermissionDeniedError",
    "RateLimitedError",
    "ScopeOut",
    "SearchCandidate",
    "SearchPage",
    "SearchResult",
    "ServerError",
    "TransportError",
    "ValidationError",
]
