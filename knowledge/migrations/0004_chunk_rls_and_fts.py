"""RLS for document chunks, and the full-text column the lexical strategy reads."""

from django.db import migrations

from memhouse.core.rls import protect_tables

FTS_SQL = """
ALTER TABLE memhouse_knowledge ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('english', statement)) STORED;
CREATE INDEX knowledge_search_vector_gin ON memhouse_knowledge USING gin (search_vector);
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0003_documentchunk")]

    operations = [
        *protect_tables("memhouse_document_chunk"),
        migrations.RunSQL(FTS_SQL, """
            DROP INDEX IF EXISTS knowledge_search_vector_gin;
            ALTER TABLE memhouse_knowledge DROP COLUMN IF EXISTS search_vector;
        """),
    ]
