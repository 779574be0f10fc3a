-- How many dead letters there are.
SELECT count(*) FROM herald.dead_letters
