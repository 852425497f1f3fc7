"""Typed Python client for the MemHouse REST API (v1).

    from memhouse.client import MemHouseClient, Message, NotFoundError
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
