"""The Account context that PostgreSQL row-level security reads.

Every durable table's policy compares `account_id` with the transaction-local setting
`memhouse.account_id`. It is set with `set_config(..., is_local => true)`, so it ends with
the transaction and a pooled connection can never carry an Account into the next request
or task. With the setting absent, policies match nothing: SELECT returns no rows and
INSERT is refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction

ACCOUNT_SETTING = "memhouse.account_id"
# Narrow, transaction-local lookups that policies allow before the Account is known.
CREDENTIAL_PREFIX_SETTING = "memhouse.credential_prefix"
AUTH_USER_SETTING = "memhouse.auth_user_id"
ACCOUNT_SCAN_SETTING = "memhouse.account_scan"


class TenancyError(RuntimeError):
    pass


def _set(name: str, value: str, using: str = DEFAULT_DB_ALIAS) -> None:
    with connections[using].cursor() as cur:
        cur.execute("SELECT set_config(%s, %s, true)", [name, value])


def current_account_id(using: str = DEFAULT_DB_ALIAS) -> uuid.UUID | None:
    with connections[using].cursor() as cur:
        cur.execute("SELECT nullif(current_setting(%s, true), '')", [ACCOUNT_SETTING])
        row = cur.fetchone()
    return uuid.UUID(row[0]) if row and row[0] else None


def set_account(account_id: uuid.UUID | str, *, using: str = DEFAULT_DB_ALIAS,
                local: dict[str, str] | None = None) -> None:
    """Bind the current transaction (on connection `using`: the read replica's too) to one
    Account. Refuses a switch inside one transaction.

    `local` sets further transaction-local settings (e.g. statement_timeout) in the same
    statement: one round trip, which the search fan-out pays once per strategy."""
    if not connections[using].in_atomic_block:
        raise TenancyError("set_account needs a transaction (the setting is transaction-local)")
    account = str(uuid.UUID(str(account_id)))
    extra = sorted((local or {}).items())
    # Check and set in one statement: each setting is set only when the transaction holds
    # no Account or this one; otherwise nothing is set and NULL comes back.
    free = "coalesce(nullif(current_setting(%s, true), ''), %s) = %s"
    sql = "SELECT " + ", ".join(f"CASE WHEN {free} THEN set_config(%s, %s, true) END"
                                for _ in range(1 + len(extra)))
    params = [v for name, value in [(ACCOUNT_SETTING, account), *extra]
              for v in (ACCOUNT_SETTING, account, account, name, value)]
    with connections[using].cursor() as cur:
        cur.execute(sql, params)
        bound = cur.fetchone()[0]
    if bound is None:
        raise TenancyError("this transaction is already bound to another Account")


@contextmanager
def account_context(account_id: uuid.UUID | str, *, durable: bool = False) -> Iterator[None]:
    """Run a block in one transaction bound to `account_id` (workers, commands, tests).

    ``durable=True`` for work that must be the outermost transaction (a worker's batch:
    it commits when it returns, so a later batch never redoes it); Django refuses to
    nest it in a caller's transaction instead of silently becoming a savepoint."""
    with transaction.atomic(durable=durable):
        set_account(account_id)
        yield


@contextmanager
def narrow_lookup(setting: str, value: str) -> Iterator[None]:
    """Allow one pre-authentication lookup (credential prefix or login user), then close it."""
    if not connection.in_atomic_block:
        raise TenancyError("narrow lookups need a transaction")
    _set(setting, value)
    try:
        yield
    finally:
        _set(setting, "")


def rebind_account_for_tests(account_id: uuid.UUID | str | None) -> None:
    """Tests only: point the current transaction at another Account (or none).

    Production code never switches Accounts inside a transaction (set_account refuses);
    tests use this to attack isolation from inside one test transaction.
    """
    _set(ACCOUNT_SETTING, str(account_id) if account_id else "")
