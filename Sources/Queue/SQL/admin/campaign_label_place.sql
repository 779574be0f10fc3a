-- Campaign $1's place among its FCM project's analytics labels of today (herald.campaign_label_budget):
-- label_rank, labels, the day, whether FCM reports it; and up to $2 of the project's campaigns
-- that go unreported, "name (label)", comma-separated, with how many there are. No row: the
-- campaign has no label, or will not send today.
SELECT b.label_rank, b.labels, to_char(b.day, 'YYYY-MM-DD') AS day, b.reported,
       (SELECT string_agg(u.name || ' (' || u.analytics_label || ')', ', ' ORDER BY u.label_rank, u.campaign_id)
        FROM (SELECT o.name, o.analytics_label, o.label_rank, o.campaign_id FROM herald.campaign_label_budget o
              WHERE o.project IS NOT DISTINCT FROM b.project AND NOT o.reported
              ORDER BY o.label_rank, o.campaign_id LIMIT $2) u) AS unreported,
       (SELECT count(*) FROM herald.campaign_label_budget o WHERE o.project IS NOT DISTINCT FROM b.project AND NOT o.reported) AS unreported_count
FROM herald.campaign_label_budget b WHERE b.campaign_id = $1
