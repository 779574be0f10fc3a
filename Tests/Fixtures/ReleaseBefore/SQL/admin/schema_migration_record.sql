-- Records numbered migration $1, applied from the text whose checksum is $2.
INSERT INTO herald.schema_migrations (version, checksum) VALUES ($1, $2)
