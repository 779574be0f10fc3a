-- Records the catalog's text of what each applied definition file defines now ($1: a JSON object
-- of file name to text, as schema_catalog.sql reads them), for the next run to compare with.
UPDATE herald.schema_definitions d
SET catalog_definition = now_defined.value
FROM pg_catalog.jsonb_each_text($1::jsonb) AS now_defined
WHERE d.name = now_defined.key AND d.catalog_definition IS DISTINCT FROM now_defined.value
