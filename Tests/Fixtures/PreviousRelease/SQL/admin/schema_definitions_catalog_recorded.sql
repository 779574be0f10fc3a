-- The catalog's text of each definition file's objects as the last herald migrate left it
-- (none for a file applied by a release that did not record it).
SELECT name, catalog_definition FROM herald.schema_definitions WHERE catalog_definition IS NOT NULL
