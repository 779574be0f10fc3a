-- Whether any job or dead letter names queue $1.
SELECT EXISTS (SELECT 1 FROM herald.jobs WHERE queue = $1) OR EXISTS (SELECT 1 FROM herald.dead_letters WHERE queue = $1)
