-- Takes up to $3 tokens from the bucket of FCM project $1 ($2 per second) at time $4 (seconds
-- since 1970; NULL: now), in a transaction of its own: returns how many were granted and, when
-- fewer than asked, in how many seconds to ask again (none while the project is held back after a
-- quota answer). The claim that follows spends them and gives back the rest
-- (herald.take_project_tokens, Sources/Queue/SQL/functions/take_project_tokens.sql).
SELECT granted, wait_seconds FROM herald.take_project_tokens($1::text, $2::float8, $3::integer, to_timestamp($4::float8))
