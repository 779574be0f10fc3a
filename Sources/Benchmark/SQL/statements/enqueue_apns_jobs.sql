-- --with apns: jobs $1 to $2 as APNs alerts of app $3 to device tokens made from the job's number
-- (64 hex digits), one INSERT ... SELECT as the FCM jobs are enqueued; each is checked by the
-- trigger jobs_apns as an application's would be.
INSERT INTO herald.jobs (message, project)
SELECT pg_catalog.jsonb_build_object(
           'apns_token', pg_catalog.lpad(pg_catalog.to_hex(g), 64, '0'),
           'apns', pg_catalog.jsonb_build_object(
               'headers', pg_catalog.jsonb_build_object('apns-push-type', 'alert'),
               'payload', pg_catalog.jsonb_build_object(
                   'aps', pg_catalog.jsonb_build_object('alert', pg_catalog.jsonb_build_object('title', 'Herald bench', 'body', 'Message ' || g)),
                   'n', g::text))),
       $3::text
FROM generate_series($1::bigint, $2::bigint) AS g
