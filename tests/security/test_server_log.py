"""The embedded PostgreSQL server's log keeps no statement text or values from failing
statements (issue #16, Low): a credential insert that fails on a duplicate prefix used to
leave its secret hash in the log (STATEMENT: INSERT ... and DETAIL: Key (prefix)=(...)),
beyond the reach of erasure."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import DataError, IntegrityError, transaction

from knowledge import services
from knowledge.models import Credential
from memhouse.core.tenancy import account_context

pytestmark = pytest.mark.django_db(transaction=True)


def _server_log() -> Path:
    from memhouse.core.env import env_str

    if env_str("DATABASE_URL"):
        pytest.skip("only the embedded server's log is under test")
    from memhouse.core.embedded_db import ensure_embedded

    log = ensure_embedded(settings.DATA_DIR).data_dir / "pgdata" / "log"
    if not log.exists():
        pytest.skip("the embedded server writes no log file here")
    return log


def test_a_failing_statement_leaves_no_values_in_the_server_log(committed_world):
    log = _server_log()
    w = committed_world
    start = log.stat().st_size
    secret_hash = secrets.token_hex(32)
    with account_context(w.account.id):
        taken = Credential.objects.first()
        assert taken is not None
        with pytest.raises(IntegrityError), transaction.atomic():
            Credential.objects.create(account_id=w.account.id, peer=w.agent, kind="api_key",
                                      prefix=taken.prefix, secret_hash=secret_hash)
        # A second kind of failure: a value the column type refuses.
        with pytest.raises(DataError), transaction.atomic():
            services.Peer.objects.filter(pk=w.agent.pk).update(
                display_name="x" * 10_000 + secret_hash)
    time.sleep(0.5)  # the server writes its log asynchronously to us
    with log.open("rb") as fh:
        fh.seek(start)
        written = fh.read().decode("utf-8", "replace")
    assert "duplicate key value" in written  # the failure itself is still logged
    assert secret_hash not in written
    assert taken.prefix not in written
    assert "STATEMENT:" not in written and "INSERT INTO" not in written
