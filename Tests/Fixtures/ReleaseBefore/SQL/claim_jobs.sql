-- Claims up to $2 due jobs of the queues $1 (all when NULL) into 'running' under a lease of $3
-- seconds held by $4, within the rates of FCM project $5 ($6 per second; 0: none), of the queues
-- and of the campaigns; $7: the project tokens taken beforehand with take_project_tokens.sql
-- (NULL: none taken); $8: the time of the claim, in seconds since 1970 (NULL: now); $9: the
-- registry project whose jobs are claimed (NULL: jobs of no project). One row per
-- job claimed, each with come_back_in: the seconds after which a limit that held jobs back lets
-- them go (NULL: none did); one row without a job when none was claimed.
-- (herald.claim_batch, Sources/Queue/SQL/functions/claim_batch.sql.)
SELECT c.come_back_in, j.*
FROM herald.claim_batch($1::text[], $2::integer, $3::float8, $4::text, $5::text, $6::float8, $7::integer,
                        to_timestamp($8::float8), $9::text) c
LEFT JOIN LATERAL unnest(c.claimed) j ON true
