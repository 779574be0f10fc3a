-- Whether `herald migrate` has created the schema in this database.
SELECT to_regclass('herald.jobs') IS NOT NULL
