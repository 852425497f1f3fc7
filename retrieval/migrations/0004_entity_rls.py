from django.db import migrations

from memhouse.core.rls import protect_tables


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0003_entity_entitymention")]

    operations = protect_tables("memhouse_entity", "memhouse_entity_mention")
