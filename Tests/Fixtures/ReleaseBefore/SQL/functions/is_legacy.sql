-- docs/legacy.md 4.1's detection rule, with android_v2 among the keys only v1 has.
CREATE OR REPLACE FUNCTION herald.is_legacy(message jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT jsonb_typeof(message) = 'object'
       AND NOT message ?| ARRAY['token', 'topic', 'fid', 'message', 'android', 'android_v2', 'apns', 'webpush', 'fcm_options']
       AND (message ?| ARRAY['to', 'registration_ids', 'notification_key', 'priority', 'time_to_live', 'collapse_key',
                             'content_available', 'mutable_content', 'restricted_package_name', 'dry_run']
            OR (jsonb_typeof(message -> 'notification') = 'object'
                AND EXISTS (SELECT 1 FROM jsonb_object_keys(message -> 'notification') AS k
                            WHERE k NOT IN ('title', 'body', 'image'))))
$fn$;
