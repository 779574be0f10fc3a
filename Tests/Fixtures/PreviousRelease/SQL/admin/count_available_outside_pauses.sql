-- Available jobs per queue from the claim index, with the age of the oldest due one whose project
-- is not paused (count_available.sql, for a schema with registry projects). A job of a registry
-- project paused by an operator, for its credentials, or after FCM's quota answer or silence
-- (herald.project_pauses; an APNs app's outage pause under its bucket key 'APNs:<name>') waits
-- for that pause, not for the pools: its age is the project's
-- (project_job_counts.sql, herald_project_paused_oldest_age_seconds), so the queue's age alert
-- does not fire for a cause it does not name. It still counts as available.
WITH paused AS (
    SELECT p.name FROM herald.projects p
    WHERE p.paused_reason IS NOT NULL
       OR EXISTS (SELECT 1 FROM herald.project_pauses s WHERE s.project_id = coalesce(p.fcm_project_id, 'APNs:' || p.name) AND s.paused_until > now()))
SELECT j.queue, CASE WHEN j.run_at > now() THEN 'scheduled' ELSE 'available' END, count(*),
       extract(epoch FROM now() - min(j.run_at) FILTER (
           WHERE j.run_at <= now() AND (j.project IS NULL OR j.project NOT IN (SELECT name FROM paused))))
FROM herald.jobs j WHERE j.state = 'available' GROUP BY 1, 2
