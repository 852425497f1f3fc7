"""Statistics on the month a message was said (semantic's said-when lane).

"In July" (any year) filters messages by EXTRACT(MONTH ...). Without statistics on that
expression PostgreSQL guesses 0.5% of rows per month where about 1/12 match, so at 1M
messages it read every message said in July and sorted them by distance (~300 ms)
instead of walking the HNSW index with the month as a filter (~6 ms). Extended
statistics on the expression give ANALYZE the real share, without an index to keep
up on every insert. The expression is exactly the one Django writes for
`occurred_at__month__in` (TIME_ZONE is UTC), or the planner would not match it.
"""

from django.db import migrations

STATISTICS = "memhouse_message_month_stats"


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0016_scope_relation'),
    ]

    operations = [
        migrations.RunSQL(
            f"CREATE STATISTICS IF NOT EXISTS {STATISTICS} "
            "ON (EXTRACT(MONTH FROM occurred_at AT TIME ZONE 'UTC')) FROM memhouse_message; "
            "ANALYZE memhouse_message",
            f"DROP STATISTICS IF EXISTS {STATISTICS}",
        ),
    ]
