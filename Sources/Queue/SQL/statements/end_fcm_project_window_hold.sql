-- A probe of FCM project $1 sent at $2 (seconds since 1970) was accepted while its spent quota
-- window was held: the window is renewed, and every worker of the project paces at the rate in
-- force again. Nothing changes when the refusal of a request sent later held it again. Returns
-- the state now in force; no row when there is nothing to end.
UPDATE herald.project_rates r SET window_held_until = NULL, window_seen_at = to_timestamp($2::float8)
WHERE r.project_id = $1 AND (r.window_seen_at IS NULL OR r.window_seen_at < to_timestamp($2::float8))
RETURNING r.adapted_per_second, extract(epoch FROM r.adapted_at)::float8 AS adapted_at, r.regain_per_second,
          r.stated_per_second, extract(epoch FROM r.stated_at)::float8 AS stated_at,
          extract(epoch FROM r.window_held_until)::float8 AS window_held_until
