-- The function and view files applied, with the checksum of the text each was applied from.
SELECT name, checksum FROM herald.schema_definitions
