"""Lifecycle history stays append-only, except that erasing a peer may blank who acted:
`actor_peer_id` -> NULL and `actor` -> 'peer:erased', nothing else."""

from django.db import migrations

SQL = """
CREATE OR REPLACE FUNCTION memhouse_lifecycle_event_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.actor_peer_id IS NULL AND NEW.actor = 'peer:erased'
       AND (to_jsonb(NEW) - 'actor_peer_id' - 'actor')
           = (to_jsonb(OLD) - 'actor_peer_id' - 'actor') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'memhouse_lifecycle_event is append-only' USING ERRCODE = 'check_violation';
END $$;
DROP TRIGGER IF EXISTS lifecycle_event_append_only ON memhouse_lifecycle_event;
CREATE TRIGGER lifecycle_event_append_only BEFORE UPDATE ON memhouse_lifecycle_event
    FOR EACH ROW EXECUTE FUNCTION memhouse_lifecycle_event_guard();
"""

REVERSE = """
DROP TRIGGER IF EXISTS lifecycle_event_append_only ON memhouse_lifecycle_event;
CREATE TRIGGER lifecycle_event_append_only BEFORE UPDATE ON memhouse_lifecycle_event
    FOR EACH ROW EXECUTE FUNCTION memhouse_append_only();
DROP FUNCTION IF EXISTS memhouse_lifecycle_event_guard();
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0005_duplicate_lookup_index")]

    operations = [migrations.RunSQL(SQL, REVERSE)]
