"""Tenant RLS for the projection tables, and the erasure cascade.

Deleting a ProjectionSource row (a statement hard-deleted by erasure, or the cascade of
a deleted peer, scope or session) deletes its whole projection in the same transaction,
so a deleted statement's text never outlives it in a cached payload. A rebuild replaces
its own links with `memhouse.projection_rebuild` set on, which the trigger skips.
"""

from django.db import migrations

from memhouse.core.rls import protect_tables

TRIGGER_SQL = """
CREATE OR REPLACE FUNCTION memhouse_projection_source_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('memhouse.projection_rebuild', true), '') = 'on' THEN
        RETURN OLD;
    END IF;
    DELETE FROM memhouse_projection_source WHERE projection_id = OLD.projection_id;
    DELETE FROM memhouse_projection WHERE id = OLD.projection_id;
    RETURN OLD;
END
$$;
DROP TRIGGER IF EXISTS projection_source_gone ON memhouse_projection_source;
CREATE TRIGGER projection_source_gone AFTER DELETE ON memhouse_projection_source
    FOR EACH ROW EXECUTE FUNCTION memhouse_projection_source_gone();
"""

TRIGGER_REVERSE_SQL = """
DROP TRIGGER IF EXISTS projection_source_gone ON memhouse_projection_source;
DROP FUNCTION IF EXISTS memhouse_projection_source_gone();
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0005_projection")]

    operations = [
        *protect_tables("memhouse_projection", "memhouse_projection_source"),
        migrations.RunSQL(TRIGGER_SQL, TRIGGER_REVERSE_SQL),
    ]
