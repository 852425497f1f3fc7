"""A document version's processing marker (processed_at) and failure fields, as a
message's extracted_at / extraction_failed_at.

Before this migration the pipeline left no marker on a version. The backfill marks as
processed (at its creation time) every version with a statement drawn from it, and
every older version without one: its task ran on commit long ago, whether or not it
proposed anything. A version stored in the last ten minutes with no statement yet stays
unmarked, so a task still in flight processes it.
"""

from django.db import migrations, models


def mark_processed_versions(apps, schema_editor):
    # Each Account is entered as RLS requires (as 0010 does).
    with schema_editor.connection.cursor() as cur:
        cur.execute("SELECT set_config('memhouse.account_scan', 'on', true)")
        cur.execute("SELECT id FROM memhouse_account")
        accounts = [row[0] for row in cur.fetchall()]
        cur.execute("SELECT set_config('memhouse.account_scan', '', true)")
        for account_id in accounts:
            cur.execute("SELECT set_config('memhouse.account_id', %s, true)", [str(account_id)])
            cur.execute(
                "UPDATE memhouse_document_version v SET processed_at = v.created_at "
                "WHERE v.processed_at IS NULL AND (v.created_at < now() - interval '10 minutes'"
                " OR EXISTS (SELECT 1 FROM memhouse_knowledge_source s"
                " WHERE s.document_version_id = v.id))")
        cur.execute("SELECT set_config('memhouse.account_id', '', true)")


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0017_message_month_statistics'),
    ]

    operations = [
        migrations.AddField(
            model_name='documentversion',
            name='processed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='documentversion',
            name='processing_error',
            field=models.CharField(blank=True, default='', max_length=500),
        ),
        migrations.AddField(
            model_name='documentversion',
            name='processing_failed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(mark_processed_versions, migrations.RunPython.noop),
    ]
