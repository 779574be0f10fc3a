-- Dead letters made at or after $1.
SELECT count(*) FROM herald.dead_letters WHERE dead_at >= $1::timestamptz
