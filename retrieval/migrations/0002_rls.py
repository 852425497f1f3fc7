from django.db import migrations

from memhouse.core.rls import protect_tables


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0001_initial")]

    operations = protect_tables("memhouse_knowledge_vector")
