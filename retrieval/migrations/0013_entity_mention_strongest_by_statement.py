"""entity_mention_strongest also orders equally strong mentions by statement: entity_match
pools an entity's strongest visible mentions, ties by statement id, by walking it."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [("retrieval", "0012_message_vector_said_at")]

    operations = [
        migrations.RemoveIndex(model_name="entitymention", name="entity_mention_strongest"),
        migrations.AddIndex(
            model_name="entitymention",
            index=models.Index(fields=["entity", "-confidence", "knowledge"],
                               name="entity_mention_strongest")),
    ]
