-- Records projects' fetches of FCM's delivery data: $1 a JSON array of {project, outcome
-- (fetched, skipped or failed), reason (of a skip or failure), rows (stored), pages (read)}: the
-- time of the attempt, and of the last success, which the daily fetch and the pages read. One
-- statement for the projects a leader skips at once (those without apps).
INSERT INTO herald.delivery_data_fetches AS f (project, attempted_at, fetched_at, rows_stored, pages, outcome, reason)
SELECT x.project, now(), CASE WHEN x.outcome = 'fetched' THEN now() END, coalesce(x.rows, 0), coalesce(x.pages, 0), x.outcome, x.reason
FROM jsonb_to_recordset($1::jsonb) AS x(project text, outcome text, reason text, rows int, pages int)
ORDER BY x.project
ON CONFLICT ON CONSTRAINT delivery_data_fetches_pkey DO UPDATE SET
    attempted_at = excluded.attempted_at,
    fetched_at = coalesce(excluded.fetched_at, f.fetched_at),
    rows_stored = CASE WHEN excluded.outcome = 'fetched' THEN excluded.rows_stored ELSE f.rows_stored END,
    pages = CASE WHEN excluded.outcome = 'fetched' THEN excluded.pages ELSE f.pages END,
    outcome = excluded.outcome,
    reason = excluded.reason
