-- Sets the quota FCM stated for project $1 ($2 messages a second, from a quota answer's
-- quota_limit_value per quota_unit) and the adapted rate it allows ($3 a second) from now on,
-- for every worker of the project; the rate to regain is cleared (the limit is known, nothing is
-- to be found). $4 is the ceiling, the bucket's rate for a project without a row yet. Returns the
-- state now in force.
INSERT INTO herald.project_rates AS r (project_id, max_per_second, tokens, refilled_at, adapted_per_second, adapted_at,
                                       regain_per_second, stated_per_second, stated_at)
VALUES ($1, $4::float8, 0, now(), $3::float8, now(), NULL, $2::float8, now())
ON CONFLICT (project_id) DO UPDATE
SET adapted_per_second = excluded.adapted_per_second, adapted_at = excluded.adapted_at, regain_per_second = NULL,
    stated_per_second = excluded.stated_per_second, stated_at = excluded.stated_at
RETURNING r.adapted_per_second, extract(epoch FROM r.adapted_at)::float8 AS adapted_at, r.regain_per_second,
          r.stated_per_second, extract(epoch FROM r.stated_at)::float8 AS stated_at
