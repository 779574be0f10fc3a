-- The modes schema_lock_tables.sql takes herald's relations in, for the rest of herald migrate's
-- transaction: $1 the tables' (SHARE ROW EXCLUSIVE while only definitions are due: writes wait,
-- reads go on; ACCESS EXCLUSIVE when numbered migrations are due, whose ALTER TABLE would
-- otherwise wait for a reader in the middle of the run), $2 whether the views are taken too
-- (ACCESS EXCLUSIVE, when one is to be replaced).
SELECT pg_catalog.set_config('herald.migrate_lock_tables', $1::text, true),
       pg_catalog.set_config('herald.migrate_lock_views', $2::text, true)
