-- Run once as the PostgreSQL superuser. The application role owns its tables but is
-- neither SUPERUSER nor BYPASSRLS, so the FORCEd row-level security binds it.
CREATE ROLE memhouse LOGIN PASSWORD 'memhouse' NOSUPERUSER NOBYPASSRLS NOCREATEROLE;
CREATE DATABASE memhouse OWNER memhouse;
-- Keep statement text and values (message text, key hashes) out of the server log: a
-- failing statement is otherwise logged whole (STATEMENT:, DETAIL: Key (...)=(...)),
-- where erasure cannot reach it. Superuser-only settings, hence here.
ALTER ROLE memhouse SET log_min_error_statement = panic;
ALTER ROLE memhouse SET log_error_verbosity = terse;
\c memhouse
CREATE EXTENSION IF NOT EXISTS vector;
-- Under row-level security PostgreSQL uses an index only for leakproof operators, and
-- `tsvector @@ tsquery` is not marked leakproof by default: without this line every
-- lexical search scans the whole Account (seconds at a million statements). The function
-- raises no data-dependent errors. Per database; run it in template1 too if the
-- application creates databases (tests, benchmarks).
ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF;
