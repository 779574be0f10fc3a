-- campaign_progress: one row per campaign; every job counted exactly once (pruned as discarded).
-- sent_last_minute jobs completed over the last rate_window seconds (a minute, or less for a
-- campaign that started less than a minute ago); the ETA is at that rate.
CREATE OR REPLACE VIEW herald.campaign_progress AS
    SELECT c.id AS campaign_id, c.name,
           CASE WHEN c.state IN ('running', 'scheduled') AND c.total > 0 AND live.pending = 0 AND live.running = 0
                THEN 'finished' ELSE c.state END AS state,
           c.total, live.pending, live.running, c.completed, c.dead, c.discarded, c.cancelled,
           recent.sent AS sent_last_minute, c.started_at,
           coalesce(c.finished_at, CASE WHEN c.state IN ('running', 'scheduled') AND c.total > 0 AND live.pending = 0 AND live.running = 0
                                        THEN now() END) AS finished_at,
           CASE WHEN live.pending + live.running > 0 AND recent.sent > 0 AND c.state = 'running'
                THEN now() + make_interval(secs => (live.pending + live.running) * win.seconds / recent.sent) END AS eta,
           win.seconds AS rate_window
    FROM herald.campaigns c
    -- The window the rate is measured over: the last minute, or the time since the campaign's
    -- first claim when that is shorter (a campaign 5 s old that sent 500 goes at 100/s, not 8/s).
    CROSS JOIN LATERAL (
        SELECT least(60.0, greatest(1.0, extract(epoch FROM now() - coalesce(c.started_at, now() - interval '1 minute'))))::float8 AS seconds
    ) win
    CROSS JOIN LATERAL (
        SELECT r.running, greatest(0, c.total - c.completed - c.dead - c.discarded - c.cancelled - r.running) AS pending
        FROM (SELECT count(*) AS running FROM herald.jobs j WHERE j.campaign_id = c.id AND j.state = 'running') r
    ) live
    CROSS JOIN LATERAL (
        SELECT count(*) AS sent FROM herald.jobs j
        WHERE j.campaign_id = c.id AND j.state = 'completed' AND j.finished_at > now() - interval '1 minute'
    ) recent;
