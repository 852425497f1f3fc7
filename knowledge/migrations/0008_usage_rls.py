from django.db import migrations

from memhouse.core.rls import protect_tables


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0007_usage_entry")]

    operations = protect_tables("memhouse_usage_entry")
