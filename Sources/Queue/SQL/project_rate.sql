-- The adapted rate of FCM project $1 (herald.project_rates, migrations/120_fcm_limits.sql): the
-- rate set after its last quota answer and when (seconds since 1970), and until when the project
-- is paused (seconds since 1970; NULL when it is not). No row: nothing was adapted yet.
SELECT r.adapted_per_second, extract(epoch FROM r.adapted_at)::float8 AS adapted_at,
       (SELECT extract(epoch FROM s.paused_until)::float8 FROM herald.project_pauses s
        WHERE s.project_id = $1 AND s.paused_until > now()) AS paused_until
FROM (SELECT $1::text AS project_id) p
LEFT JOIN herald.project_rates r ON r.project_id = p.project_id
