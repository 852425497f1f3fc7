"""Chromium for the browser tests: where it is, how it is launched, and what happens
when it is missing (the `sync_playwright` fixture in conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def require_browser(chromium: str = CHROMIUM, env: Mapping[str, str] = os.environ) -> Any:
    """Playwright's `sync_playwright` once Chromium (Debian's, never `playwright install`)
    and Playwright are there. When one is missing a browser test fails under CI=true, so a
    CI run without them cannot pass by skipping, and skips locally; the message says how
    to install what is missing either way."""
    missing = []
    if not Path(chromium).exists():
        missing.append(f"{chromium} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("the playwright package (pip install -e '.[dev]')")
        sync_playwright = None  # type: ignore[assignment]
    if missing:
        reason = "browser tests need " + " and ".join(missing)
        if env.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail(f"{reason}; CI=true, so this fails instead of skipping")
        pytest.skip(reason)
    return sync_playwright


def sign_in(pg: Any, base_url: str, username: str, password: str) -> None:
    """Sign in through the console's login form, as a person would, and land home."""
    pg.goto(f"{base_url}/console/login/")
    pg.get_by_label("Username").fill(username)
    pg.get_by_label("Password", exact=True).fill(password)
    pg.get_by_role("button", name="Sign in").click()
    pg.wait_for_url(f"{base_url}/console/")
