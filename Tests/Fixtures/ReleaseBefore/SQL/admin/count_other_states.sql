-- Exact counts per queue and state, of the states not in $1 (those the indexes count).
SELECT queue, state, count(*) FROM herald.jobs WHERE state <> ALL ($1::text[]) GROUP BY 1, 2
