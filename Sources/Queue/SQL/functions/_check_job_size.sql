-- The door's limits on a job (constraint jobs_door_limits, migration 240), called only for a
-- message whose stored size passes 4,096 bytes: a smaller one cannot hold a target over the limit
-- nor be over the message limit, so a plain INSERT of ordinary jobs never calls it.
-- * A send's message, as JSON text, at most 32,768 bytes (FCM takes 4,096 bytes of notification
--   and data payload, plus the android, apns and webpush blocks around it); a device-group
--   operation's at most 131,072 bytes (a group's 20 members at 4,096 bytes each, and room).
-- * Each target (token, topic, condition, a legacy to or registration_ids entry) at most 4,096
--   bytes (FCM's registration tokens are about 160 bytes; herald bench's longest are 1,000).
-- Over a limit: SQLSTATE 54000 (program_limit_exceeded), naming the limit and what to do.
-- Returns true otherwise, so the constraint holds.
CREATE OR REPLACE FUNCTION herald._check_job_size(kind text, message jsonb)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog AS $fn$
DECLARE
    limit_bytes integer := CASE WHEN kind = 'group' THEN 131072 ELSE 32768 END;
    size bigint;
    field text;
    target text;
BEGIN
    IF message IS NULL THEN
        RETURN true;
    END IF;
    size := octet_length(message::text);
    IF size > limit_bytes THEN
        RAISE EXCEPTION 'herald.jobs.message: % bytes, over the limit of % bytes for a % job', size, limit_bytes,
                CASE WHEN kind = 'group' THEN 'device-group' ELSE 'send' END
            USING ERRCODE = 'program_limit_exceeded',
                  HINT = 'FCM takes 4,096 bytes of notification and data payload; send large content by reference '
                      || '(a URL or an id the app fetches) instead of in the message.';
    END IF;
    IF jsonb_typeof(message) <> 'object' THEN
        RETURN true;
    END IF;
    FOREACH field IN ARRAY ARRAY['token', 'topic', 'condition', 'to', 'notification_key_name'] LOOP
        target := message ->> field;
        IF octet_length(target) > 4096 THEN
            RAISE EXCEPTION 'herald.jobs.message.%: % bytes, over the limit of 4,096 bytes for a target', field, octet_length(target)
                USING ERRCODE = 'program_limit_exceeded',
                      HINT = 'A registration token is about 160 bytes: check that the right value is given as the target.';
        END IF;
    END LOOP;
    IF jsonb_typeof(message -> 'registration_ids') = 'array' THEN
        FOR target IN SELECT t FROM jsonb_array_elements_text(message -> 'registration_ids') AS e(t) LOOP
            IF octet_length(target) > 4096 THEN
                RAISE EXCEPTION 'herald.jobs.message.registration_ids: a token of % bytes, over the limit of 4,096 bytes for a target', octet_length(target)
                    USING ERRCODE = 'program_limit_exceeded',
                          HINT = 'A registration token is about 160 bytes: check that the right value is given as the target.';
            END IF;
        END LOOP;
    END IF;
    RETURN true;
END
$fn$;
