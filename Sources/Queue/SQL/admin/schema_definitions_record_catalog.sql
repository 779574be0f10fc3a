-- Records the catalog's text of what each applied definition file defines now (see
-- schema_catalog.sql), for the next run to compare with.
UPDATE herald.schema_definitions d
SET catalog_definition = now_defined.text
FROM (SELECT 'functions/' || p.proname AS name,
             pg_catalog.string_agg(pg_catalog.pg_get_functiondef(p.oid), E'\n' ORDER BY p.oid::pg_catalog.regprocedure::text) AS text
      FROM pg_catalog.pg_proc p
      WHERE p.pronamespace = 'herald'::pg_catalog.regnamespace AND p.prokind IN ('f', 'p')
      GROUP BY p.proname
      UNION ALL
      SELECT 'views/' || c.relname, pg_catalog.pg_get_viewdef(c.oid)
      FROM pg_catalog.pg_class c
      WHERE c.relnamespace = 'herald'::pg_catalog.regnamespace AND c.relkind = 'v') AS now_defined
WHERE d.name = now_defined.name AND d.catalog_definition IS DISTINCT FROM now_defined.text
