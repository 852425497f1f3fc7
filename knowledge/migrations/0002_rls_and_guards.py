"""Tenancy by PostgreSQL and the database half of the lifecycle contract.

Policies are written here rather than with django-rls: django-rls 2.0.1 sets a
session-level (not transaction-local) setting from middleware, so a pooled connection
could carry an Account into the next request, and it installs policies in post_migrate
instead of migrations. See docs/tenancy.md.
"""

from django.db import migrations

from memhouse.core.rls import CURRENT_ACCOUNT_FN, protect_tables

TABLES = [
    "memhouse_scope", "memhouse_peer", "memhouse_credential", "memhouse_session",
    "memhouse_message", "memhouse_document", "memhouse_document_version",
    "memhouse_knowledge", "memhouse_knowledge_source", "memhouse_relation",
    "memhouse_lifecycle_event", "memhouse_audit_entry",
]

ACCOUNT_SQL = """
ALTER TABLE memhouse_account ENABLE ROW LEVEL SECURITY;
ALTER TABLE memhouse_account FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON memhouse_account
    USING (id = memhouse_current_account()) WITH CHECK (id = memhouse_current_account());
-- Operator commands and beat workers list Account ids, then enter each one.
CREATE POLICY account_scan ON memhouse_account FOR SELECT
    USING (current_setting('memhouse.account_scan', true) = 'on');
-- Authentication reads exactly one credential by its visible prefix, or the peer of
-- the signed-in user, before the Account is known.
CREATE POLICY credential_lookup ON memhouse_credential FOR SELECT
    USING (prefix = current_setting('memhouse.credential_prefix', true));
CREATE POLICY login_lookup ON memhouse_peer FOR SELECT
    USING (user_id IS NOT NULL
           AND user_id::text = current_setting('memhouse.auth_user_id', true));
"""

GUARDS_SQL = """
CREATE OR REPLACE FUNCTION memhouse_knowledge_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'proposed'
           AND coalesce(current_setting('memhouse.archive_import', true), '') <> 'on' THEN
            RAISE EXCEPTION 'knowledge must start as proposed, not %', NEW.state
                USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.statement IS DISTINCT FROM OLD.statement THEN
        RAISE EXCEPTION 'knowledge statements are immutable; supersede the row instead'
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state
       AND coalesce(current_setting('memhouse.lifecycle_transition', true), '') <> 'on' THEN
        RAISE EXCEPTION 'knowledge state changes only through lifecycle.transition'
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.account_id IS DISTINCT FROM OLD.account_id THEN
        RAISE EXCEPTION 'knowledge cannot move between Accounts' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER knowledge_guard BEFORE INSERT OR UPDATE ON memhouse_knowledge
    FOR EACH ROW EXECUTE FUNCTION memhouse_knowledge_guard();

CREATE OR REPLACE FUNCTION memhouse_message_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.text IS DISTINCT FROM OLD.text OR NEW.occurred_at IS DISTINCT FROM OLD.occurred_at
       OR NEW.peer_id IS DISTINCT FROM OLD.peer_id OR NEW.account_id IS DISTINCT FROM OLD.account_id
    THEN
        RAISE EXCEPTION 'messages are immutable observations' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER message_guard BEFORE UPDATE ON memhouse_message
    FOR EACH ROW EXECUTE FUNCTION memhouse_message_guard();

CREATE OR REPLACE FUNCTION memhouse_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'check_violation';
END $$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON memhouse_audit_entry
    FOR EACH ROW EXECUTE FUNCTION memhouse_append_only();
CREATE TRIGGER lifecycle_event_append_only BEFORE UPDATE ON memhouse_lifecycle_event
    FOR EACH ROW EXECUTE FUNCTION memhouse_append_only();
"""

GUARDS_REVERSE = """
DROP TRIGGER IF EXISTS knowledge_guard ON memhouse_knowledge;
DROP TRIGGER IF EXISTS message_guard ON memhouse_message;
DROP TRIGGER IF EXISTS audit_append_only ON memhouse_audit_entry;
DROP TRIGGER IF EXISTS lifecycle_event_append_only ON memhouse_lifecycle_event;
DROP FUNCTION IF EXISTS memhouse_knowledge_guard();
DROP FUNCTION IF EXISTS memhouse_message_guard();
DROP FUNCTION IF EXISTS memhouse_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_initial")]

    operations = [
        migrations.RunSQL(CURRENT_ACCOUNT_FN, "DROP FUNCTION IF EXISTS memhouse_current_account()"),
        *protect_tables(*TABLES),
        migrations.RunSQL(
            ACCOUNT_SQL,
            """
            DROP POLICY IF EXISTS login_lookup ON memhouse_peer;
            DROP POLICY IF EXISTS credential_lookup ON memhouse_credential;
            DROP POLICY IF EXISTS account_scan ON memhouse_account;
            DROP POLICY IF EXISTS tenant_isolation ON memhouse_account;
            ALTER TABLE memhouse_account NO FORCE ROW LEVEL SECURITY;
            ALTER TABLE memhouse_account DISABLE ROW LEVEL SECURITY;
            """,
        ),
        migrations.RunSQL(GUARDS_SQL, GUARDS_REVERSE),
    ]
