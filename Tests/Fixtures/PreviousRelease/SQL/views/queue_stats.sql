-- queue_stats: per queue and state, the count; for available jobs the age of the oldest due one
-- whose project is not paused (a job a paused registry project holds back waits for its project:
-- herald.project_registry says why, herald.project_pauses for FCM's quota pauses and the outage
-- pauses of FCM projects and APNs apps, an app's under 'APNs:<name>'); `scheduled`
-- repeats the count of jobs due later (kept for queries written before this state).
CREATE OR REPLACE VIEW herald.queue_stats AS
    SELECT j.queue, j.state, count(*) AS count,
           now() - min(j.run_at) FILTER (
               WHERE j.state = 'available' AND NOT EXISTS (
                   SELECT 1 FROM herald.projects p
                   WHERE p.name = j.project
                     AND (p.paused_reason IS NOT NULL
                          OR EXISTS (SELECT 1 FROM herald.project_pauses s
                                     WHERE s.project_id = coalesce(p.fcm_project_id, 'APNs:' || p.name)
                                       AND s.paused_until > now())))) AS oldest_available_age,
           count(*) FILTER (WHERE j.state = 'scheduled') AS scheduled
    FROM herald.jobs j GROUP BY j.queue, j.state
    UNION ALL
    SELECT queue, 'dead', count(*), NULL, 0 FROM herald.dead_letters GROUP BY queue;
