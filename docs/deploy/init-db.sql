-- Run once as the PostgreSQL superuser. The application role owns its tables but is
-- neither SUPERUSER nor BYPASSRLS, so the FORCEd row-level security binds it.
CREATE ROLE memhouse LOGIN PASSWORD 'memhouse' NOSUPERUSER NOBYPASSRLS NOCREATEROLE;
CREATE DATABASE memhouse OWNER memhouse;
\c memhouse
CREATE EXTENSION IF NOT EXISTS vector;
