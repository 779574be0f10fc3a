-- campaign_progress: one row per campaign; every job counted exactly once (pruned as discarded).
CREATE OR REPLACE VIEW herald.campaign_progress AS
    SELECT c.id AS campaign_id, c.name,
           CASE WHEN c.state IN ('running', 'scheduled') AND c.total > 0 AND live.pending = 0 AND live.running = 0
                THEN 'finished' ELSE c.state END AS state,
           c.total, live.pending, live.running, c.completed, c.dead, c.discarded, c.cancelled,
           recent.sent AS sent_last_minute, c.started_at,
           coalesce(c.finished_at, CASE WHEN c.state IN ('running', 'scheduled') AND c.total > 0 AND live.pending = 0 AND live.running = 0
                                        THEN now() END) AS finished_at,
           CASE WHEN live.pending + live.running > 0 AND recent.sent > 0 AND c.state = 'running'
                THEN now() + make_interval(secs => (live.pending + live.running) * 60.0 / recent.sent) END AS eta
    FROM herald.campaigns c
    CROSS JOIN LATERAL (
        SELECT r.running, greatest(0, c.total - c.completed - c.dead - c.discarded - c.cancelled - r.running) AS pending
        FROM (SELECT count(*) AS running FROM herald.jobs j WHERE j.campaign_id = c.id AND j.state = 'running') r
    ) live
    CROSS JOIN LATERAL (
        SELECT count(*) AS sent FROM herald.jobs j
        WHERE j.campaign_id = c.id AND j.state = 'completed' AND j.finished_at > now() - interval '1 minute'
    ) recent;
