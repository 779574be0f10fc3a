-- The door's limits on a job (trigger jobs_size_limits below), run only for a message
-- whose stored size passes 4,096 bytes: a smaller one can neither hold a target over the limit nor
-- be over the message limit, so a plain INSERT of ordinary jobs never calls it (the trigger's WHEN
-- is one pg_column_size per row, without copying the message).
-- * A send's message, as JSON text, at most 32,768 bytes (FCM takes 4,096 bytes of notification
--   and data payload, plus the android, apns and webpush blocks around it); a device-group
--   operation's at most 131,072 bytes (a group's 20 members at 4,096 bytes each, and room). A
--   legacy multicast (registration_ids, up to 1,000 tokens) is fanned out by jobs_legacy before
--   this runs; one that is not is measured by its tokens alone.
-- * Each target (token, topic, condition, a legacy to or registration_ids entry, a group's name)
--   at most 4,096 bytes (FCM's registration tokens are about 160 bytes; herald bench's 1,000).
-- Over a limit: SQLSTATE 54000 (program_limit_exceeded), naming the limit and what to do.
-- A trigger rather than a CHECK constraint: rows already in herald.jobs are not checked when a
-- worker claims or settles them (the worker dead-letters those itself, Sources/FCM/DoorLimits.swift).
CREATE OR REPLACE FUNCTION herald._check_job_size() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    limit_bytes integer := CASE WHEN NEW.kind = 'group' THEN 131072 ELSE 32768 END;
    size bigint;
    field text;
    target text;
BEGIN
    IF jsonb_typeof(NEW.message) = 'object' THEN
        FOREACH field IN ARRAY ARRAY['token', 'topic', 'condition', 'to', 'notification_key_name'] LOOP
            target := NEW.message ->> field;
            IF octet_length(target) > 4096 THEN
                RAISE EXCEPTION 'herald.jobs.message.%: % bytes, over the limit of 4,096 bytes for a target', field, octet_length(target)
                    USING ERRCODE = 'program_limit_exceeded',
                          HINT = 'A registration token is about 160 bytes: check that the right value is given as the target.';
            END IF;
        END LOOP;
        IF jsonb_typeof(NEW.message -> 'registration_ids') = 'array' THEN
            FOR target IN SELECT t FROM jsonb_array_elements_text(NEW.message -> 'registration_ids') AS e(t) LOOP
                IF octet_length(target) > 4096 THEN
                    RAISE EXCEPTION 'herald.jobs.message.registration_ids: a token of % bytes, over the limit of 4,096 bytes for a target', octet_length(target)
                        USING ERRCODE = 'program_limit_exceeded',
                              HINT = 'A registration token is about 160 bytes: check that the right value is given as the target.';
                END IF;
            END LOOP;
            IF NEW.kind = 'send' THEN
                RETURN NEW;
            END IF;
        END IF;
    END IF;
    size := octet_length(NEW.message::text);
    IF size > limit_bytes THEN
        RAISE EXCEPTION 'herald.jobs.message: % bytes, over the limit of % bytes for a % job', size, limit_bytes,
                CASE WHEN NEW.kind = 'group' THEN 'device-group' ELSE 'send' END
            USING ERRCODE = 'program_limit_exceeded',
                  HINT = 'FCM takes 4,096 bytes of notification and data payload; send large content by reference '
                      || '(a URL or an id the app fetches) instead of in the message.';
    END IF;
    RETURN NEW;
END
$fn$;

-- Named to run after the other BEFORE triggers (they run in name order): jobs_legacy fans a
-- legacy multicast out first.
CREATE OR REPLACE TRIGGER jobs_size_limits BEFORE INSERT OR UPDATE OF message, kind ON herald.jobs
    FOR EACH ROW WHEN (pg_column_size(NEW.message) > 4096)
    EXECUTE FUNCTION herald._check_job_size();
