-- Whether queue $1 holds dead letters.
SELECT EXISTS (SELECT 1 FROM herald.dead_letters WHERE queue = $1)
