-- Herald schema, first migration.
CREATE SCHEMA IF NOT EXISTS herald;
