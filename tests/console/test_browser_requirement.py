"""Browser tests cannot pass by skipping in CI (issue 17, item 4): without Chromium or
Playwright they fail under CI=true and skip locally, with the same message saying how to
install what is missing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.console.browser import require_browser

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_chromium_fails_under_ci_with_how_to_install_it(tmp_path: Path) -> None:
    absent = str(tmp_path / "chromium")
    for ci in ("true", "1"):
        with pytest.raises(pytest.fail.Exception) as failed:
            require_browser(absent, env={"CI": ci})
        assert f"{absent} (apt-get install chromium)" in str(failed.value)


def test_a_missing_chromium_skips_locally_with_the_same_message(tmp_path: Path) -> None:
    absent = str(tmp_path / "chromium")
    for env in ({}, {"CI": "false"}, {"CI": ""}):
        with pytest.raises(pytest.skip.Exception) as skipped:
            require_browser(absent, env=env)
        assert f"{absent} (apt-get install chromium)" in str(skipped.value)


def test_with_chromium_present_the_browser_tests_get_playwright(tmp_path: Path) -> None:
    fake = tmp_path / "chromium"
    fake.write_text("")  # only its presence is checked before launching
    sync_playwright = require_browser(str(fake), env={"CI": "true"})
    assert callable(sync_playwright)


def test_ci_runs_pytest_with_ci_true_and_installs_chromium() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"apt-get install -y -qq chromium", script)
    before_pytest = script[:script.index("-m pytest")]
    assert re.search(r"^export CI=true$", before_pytest, re.M), "CI=true is not exported"
