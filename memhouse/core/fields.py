"""Serializer fields shared by the API's input serializers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from memhouse.core.errors import ApplicationError


def is_naive(value: Any) -> bool:
    """True for a datetime, or an ISO 8601 string, that names no time zone."""
    if isinstance(value, str):
        try:
            value = parse_datetime(value.strip())
        except ValueError:  # well-formed but impossible: the field reports it
            return False
    return isinstance(value, datetime) and (value.tzinfo is None
                                            or value.utcoffset() is None)


class AwareDateTimeField(serializers.DateTimeField):
    """A DateTimeField that refuses times without a time zone (400 `naive_datetime`)
    instead of silently reading them in the server's zone: "10:00" means a different
    instant on every deployment. The Python client refuses them before sending, too."""

    def to_internal_value(self, value: Any) -> datetime:
        if is_naive(value):
            raise ApplicationError(
                "naive_datetime",
                f"{self.field_name} must include a time zone, e.g. 2026-05-01T10:00:00Z or "
                "2026-05-01T10:00:00+02:00; a time without one is ambiguous",
                details={"field": self.field_name})
        return super().to_internal_value(value)
