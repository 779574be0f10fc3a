-- Queues with settings, available, scheduled or running jobs, or dead letters, by name, with their
-- limits and counts. The counts come from the partial indexes of pending jobs, so history costs nothing.
WITH available AS (SELECT queue, count(*) AS n FROM herald.jobs WHERE state = 'available' GROUP BY queue),
     scheduled AS (SELECT queue, count(*) AS n FROM herald.jobs WHERE state = 'scheduled' GROUP BY queue),
     running AS (SELECT queue, count(*) AS n FROM herald.jobs WHERE locked_until IS NOT NULL AND state = 'running' GROUP BY queue),
     dead AS (SELECT queue, count(*) AS n FROM herald.dead_letters GROUP BY queue),
     names AS (SELECT name FROM herald.queues UNION SELECT queue FROM available UNION SELECT queue FROM scheduled
               UNION SELECT queue FROM running UNION SELECT queue FROM dead)
SELECT n.name, coalesce(q.paused, false), q.max_per_second, q.max_in_flight,
       coalesce(a.n, 0), coalesce(r.n, 0), coalesce(d.n, 0), coalesce(s.n, 0)
FROM names n LEFT JOIN herald.queues q ON q.name = n.name LEFT JOIN available a ON a.queue = n.name
     LEFT JOIN scheduled s ON s.queue = n.name LEFT JOIN running r ON r.queue = n.name
     LEFT JOIN dead d ON d.queue = n.name
ORDER BY n.name
