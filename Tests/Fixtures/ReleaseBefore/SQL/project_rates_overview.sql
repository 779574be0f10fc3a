-- Every FCM project Herald sends for, as `herald stats` shows it: the rate its last claim used
-- (the adapted one in force), the rate set at its last quota answer and how many seconds ago,
-- the rate it climbs back to quickly after a storm of quota answers (NULL: none), and for how
-- many seconds more it is paused (NULL: not paused).
SELECT coalesce(r.project_id, s.project_id) AS project_id, r.max_per_second AS rate,
       r.adapted_per_second AS lowered_to, extract(epoch FROM now() - r.adapted_at)::float8 AS lowered_ago,
       r.regain_per_second AS regain,
       CASE WHEN s.paused_until > now() THEN extract(epoch FROM s.paused_until - now())::float8 END AS paused_for,
       CASE WHEN s.paused_until > now() THEN s.reason END AS reason
FROM herald.project_rates r
FULL JOIN herald.project_pauses s ON s.project_id = r.project_id
ORDER BY 1
