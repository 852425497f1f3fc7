"""Helpers for the fault and bad-input half of the release suite (issue #9)."""

from __future__ import annotations

from typing import Any

import httpx


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
