"""The API's JSON parser: DRF's, with a nesting limit.

Python's json module recurses per nesting level, so 100,000 `[` raise RecursionError (a
500 on every JSON endpoint, the unauthenticated /auth/token included), and a document
a little under the interpreter's limit parses but then breaks whatever walks it next
(validation, jsonb encoding). No request of this API nests deeper than a few levels;
MEMHOUSE_MAX_JSON_DEPTH (default 32) bounds it, and anything deeper is 400
`malformed_request`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

DEFAULT_MAX_DEPTH = 32


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """True when `value` nests containers more than `limit` deep (iterative: never
    recurses, whatever the input)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (dict, list)))
    return False


def max_json_depth() -> int:
    return int(getattr(settings, "MEMHOUSE_MAX_JSON_DEPTH", DEFAULT_MAX_DEPTH))


class DepthLimitedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(self._message()) from exc
        if json_depth_exceeds(data, max_json_depth()):
            raise ParseError(self._message())
        return data

    @staticmethod
    def _message() -> str:
        return f"JSON parse error - nested more than {max_json_depth()} levels deep"
