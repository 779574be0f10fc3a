-- docs/legacy.md 4.1's detection rule, with android_v2 among the keys only v1 has.
-- The claim calls it for every job of a labelled campaign, where a SET clause would add about
-- 10 µs a job (measured: 20 against 30 µs a call); so it has none, and every function and
-- operator it uses names its schema instead: no search_path changes what runs. It reads no
-- table: any role granted it may run it as itself.
CREATE OR REPLACE FUNCTION herald.is_legacy(message jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT pg_catalog.jsonb_typeof(message) OPERATOR(pg_catalog.=) 'object'
       AND NOT message OPERATOR(pg_catalog.?|) ARRAY['token', 'topic', 'fid', 'message', 'android', 'android_v2', 'apns', 'webpush', 'fcm_options']
       AND (message OPERATOR(pg_catalog.?|) ARRAY['to', 'registration_ids', 'notification_key', 'priority', 'time_to_live', 'collapse_key',
                                                  'content_available', 'mutable_content', 'restricted_package_name', 'dry_run']
            OR (pg_catalog.jsonb_typeof(message OPERATOR(pg_catalog.->) 'notification') OPERATOR(pg_catalog.=) 'object'
                AND EXISTS (SELECT 1 FROM pg_catalog.jsonb_object_keys(message OPERATOR(pg_catalog.->) 'notification') AS k
                            WHERE NOT k OPERATOR(pg_catalog.=) ANY (ARRAY['title', 'body', 'image']))))
$fn$;
