-- The token registry's aging rule at time $1 (seconds since 1970; NULL: now), at most $2 tokens
-- marked and $2 pruned (functions/age_tokens.sql).
SELECT marked_stale, pruned FROM herald.age_tokens(coalesce(to_timestamp($1::float8), now()), $2::integer)
