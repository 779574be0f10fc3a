-- --profile: the statistics of the private cluster (pg_stat_statements is preloaded there).
CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA public
