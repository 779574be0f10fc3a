-- The campaigns /metrics labels by name: those not finished or cancelled more than a day ago,
-- unfinished ones first, then the newest, at most $1. Columns as Campaigns.rows reads them.
SELECT p.campaign_id, p.name, p.state, p.total, p.pending, p.running, p.completed, p.dead, p.discarded, p.cancelled,
       p.sent_last_minute, to_char(c.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(p.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(p.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       to_char(p.eta AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), extract(epoch FROM p.eta - now())::float8,
       c.max_per_second, c.analytics_label, c.max_errors, c.paused_reason
FROM herald.campaign_progress p JOIN herald.campaigns c ON c.id = p.campaign_id
WHERE c.state NOT IN ('finished', 'cancelled') OR c.finished_at IS NULL OR c.finished_at > now() - interval '1 day'
ORDER BY c.state IN ('finished', 'cancelled'), p.campaign_id DESC LIMIT $1
