"""The crash counter (issue 34 item 3): a document version counts the starts of its
processing as a message does (processing_attempts), and both stamp the last start
(processing_started_at, extraction_started_at), so the sweeper sets aside a source whose
work keeps being cut off instead of re-enqueueing it for ever.

A version set aside before this migration had one attempt (it raised once): the backfill
says so, so the administrators' listing does not show it with none.
"""

from django.db import migrations, models


def count_failed_versions(apps, schema_editor):
    # Each Account is entered as RLS requires (as 0018 does).
    with schema_editor.connection.cursor() as cur:
        cur.execute("SELECT set_config('memhouse.account_scan', 'on', true)")
        cur.execute("SELECT id FROM memhouse_account")
        accounts = [row[0] for row in cur.fetchall()]
        cur.execute("SELECT set_config('memhouse.account_scan', '', true)")
        for account_id in accounts:
            cur.execute("SELECT set_config('memhouse.account_id', %s, true)", [str(account_id)])
            cur.execute("UPDATE memhouse_document_version SET processing_attempts = 1 "
                        "WHERE processing_failed_at IS NOT NULL AND processing_attempts = 0")
        cur.execute("SELECT set_config('memhouse.account_id', '', true)")


class Migration(migrations.Migration):

    dependencies = [("knowledge", "0020_knowledge_named_entity")]

    operations = [
        migrations.AddField(
            model_name="documentversion", name="processing_attempts",
            field=models.PositiveIntegerField(default=0)),
        migrations.AddField(
            model_name="documentversion", name="processing_started_at",
            field=models.DateTimeField(blank=True, null=True)),
        migrations.AddField(
            model_name="message", name="extraction_started_at",
            field=models.DateTimeField(blank=True, null=True)),
        migrations.RunPython(count_failed_versions, migrations.RunPython.noop),
    ]
