"""MessageVector.scope and said_at: the message's scope and when it was said (its
occurred_at), on the vector's own row, for semantic's message lanes.

The lanes read the nearest messages of the read's scopes, the said-when lane only those
said within a time the question names. With scope and time only on memhouse_message,
the HNSW scan looked every candidate up in the message table (a month of any year: ~12
lookups per message kept), and a month of a given year was joined against every message
of the scope and sorted by distance. On the vector's row the tests cost nothing extra;
(account, space, said_at) lets a short window be read in time order instead, and
statistics on the month give the planner its real share (as knowledge 0017 does for
the message table).

The backfill enters each Account as row-level security requires (as knowledge 0010 and
0018 do); a message never changes, so the copies never go stale. It rewrites every
message vector (and their HNSW index entries): about 400 s for 100k vectors on two busy
cores (bench/README.md).
"""

import django.db.models.deletion
from django.db import migrations, models

STATISTICS = "memhouse_message_vector_month_stats"


def copy_from_messages(apps, schema_editor):
    with schema_editor.connection.cursor() as cur:
        cur.execute("SELECT set_config('memhouse.account_scan', 'on', true)")
        cur.execute("SELECT id FROM memhouse_account")
        accounts = [row[0] for row in cur.fetchall()]
        cur.execute("SELECT set_config('memhouse.account_scan', '', true)")
        for account_id in accounts:
            cur.execute("SELECT set_config('memhouse.account_id', %s, true)", [str(account_id)])
            cur.execute("UPDATE memhouse_message_vector mv SET scope_id = m.scope_id, "
                        "said_at = m.occurred_at FROM memhouse_message m "
                        "WHERE m.id = mv.message_id AND mv.said_at IS NULL")
        cur.execute("SELECT set_config('memhouse.account_id', '', true)")


class Migration(migrations.Migration):

    dependencies = [
        ("knowledge", "0001_initial"),
        ("retrieval", "0011_entity_link_rls"),
    ]

    operations = [
        migrations.AddField(
            model_name="messagevector", name="scope",
            field=models.ForeignKey(db_index=False, null=True,
                                    on_delete=django.db.models.deletion.CASCADE,
                                    related_name="+", to="knowledge.scope")),
        migrations.AddField(
            model_name="messagevector", name="said_at",
            field=models.DateTimeField(null=True)),
        migrations.RunPython(copy_from_messages, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="messagevector", name="scope",
            field=models.ForeignKey(db_index=False,
                                    on_delete=django.db.models.deletion.CASCADE,
                                    related_name="+", to="knowledge.scope")),
        migrations.AlterField(
            model_name="messagevector", name="said_at",
            field=models.DateTimeField()),
        migrations.AddIndex(
            model_name="messagevector",
            index=models.Index(fields=["account", "space", "said_at"],
                                name="message_vector_said_at")),
        # The expression is exactly the one retrieval.strategies.semantic filters on.
        migrations.RunSQL(
            f"CREATE STATISTICS IF NOT EXISTS {STATISTICS} "
            "ON (EXTRACT(MONTH FROM said_at AT TIME ZONE 'UTC')) FROM memhouse_message_vector; "
            "ANALYZE memhouse_message_vector",
            f"DROP STATISTICS IF EXISTS {STATISTICS}"),
    ]
