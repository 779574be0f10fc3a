-- Waits for the schema's advisory lock ($1: "herald" in ASCII), so two deploys cannot race.
SELECT pg_advisory_lock($1)
