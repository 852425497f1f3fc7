"""The minimal profile's recall projection (RecallDocument), under tenant RLS."""

import django.db.models.deletion
import django.utils.timezone
import pgvector.django.vector
import uuid
from django.db import migrations, models

from memhouse.core.rls import protect_tables


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0016_scope_relation'),
        ('retrieval', '0008_message_vector'),
    ]

    operations = [
        migrations.CreateModel(
            name='RecallDocument',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('lane', models.CharField(choices=[('direct', 'Direct'), ('derived', 'Derived')], max_length=8)),
                ('embedding', pgvector.django.vector.VectorField()),
                ('source_updated_at', models.DateTimeField()),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('account', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='knowledge.account')),
                ('knowledge', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='knowledge.knowledge')),
                ('space', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='retrieval.embeddingspace')),
                ('vector', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='recall_document', to='retrieval.knowledgevector')),
            ],
            options={
                'db_table': 'memhouse_recall_document',
                'indexes': [models.Index(fields=['account', 'space', 'lane'], name='memhouse_re_account_67ab98_idx')],
                'constraints': [models.UniqueConstraint(fields=('knowledge', 'space'), name='recall_document_one_per_space')],
            },
        ),
        *protect_tables("memhouse_recall_document"),
    ]
