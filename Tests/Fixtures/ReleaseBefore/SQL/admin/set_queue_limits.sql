-- Sets queue $1's max_per_second ($2) and max_in_flight ($3); NULL removes a limit.
SELECT herald.set_queue_limits($1, $2::float8, $3::integer)
