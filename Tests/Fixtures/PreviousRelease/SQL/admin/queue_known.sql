-- Whether queue $1 is known at all: a job, a dead letter or a queue's settings row names it.
SELECT EXISTS (SELECT 1 FROM herald.jobs WHERE queue = $1)
    OR EXISTS (SELECT 1 FROM herald.dead_letters WHERE queue = $1)
    OR EXISTS (SELECT 1 FROM herald.queues WHERE name = $1)
