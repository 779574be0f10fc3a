-- The sample batch of the embedded default: $1 jobs in one INSERT ... SELECT, like a campaign. A
-- few emulator test tokens show the other outcomes: a retried 503, pruned tokens, a dead letter.
INSERT INTO herald.jobs (message)
SELECT jsonb_build_object(
           'token', CASE WHEN g % 500 = 0 THEN 'fail-unregistered-' || g
                         WHEN g % 200 = 0 THEN 'fail-unavailable-1-' || g
                         WHEN g = 7 THEN 'fail-invalid-7'
                         ELSE 'sample-device-' || g END,
           'notification', jsonb_build_object('title', 'Hello from Herald', 'body', 'Sample message ' || g),
           'data', jsonb_build_object('sample', g::text))
FROM generate_series(1, $1::int) AS g
