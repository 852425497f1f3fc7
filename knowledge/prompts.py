"""Durable prompt identities of model-derived statements.

A statement a generation model derived (a deduction) records the prompt that produced it
as `<operation>:<digest>`: `operation` is the typed operation lineage reports
(`reasoning_synthesis`), `digest` the SHA-256 of the prompt's version string, its system
text and its answer schema. The identity stays the same while the prompt does (every
statement one synthesis is split into shares it), changes with any edit to the prompt,
and keeps the version string private: only the digest is stored, and only the operation
is ever returned (retrieval.lineage).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Typed operations a prompt identity may name; anything else is not trusted as one.
OPERATIONS = frozenset({"reasoning_synthesis"})
SEPARATOR = ":"


def prompt_identity(operation: str, *, version: str, system: str,
                    schema: dict[str, Any]) -> str:
    if operation not in OPERATIONS:
        raise ValueError(f"unknown typed operation {operation!r}")
    body = json.dumps({"version": version, "system": system, "schema": schema},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return f"{operation}{SEPARATOR}{hashlib.sha256(body.encode('utf-8')).hexdigest()}"


def operation_of(identity: str | None) -> str | None:
    """The typed operation a stored identity names, or None (no identity, or not one of
    ours)."""
    operation, sep, digest = (identity or "").partition(SEPARATOR)
    if not sep or operation not in OPERATIONS or len(digest) != 64:
        return None
    return operation
