-- Deletes dead letters: ids $1, or those of queue $2 with a reason LIKE $3, dead for more than
-- $4 seconds when given. Returns their ids.
SELECT herald.remove_dead_letters($1::bigint[], $2, $3, make_interval(secs => $4::float8))
