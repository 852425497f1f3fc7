"""docs/deploy.md documents every environment variable the server reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READ = re.compile(r"(?:env_(?:str|bool|int|float|list)|os\.environ\.get|os\.environ\.setdefault)"
                  r"\(\s*\"([A-Z][A-Z0-9_]+)\"")
NOT_SETTINGS = {"DJANGO_SETTINGS_MODULE"}


def variables_read() -> set[str]:
    names: set[str] = set()
    # memhouse/mcp/ is not scanned: the stdio server reads client-side variables
    # (docs/integrations.md).
    for path in [*(ROOT / "memhouse").glob("*.py"),
                 *(ROOT / "memhouse" / "core").glob("*.py")]:
        names |= set(READ.findall(path.read_text(encoding="utf-8")))
    return names - NOT_SETTINGS


def documented() -> set[str]:
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    table = text.split("<!-- settings-table", 1)[1].split("\n", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row)}


def test_every_variable_the_server_reads_is_in_the_deploy_table():
    read = variables_read()
    assert {"DATABASE_URL", "REDIS_URL", "MEMHOUSE_SECRET_KEY", "MEMHOUSE_ALLOWED_HOSTS",
            "MEMHOUSE_LLM_BASE_URL", "MEMHOUSE_BEAT_HEARTBEAT_FILE"} <= read
    missing = sorted(read - documented())
    assert not missing, f"add these to docs/deploy.md's settings table: {missing}"
    stale = sorted(documented() - read)
    assert not stale, f"docs/deploy.md documents variables nothing reads: {stale}"


def test_the_readme_links_the_deploy_guide():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/deploy.md" in readme
