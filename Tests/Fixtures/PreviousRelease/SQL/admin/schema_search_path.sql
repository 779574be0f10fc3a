-- The search path of herald migrate's transaction: the built-ins, then nothing another role can
-- create in (pg_temp last, so a temporary object never shadows a built-in).
SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true)
