-- campaign_label_budget: the analytics labels each FCM project's campaigns use today, and which of
-- them FCM will not report. FCM's Data API reports at most 100 distinct labels a project a day
-- (America/Los_Angeles days); a label beyond them goes unreported. Today's labels are those of the
-- campaigns that sent today (herald.campaign_days), in the order they started, then those of the
-- campaigns that may still send (scheduled, running or paused), in the order they were created:
-- label_rank is the place a campaign's label takes in that order, labels how many the project has,
-- and reported false for a campaign whose label is beyond the 100th. Campaigns of no project share
-- the pool's own FCM project; APNs apps' campaigns have no label to count. Labels that messages
-- carry themselves, outside campaigns, are not known here and take places too.
CREATE OR REPLACE VIEW herald.campaign_label_budget AS
    WITH today AS (
        SELECT (now() AT TIME ZONE 'America/Los_Angeles')::date AS day
    ),
    -- Today's sends through the index on day (the maintenance leader reads this view at every
    -- upkeep pass: the campaigns long over are never probed one by one).
    sent_today AS (
        SELECT d.campaign_id FROM herald.campaign_days d CROSS JOIN today t WHERE d.day = t.day
    ),
    candidates AS (
        SELECT c.id, c.name, c.project, c.analytics_label, c.state,
               c.id IN (SELECT s.campaign_id FROM sent_today s) AS sent_today, coalesce(c.started_at, c.created_at) AS since
        FROM herald.campaigns c
        WHERE c.analytics_label IS NOT NULL
          AND (c.state IN ('scheduled', 'running', 'paused') OR c.id IN (SELECT s.campaign_id FROM sent_today s))
          AND NOT EXISTS (SELECT 1 FROM herald.projects p WHERE p.name = c.project AND p.service <> 'fcm')
    ),
    firsts AS (
        -- Each label's place is taken by the first campaign that uses it.
        SELECT DISTINCT ON (coalesce(k.project, ''), k.analytics_label)
               coalesce(k.project, '') AS project_key, k.analytics_label, k.sent_today, k.since, k.id
        FROM candidates k
        ORDER BY coalesce(k.project, ''), k.analytics_label, k.sent_today DESC, k.since, k.id
    ),
    ranked AS (
        SELECT f.project_key, f.analytics_label,
               row_number() OVER (PARTITION BY f.project_key ORDER BY f.sent_today DESC, f.since, f.id) AS label_rank,
               count(*) OVER (PARTITION BY f.project_key) AS labels
        FROM firsts f
    )
    SELECT k.id AS campaign_id, k.name, k.project, k.analytics_label, k.state, t.day, k.sent_today,
           r.label_rank, r.labels, r.label_rank <= 100 AS reported
    FROM candidates k
    JOIN ranked r ON r.project_key = coalesce(k.project, '') AND r.analytics_label = k.analytics_label
    CROSS JOIN today t;
