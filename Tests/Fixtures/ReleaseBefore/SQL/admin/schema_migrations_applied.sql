-- The numbered migrations applied, with the checksum of the text each was applied from.
SELECT version, checksum FROM herald.schema_migrations
