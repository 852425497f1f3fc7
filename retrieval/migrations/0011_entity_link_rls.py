from django.db import migrations

from memhouse.core.rls import protect_tables


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0010_entity_link_judgement")]

    operations = protect_tables("memhouse_entity_link", "memhouse_entity_judgement")
