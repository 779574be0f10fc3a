-- Jobs $1 to $2: valid v1 messages to tokens bench-<g>, addressed in turn to the registry projects $3
-- (job g to the (g mod n)-th; none: jobs of no project), one INSERT ... SELECT as a campaign is enqueued.
INSERT INTO herald.jobs (message, project)
SELECT pg_catalog.jsonb_build_object(
           'token', 'bench-' || g,
           'notification', pg_catalog.jsonb_build_object('title', 'Herald bench', 'body', 'Message ' || g),
           'data', pg_catalog.jsonb_build_object('n', g::text)),
       ($3::text[])[1 + g % nullif(pg_catalog.cardinality($3::text[]), 0)]
FROM generate_series($1::bigint, $2::bigint) AS g
