"""Knowledge.named_entity: the unregistered person a held claim is about, so registering
them later links the claim to them."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0019_contradiction_settled")]

    operations = [
        migrations.AddField(
            model_name="knowledge", name="named_entity",
            field=models.CharField(blank=True, default="", max_length=200)),
        migrations.AddIndex(
            model_name="knowledge",
            index=models.Index(fields=["account", "named_entity"],
                               condition=models.Q(("named_entity", ""), _negated=True),
                               name="knowledge_named_entity")),
    ]
