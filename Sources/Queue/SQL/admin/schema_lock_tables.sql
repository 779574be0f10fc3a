-- Locks every table of schema herald (and its views, when they are to be replaced) for the rest
-- of herald migrate's transaction, in the modes schema_lock_modes.sql set, before any migration or
-- definition is applied: after that the run waits for no one, so producers and pools wait for
-- the transaction and no statement of theirs meets it in a deadlock.
--
-- While it takes them, it never waits holding one: a transaction of a pool's claim holds
-- herald.project_rates (its tokens) when it updates herald.jobs, and another releases its jobs
-- before it gives the tokens back, so no order of the tables serves both. A migrate that held
-- herald.jobs while it waited for herald.project_rates was in a deadlock with the first, and
-- PostgreSQL failed whichever had waited longer, often the claim. So the first relation is waited
-- for, holding none of the others, and every other one is taken with NOWAIT; when one is busy,
-- the attempt lets go of all it took (the block's subtransaction) and the next one waits for the
-- busy one first. After 500 attempts it waits for each in turn (the deadlock, if one comes, is
-- retried by the migrator). Identifiers come from the catalog.
DO $$
DECLARE
    table_mode text := pg_catalog.current_setting('herald.migrate_lock_tables');
    with_views boolean := pg_catalog.current_setting('herald.migrate_lock_views')::boolean;
    relations regclass[];
    modes text[];
    first integer := 1;
    busy integer;
    attempt integer := 0;
BEGIN
    IF table_mode NOT IN ('SHARE ROW EXCLUSIVE', 'ACCESS EXCLUSIVE') THEN
        RAISE EXCEPTION 'herald migrate: no lock mode % for the tables', table_mode;
    END IF;
    -- herald.jobs first, the tables in name order, then the views: the order the application's
    -- inserts and the workers' statements mostly take them in (a job, then its campaign).
    SELECT pg_catalog.array_agg(r.oid ORDER BY r.kind, r.relname),
           pg_catalog.array_agg(CASE WHEN r.kind = 2 THEN 'ACCESS EXCLUSIVE' ELSE table_mode END ORDER BY r.kind, r.relname)
    INTO relations, modes
    FROM (SELECT c.oid::regclass AS oid, c.relname,
                 CASE WHEN c.relkind = 'v' THEN 2 WHEN c.relname = 'jobs' THEN 0 ELSE 1 END AS kind
          FROM pg_catalog.pg_class c
          WHERE c.relnamespace = 'herald'::pg_catalog.regnamespace
            AND (c.relkind IN ('r', 'p') OR (with_views AND c.relkind = 'v'))) r;
    IF relations IS NULL THEN
        RETURN;
    END IF;
    LOOP
        attempt := attempt + 1;
        BEGIN
            busy := first;
            EXECUTE pg_catalog.format('LOCK TABLE %s IN %s MODE', relations[first], modes[first]);
            FOR i IN 1..pg_catalog.cardinality(relations) LOOP
                CONTINUE WHEN i = first;
                busy := i;
                EXECUTE pg_catalog.format('LOCK TABLE %s IN %s MODE%s', relations[i], modes[i],
                                          CASE WHEN attempt < 500 THEN ' NOWAIT' ELSE '' END);
            END LOOP;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            -- The one waited for timed out (a lock_timeout of the role): that is the migrator's to retry.
            IF busy = first THEN
                RAISE;
            END IF;
            first := busy;
        END;
    END LOOP;
END
$$
