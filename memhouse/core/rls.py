"""Row-level security building blocks for migrations.

Every Account-owned table gets RLS ENABLED and FORCED (so the owning role is bound too)
and one policy comparing account_id with the transaction-local Account setting.
"""

from __future__ import annotations

from django.db import migrations

CURRENT_ACCOUNT_FN = """
CREATE OR REPLACE FUNCTION memhouse_current_account() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT nullif(current_setting('memhouse.account_id', true), '')::uuid
$$;
"""


def tenant_table_sql(table: str, column: str = "account_id") -> str:
    return f"""
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS tenant_isolation ON {table};
CREATE POLICY tenant_isolation ON {table}
    USING ({column} = memhouse_current_account())
    WITH CHECK ({column} = memhouse_current_account());
"""


def tenant_table_reverse_sql(table: str) -> str:
    return f"""
DROP POLICY IF EXISTS tenant_isolation ON {table};
ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;
ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;
"""


def protect_tables(*tables: str) -> list[migrations.RunSQL]:
    """Migration operations that put `tables` under tenant RLS."""
    return [migrations.RunSQL(tenant_table_sql(t), tenant_table_reverse_sql(t)) for t in tables]
