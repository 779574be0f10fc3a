-- The bench's own jobs (above id $1, to tokens bench-*) in a database that is not the bench's.
DELETE FROM herald.jobs WHERE id > $1 AND message->>'token' LIKE 'bench-%'
