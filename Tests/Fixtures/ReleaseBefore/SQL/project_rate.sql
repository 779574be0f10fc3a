-- The adapted rate of FCM project $1 (herald.project_rates, migrations 120 and 170): the rate
-- set after its last quota answer and when (seconds since 1970), the rate to regain quickly
-- after it (NULL: none), and until when the project is paused (seconds since 1970; NULL when it
-- is not). No row: nothing was adapted yet.
SELECT r.adapted_per_second, extract(epoch FROM r.adapted_at)::float8 AS adapted_at, r.regain_per_second,
       (SELECT extract(epoch FROM s.paused_until)::float8 FROM herald.project_pauses s
        WHERE s.project_id = $1 AND s.paused_until > now()) AS paused_until
FROM (SELECT $1::text AS project_id) p
LEFT JOIN herald.project_rates r ON r.project_id = p.project_id
