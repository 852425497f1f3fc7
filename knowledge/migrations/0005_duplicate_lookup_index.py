"""An index for Gate A's duplicate lookup (same normalised text, subject and scope), so
ingest cost does not grow with the number of statements in a scope."""

from django.db import migrations

NORMALISED = (
    "rtrim(regexp_replace(lower(btrim(statement)), '\\s+', ' ', 'g'), '.!')"
)


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0004_chunk_rls_and_fts")]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX knowledge_duplicate_lookup ON memhouse_knowledge "
            f"(account_id, scope_id, subject_peer_id, ({NORMALISED}))",
            "DROP INDEX IF EXISTS knowledge_duplicate_lookup",
        ),
    ]
