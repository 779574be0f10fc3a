-- Whether the schema is recent enough for several projects (herald.projects, migration 180).
SELECT to_regclass('herald.projects') IS NOT NULL
