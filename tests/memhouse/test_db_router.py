"""The database router without a replica: nothing changes (tests/integrations/
test_read_replica.py runs it against a real standby)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connection, router
from django.test.utils import CaptureQueriesContext

import memhouse.settings as project_settings
from knowledge.models import Knowledge
from memhouse.core.db_router import REPLICA, read_alias, replica_configured, replica_reads

ROOT = Path(__file__).resolve().parents[2]


def test_without_a_replica_every_read_and_write_is_the_primarys(world: Any) -> None:
    assert not replica_configured()
    with CaptureQueriesContext(connection) as queries, replica_reads(world.account.id) as alias:
        assert alias == read_alias() == DEFAULT_DB_ALIAS
        assert router.db_for_read(Knowledge) == DEFAULT_DB_ALIAS
    assert len(queries) == 0  # no transaction, no check: the block costs nothing
    assert router.db_for_write(Knowledge) == DEFAULT_DB_ALIAS
    row = Knowledge(account_id=world.account.id)
    row._state.db = REPLICA  # even a row from elsewhere reads its relations here
    assert router.db_for_read(Knowledge, instance=row) == DEFAULT_DB_ALIAS
    assert router.allow_migrate(REPLICA, "knowledge") is False
    assert router.allow_migrate(DEFAULT_DB_ALIAS, "knowledge") is True


def test_the_replica_entry_is_a_read_only_mirror_of_the_primary() -> None:
    entry = project_settings.replica_database(
        "postgresql://memhouse@/memhouse?host=/run/standby&port=5433")
    assert (entry["NAME"], entry["USER"], entry["HOST"], entry["PORT"]) == (
        "memhouse", "memhouse", "/run/standby", "5433")
    # Its own read transactions only; a test run reads its test database through it.
    assert entry["ATOMIC_REQUESTS"] is False
    assert entry["TEST"] == {"MIRROR": "default"}
    with pytest.raises(ImproperlyConfigured, match="DATABASE_REPLICA_URL"):
        project_settings.replica_database("mysql://standby/memhouse")


def test_database_replica_url_adds_the_replica_connection() -> None:
    code = ("import json, django; django.setup(); from django.conf import settings; "
            "from django.db import connections; "
            "print(json.dumps([sorted(connections.settings), settings.DATABASES['replica'], "
            "settings.DATABASE_ROUTERS]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMHOUSE_")}
    # Settings only: neither server is connected to at import.
    env.update(DATABASE_URL="postgresql://nobody@127.0.0.1:1/none",
               DATABASE_REPLICA_URL="postgresql://memhouse:pw@standby.internal:5433/memhouse",
               DJANGO_SETTINGS_MODULE="memhouse.settings")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, text=True,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    aliases, replica, routers = json.loads(out.stdout.strip().splitlines()[-1])
    assert aliases == [DEFAULT_DB_ALIAS, REPLICA]
    assert (replica["HOST"], replica["PORT"], replica["USER"], replica["NAME"]) == (
        "standby.internal", "5433", "memhouse", "memhouse")
    assert routers == ["memhouse.core.db_router.ReplicaRouter"]
