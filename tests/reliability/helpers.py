"""Helpers for the fault and bad-input half of the release suite (issue #9)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from django.db import connection


def api(live_server: Any, key: str | None, method: str, path: str, *,
        timeout: float = 60, **kwargs: Any) -> httpx.Response:
    """One real HTTP request to the live server; `path` is below /api/v1/."""
    headers = kwargs.pop("headers", {})
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.request(method, f"{live_server.url}/api/v1/{path.lstrip('/')}",
                         headers=headers, timeout=timeout, **kwargs)


def assert_error(r: httpx.Response, status: int | tuple[int, ...], code: str | None = None
                 ) -> dict[str, Any]:
    """A 4xx/503 in the one error shape: a machine-readable code and a human message."""
    statuses = (status,) if isinstance(status, int) else status
    assert r.status_code in statuses, (r.status_code, r.text[:500])
    assert r.headers["content-type"].startswith("application/json"), r.headers
    error = r.json()["error"]
    assert isinstance(error["code"], str) and error["code"].isidentifier(), error
    assert isinstance(error["message"], str) and error["message"].strip(), error
    if code is not None:
        assert error["code"] == code, error
    return dict(error)


@contextmanager
def row_trigger(name: str, table: str, when: str, condition: str, action: str
                ) -> Iterator[Callable[[], None]]:
    """A real fault injected in PostgreSQL for the block: a row trigger `name` on `table`
    (BEFORE `when`) that runs `action` (PL/pgSQL) for rows meeting `condition`, as a
    bug or bad data anywhere in processing would meet it. Yields a function that drops
    it early ("the cause fixed"); dropped at the end in any case."""
    create = f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF {condition} THEN
        {action};
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER {name} BEFORE {when} ON {table} FOR EACH ROW EXECUTE FUNCTION {name}();
"""

    def remove() -> None:
        with connection.cursor() as cur:
            cur.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}; "
                        f"DROP FUNCTION IF EXISTS {name}();")

    with connection.cursor() as cur:
        cur.execute(create)
    try:
        yield remove
    finally:
        remove()


# Fails the row's update with a check violation: the task sets its source aside with the
# error's class and message.
_POISONED = "RAISE EXCEPTION 'poisoned for the test' USING ERRCODE = 'check_violation'"


def poisoned_messages() -> Any:
    """The pipeline's final write (marking a message extracted) fails for a message that
    names Zanzibar."""
    return row_trigger("test_poison_message", "memhouse_message", "UPDATE",
                       "NEW.extracted_at IS NOT NULL AND NEW.text LIKE '%Zanzibar%'",
                       _POISONED)


def poisoned_versions() -> Any:
    """Marking a document version processed fails when its text names Zanzibar."""
    return row_trigger("test_poison_version", "memhouse_document_version", "UPDATE",
                       "NEW.processed_at IS NOT NULL AND NEW.text LIKE '%Zanzibar%'",
                       _POISONED)
