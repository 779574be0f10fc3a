-- Records one project's fetch of FCM's delivery data ($1 project; $2 outcome: fetched, skipped
-- or failed; $3 the reason of a skip or failure; $4 rows stored; $5 pages read): the time of the
-- attempt, and of the last success, which the daily fetch and the pages read.
INSERT INTO herald.delivery_data_fetches AS f (project, attempted_at, fetched_at, rows_stored, pages, outcome, reason)
VALUES ($1, now(), CASE WHEN $2 = 'fetched' THEN now() END, coalesce($4::int, 0), coalesce($5::int, 0), $2, $3)
ON CONFLICT ON CONSTRAINT delivery_data_fetches_pkey DO UPDATE SET
    attempted_at = excluded.attempted_at,
    fetched_at = coalesce(excluded.fetched_at, f.fetched_at),
    rows_stored = CASE WHEN excluded.outcome = 'fetched' THEN excluded.rows_stored ELSE f.rows_stored END,
    pages = CASE WHEN excluded.outcome = 'fetched' THEN excluded.pages ELSE f.pages END,
    outcome = excluded.outcome,
    reason = excluded.reason
