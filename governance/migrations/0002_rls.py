from django.db import migrations

from memhouse.core.rls import protect_tables


class Migration(migrations.Migration):
    dependencies = [("governance", "0001_initial")]

    operations = protect_tables("memhouse_validation", "memhouse_peer_question")
