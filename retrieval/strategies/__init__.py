"""Retrieval strategies; see base.py for the interface."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def entity_match_or_none() -> Callable[[Any], Any] | None:
    """The entity strategy when the entity index is installed."""
    try:
        from retrieval.strategies.entity_match import run
    except ImportError:
        return None
    return run
