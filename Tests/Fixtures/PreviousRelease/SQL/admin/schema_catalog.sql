-- The catalog's text of every herald function (the overloads of one name together) and view,
-- named as their definition files are: functions/NAME, views/NAME.
SELECT 'functions/' || p.proname,
       pg_catalog.string_agg(pg_catalog.pg_get_functiondef(p.oid), E'\n' ORDER BY p.oid::pg_catalog.regprocedure::text)
FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'herald'::pg_catalog.regnamespace AND p.prokind IN ('f', 'p')
GROUP BY p.proname
UNION ALL
SELECT 'views/' || c.relname, pg_catalog.pg_get_viewdef(c.oid)
FROM pg_catalog.pg_class c
WHERE c.relnamespace = 'herald'::pg_catalog.regnamespace AND c.relkind = 'v'
