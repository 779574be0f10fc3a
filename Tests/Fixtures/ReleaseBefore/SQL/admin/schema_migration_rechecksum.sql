-- Records that migration $1's current text (checksum $2) stands for the released one applied.
UPDATE herald.schema_migrations SET checksum = $2 WHERE version = $1
