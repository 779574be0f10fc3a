-- Deletes up to $2 delivery events older than $1 seconds (the events' own retention).
DELETE FROM herald.events WHERE id IN (
    SELECT id FROM herald.events WHERE at < now() - make_interval(secs => $1::float8) ORDER BY at LIMIT $2)
