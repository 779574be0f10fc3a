-- Whether the schema is recent enough for the dashboard (herald.admin_log, migration 060).
SELECT to_regclass('herald.admin_log') IS NOT NULL
