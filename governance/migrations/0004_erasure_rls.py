"""Tenant RLS for the erasure ledger and deduction runs; the ledger is append-only."""

from django.db import migrations

from memhouse.core.rls import protect_tables

APPEND_ONLY = """
CREATE TRIGGER erasure_record_append_only BEFORE UPDATE OR DELETE ON memhouse_erasure_record
    FOR EACH ROW EXECUTE FUNCTION memhouse_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0003_erasure_and_deduction"),
        ("knowledge", "0002_rls_and_guards"),  # memhouse_append_only()
    ]

    operations = [
        *protect_tables("memhouse_erasure_record", "memhouse_deduction_run"),
        migrations.RunSQL(
            APPEND_ONLY,
            "DROP TRIGGER IF EXISTS erasure_record_append_only ON memhouse_erasure_record;"),
    ]
