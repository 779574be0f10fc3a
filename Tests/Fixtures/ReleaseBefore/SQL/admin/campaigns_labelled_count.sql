-- How many campaigns campaigns_labelled.sql would show without its limit.
SELECT count(*) FROM herald.campaigns c
WHERE c.state NOT IN ('finished', 'cancelled') OR c.finished_at IS NULL OR c.finished_at > now() - interval '1 day'
