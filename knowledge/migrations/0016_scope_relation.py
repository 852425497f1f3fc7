"""Scope relations (administrators' links between two scopes), under tenant RLS."""

import django.db.models.deletion
import django.db.models.functions.comparison
import django.utils.timezone
import uuid
from django.db import migrations, models

from memhouse.core.rls import protect_tables


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0015_knowledge_prompt_identity'),
    ]

    operations = [
        migrations.CreateModel(
            name='ScopeRelation',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('account', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='knowledge.account')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='knowledge.peer')),
                ('source', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='links_out', to='knowledge.scope')),
                ('target', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='links_in', to='knowledge.scope')),
            ],
            options={
                'db_table': 'memhouse_scope_relation',
                'constraints': [models.CheckConstraint(condition=models.Q(('source', models.F('target')), _negated=True), name='scope_relation_no_loop'), models.UniqueConstraint(django.db.models.functions.comparison.Least('source', 'target'), django.db.models.functions.comparison.Greatest('source', 'target'), name='scope_relation_unique_pair')],
            },
        ),
        *protect_tables("memhouse_scope_relation"),
    ]
