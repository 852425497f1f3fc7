"""Ask's source recall lane: message vectors per embedding space (tenant RLS like every
retrieval table; per-space HNSW indexes are created with the space, retrieval.vectors)
and a full-text index on the message text, the exact expression Django's
SearchVector("text", config="english") compiles to, so source_exact can use it."""

import uuid

import django.db.models.deletion
import django.utils.timezone
import pgvector.django.vector
from django.db import migrations, models

from memhouse.core.rls import protect_tables

FTS_SQL = (
    "CREATE INDEX IF NOT EXISTS message_text_fts ON memhouse_message USING gin "
    "(to_tsvector('english'::regconfig, COALESCE(text, '')))"
)
FTS_REVERSE_SQL = "DROP INDEX IF EXISTS message_text_fts"


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0015_knowledge_prompt_identity"),
        ("retrieval", "0007_entity_mention_strongest"),
    ]

    operations = [
        migrations.CreateModel(
            name="MessageVector",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("embedding", pgvector.django.vector.VectorField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "account",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to="knowledge.account"
                    ),
                ),
                (
                    "message",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="knowledge.message",
                    ),
                ),
                (
                    "space",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, to="retrieval.embeddingspace"
                    ),
                ),
            ],
            options={
                "db_table": "memhouse_message_vector",
                "indexes": [
                    models.Index(fields=["account", "space"], name="memhouse_me_account_4cbfc1_idx")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("message", "space"), name="message_vector_one_per_space"
                    )
                ],
            },
        ),
        *protect_tables("memhouse_message_vector"),
        migrations.RunSQL(FTS_SQL, FTS_REVERSE_SQL),
    ]
