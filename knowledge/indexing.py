"""Rows other apps derive from a processed source before a search finds it.

Retrieval writes vectors after the pipeline has processed a message or document version;
until then a search finds the new statements by their words only. The owning app
registers how many of some statements and messages still wait for such rows
(`register_index_pending`, at start-up), so a write's `wait` (knowledge.selectors
messages_pending / versions_pending) ends when the write can be read back by meaning too.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

IndexPending = Callable[[uuid.UUID, list[Any], list[Any]], int]
_index_pending: list[IndexPending] = []


def register_index_pending(count: IndexPending) -> None:
    if count not in _index_pending:
        _index_pending.append(count)


def registered() -> bool:
    return bool(_index_pending)


def pending(account_id: uuid.UUID, *, knowledge_ids: list[Any], message_ids: list[Any]) -> int:
    return sum(count(account_id, knowledge_ids, message_ids) for count in _index_pending)
