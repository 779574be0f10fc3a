-- The campaigns that run or sent today and whose analytics label FCM will not report today
-- (beyond the 100 distinct labels of their FCM project: herald.campaign_label_budget), for the
-- maintenance leader's warning: id, name, state, label, its place, the project's labels, the day.
SELECT b.campaign_id, b.name, b.state, b.analytics_label, b.label_rank, b.labels, to_char(b.day, 'YYYY-MM-DD')
FROM herald.campaign_label_budget b
WHERE NOT b.reported AND (b.state = 'running' OR b.sent_today)
ORDER BY b.campaign_id
