-- Records that definition file $1 was applied from the text whose checksum is $2.
INSERT INTO herald.schema_definitions (name, checksum) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()
