-- The schema and the two tables where herald migrate records what it applied: the numbered
-- migrations, and the text (checksum) of each function and view definition file.
CREATE SCHEMA IF NOT EXISTS herald;
CREATE TABLE IF NOT EXISTS herald.schema_migrations (
    version    text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS herald.schema_definitions (
    name       text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
-- The catalog's text of what each file defines, as the last herald migrate left it: a later run
-- that finds the catalog different knows the definition was edited in the database.
ALTER TABLE herald.schema_definitions ADD COLUMN IF NOT EXISTS catalog_definition text;
