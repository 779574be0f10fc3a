-- FCM project $1's quota window is spent: every worker of it sends about one message a second
-- (probes) until $2 (seconds since 1970) at the latest, or until a probe is accepted. $3: when
-- the request was sent whose refusal showed it (seconds since 1970): a window a probe sent later
-- found renewed is not held again. A hold already in force keeps the earlier end (a window ends
-- at most a minute after its first refusal). $4 is the ceiling, the bucket's rate for a project
-- without a row yet. Returns the state now in force; no row when a later answer came first.
INSERT INTO herald.project_rates AS r (project_id, max_per_second, tokens, refilled_at, window_held_until, window_seen_at)
VALUES ($1, $4::float8, 0, now(), to_timestamp($2::float8), to_timestamp($3::float8))
ON CONFLICT (project_id) DO UPDATE
SET window_held_until = CASE WHEN r.window_held_until > now() THEN least(r.window_held_until, excluded.window_held_until)
                             ELSE excluded.window_held_until END,
    window_seen_at = excluded.window_seen_at
WHERE r.window_seen_at IS NULL OR r.window_seen_at < excluded.window_seen_at
RETURNING r.adapted_per_second, extract(epoch FROM r.adapted_at)::float8 AS adapted_at, r.regain_per_second,
          r.stated_per_second, extract(epoch FROM r.stated_at)::float8 AS stated_at,
          extract(epoch FROM r.window_held_until)::float8 AS window_held_until
