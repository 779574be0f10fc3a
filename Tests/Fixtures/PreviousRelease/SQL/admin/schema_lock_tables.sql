-- Locks every table of schema herald against writes for the rest of herald migrate's
-- transaction, herald.jobs first and the others in name order: the order the application's
-- inserts and the workers' statements take them in (a job, then its campaign). Taken before any
-- migration or definition is applied, so the upgrade never holds one table while waiting for
-- another that a producer holds (a deadlock that would fail the producer's transaction);
-- producers and pools wait for the transaction instead. Identifiers come from the catalog.
DO $$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_catalog.pg_class c
             WHERE c.relnamespace = 'herald'::pg_catalog.regnamespace AND c.relkind IN ('r', 'p')
             ORDER BY c.relname <> 'jobs', c.relname
    LOOP
        EXECUTE pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', t);
    END LOOP;
END
$$
