-- Sets the adapted rate of FCM project $1 to $2 a second from now on, and the rate to regain
-- quickly to $5 (NULL: none), unless another worker lowered it since $3 (seconds since 1970, the
-- adapted_at this worker read; NULL: never lowered): one quota episode lowers it once, however
-- many workers saw it. $4 is the ceiling, the bucket's rate for a project without a row yet.
-- Returns the state now in force.
INSERT INTO herald.project_rates AS r (project_id, max_per_second, tokens, refilled_at, adapted_per_second, adapted_at,
                                       regain_per_second)
VALUES ($1, $4::float8, 0, now(), $2::float8, now(), $5::float8)
ON CONFLICT (project_id) DO UPDATE
SET adapted_per_second = excluded.adapted_per_second, adapted_at = excluded.adapted_at,
    regain_per_second = excluded.regain_per_second
WHERE r.adapted_at IS NULL OR r.adapted_at <= to_timestamp($3::float8) + interval '1 millisecond'
RETURNING r.adapted_per_second, extract(epoch FROM r.adapted_at)::float8 AS adapted_at, r.regain_per_second
