-- Pending jobs and dead letters per registry project ('': the jobs of no project), for `herald
-- stats` and the dashboard. Each pending state is counted through its partial index, as
-- count_available.sql, count_running.sql and count_scheduled.sql count them per queue, so the
-- cost follows the pending work, not the table's history. Projects' dead letters are counted
-- through dead_letters_project (migration 200, partial: project IS NOT NULL); those of no project
-- are all the others. The fourth column, on the available rows: seconds the oldest due job has
-- waited past its run_at (what a paused project holds back: herald_project_paused_oldest_age_seconds).
SELECT coalesce(project, '') AS project, CASE WHEN run_at > now() THEN 'scheduled' ELSE 'available' END AS state, count(*) AS n,
       extract(epoch FROM now() - min(run_at) FILTER (WHERE run_at <= now()))::float8 AS oldest_age
FROM herald.jobs WHERE state = 'available' GROUP BY 1, 2
UNION ALL
SELECT coalesce(project, ''), 'running', count(*), NULL FROM herald.jobs
WHERE locked_until IS NOT NULL AND state = 'running' GROUP BY 1
UNION ALL
SELECT coalesce(project, ''), 'scheduled', count(*), NULL FROM herald.jobs WHERE state = 'scheduled' GROUP BY 1
UNION ALL
SELECT project, 'dead', count(*), NULL FROM herald.dead_letters WHERE project IS NOT NULL GROUP BY 1
UNION ALL
SELECT '', 'dead', count(*) - (SELECT count(*) FROM herald.dead_letters WHERE project IS NOT NULL), NULL FROM herald.dead_letters
