-- Herald: legacy payloads as jobs, dry runs, and results in the legacy shape.
--
-- * herald.jobs.validate_only: the request carries "validate_only": true, so FCM validates the
--   message and delivers nothing. Such a job still ends 'completed' (with the name FCM returned);
--   validate_only = true on a completed job means "validated, not delivered".
-- * herald.enqueue(..., validate_only => true) sets it; legacy dry_run sets it too.
-- * herald.enqueue_legacy(payload, ...) / herald.enqueue_legacy_form(body, ...): one job per
--   target, in target order, or SQLSTATE 22023 and nothing enqueued.
-- * A legacy payload written straight into herald.jobs.message (by code written for the old API)
--   is recognised by the rule of LEGACY.md 4.1. A valid multicast row is fanned out here into one
--   row per registration token (the inserted row keeps the first token, so INSERT ... RETURNING id
--   still answers); the worker translates each single-target row when it builds the request, so
--   apns-expiration counts from that moment on every attempt. A row the translation refuses is
--   left as it is, never raising in the application's transaction, and the worker dead-letters it
--   with the Table 9 code and path before any request.
-- * herald.legacy_result(job_ids) answers in the legacy multicast shape (LEGACY.md 4.10).

ALTER TABLE herald.jobs ADD COLUMN validate_only boolean NOT NULL DEFAULT false;
-- A dead letter remembers it, so replaying a dry run never delivers it for real.
ALTER TABLE herald.dead_letters ADD COLUMN validate_only boolean NOT NULL DEFAULT false;

-- The jobs of one fanned-out legacy request, so legacy_result can name the multicast and a row
-- written by a trigger can find its siblings (herald.legacy_multicast).
CREATE TABLE herald.legacy_multicasts (
    job_id       bigint PRIMARY KEY,
    multicast_id bigint NOT NULL,
    position     integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX legacy_multicasts_multicast ON herald.legacy_multicasts (multicast_id, position);
CREATE INDEX legacy_multicasts_created ON herald.legacy_multicasts (created_at);

-- enqueue's ON CONFLICT names the predicate of jobs_dedupe as migration 040 made it (scheduled
-- jobs are pending too).
DROP FUNCTION herald.enqueue(jsonb, timestamptz, text, integer, integer, text);

-- enqueue: callable from any transaction or trigger. A dedupe_key that is already pending
-- (scheduled, available or running) returns the existing job's id instead of adding a second one.
-- validate_only: FCM validates the message and delivers nothing (a dry run).
CREATE FUNCTION herald.enqueue(message jsonb, run_at timestamptz DEFAULT now(),
                               queue text DEFAULT 'default', priority integer DEFAULT 0,
                               max_attempts integer DEFAULT 25, dedupe_key text DEFAULT NULL,
                               validate_only boolean DEFAULT false)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog AS $$
#variable_conflict use_column
DECLARE
    new_id bigint;
BEGIN
    IF enqueue.message IS NULL THEN
        RAISE EXCEPTION 'herald.enqueue: message must not be null';
    END IF;
    -- Insert, or find the pending job holding the key; if that one finishes in between, insert again.
    LOOP
        INSERT INTO herald.jobs (message, run_at, queue, priority, max_attempts, dedupe_key, validate_only)
        VALUES (enqueue.message, coalesce(enqueue.run_at, now()), coalesce(enqueue.queue, 'default'),
                coalesce(enqueue.priority, 0), coalesce(enqueue.max_attempts, 25), enqueue.dedupe_key,
                coalesce(enqueue.validate_only, false))
        ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('scheduled', 'available', 'running') DO NOTHING
        RETURNING id INTO new_id;
        EXIT WHEN new_id IS NOT NULL;
        SELECT j.id INTO new_id FROM herald.jobs j
        WHERE j.dedupe_key = enqueue.dedupe_key AND j.state IN ('scheduled', 'available', 'running');
        EXIT WHEN new_id IS NOT NULL;
    END LOOP;
    RETURN new_id;
END $$;

-- retry_dead_letter: as in migration 001, keeping validate_only.
CREATE OR REPLACE FUNCTION herald.retry_dead_letter(dead_letter_id bigint)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    dead herald.dead_letters;
    new_id bigint;
BEGIN
    SELECT * INTO dead FROM herald.dead_letters d WHERE d.id = dead_letter_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'herald.retry_dead_letter: no dead letter with id %', dead_letter_id;
    END IF;
    INSERT INTO herald.jobs (queue, kind, priority, message, max_attempts, dedupe_key, validate_only)
    VALUES (dead.queue, dead.kind, dead.priority, dead.message, dead.max_attempts, dead.dedupe_key, dead.validate_only)
    ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN ('scheduled', 'available', 'running') DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        -- Keep the dead letter: its message is not the pending job's, whatever the key says.
        RAISE EXCEPTION 'herald.retry_dead_letter: job % with dedupe_key % is pending; the dead letter % is kept',
            (SELECT j.id FROM herald.jobs j WHERE j.dedupe_key = dead.dedupe_key AND j.state IN ('scheduled', 'available', 'running')),
            dead.dedupe_key, dead_letter_id;
    END IF;
    DELETE FROM herald.dead_letters d WHERE d.id = dead_letter_id;
    RETURN new_id;
END $$;

-- LEGACY.md 4.1's detection rule for a value found where a v1 message was expected.
CREATE FUNCTION herald.is_legacy(message jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT jsonb_typeof(message) = 'object'
       AND NOT message ?| ARRAY['token', 'topic', 'fid', 'message', 'android', 'apns', 'webpush', 'fcm_options']
       AND (message ?| ARRAY['to', 'registration_ids', 'notification_key', 'priority', 'time_to_live', 'collapse_key',
                             'content_available', 'mutable_content', 'restricted_package_name', 'dry_run']
            OR (jsonb_typeof(message -> 'notification') = 'object'
                AND EXISTS (SELECT 1 FROM jsonb_object_keys(message -> 'notification') AS k
                            WHERE k NOT IN ('title', 'body', 'image'))))
$fn$;

-- Inserts one job per target of an accepted translation (the first row given by first_id when a
-- row already exists) and records the multicast. Returns the job ids in target order.
CREATE FUNCTION herald._legacy_fan_out(payload jsonb, translation jsonb, run_at timestamptz, queue text,
                                       priority integer, max_attempts integer, first_id bigint)
RETURNS bigint[] LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    targets integer := jsonb_array_length(translation -> 'messages');
    tokens jsonb := payload -> 'registration_ids';
    ids bigint[];
BEGIN
    -- The ids first, so each row's position is known without relying on insertion order.
    ids := ARRAY(SELECT nextval(pg_get_serial_sequence('herald.jobs', 'id'))
                 FROM generate_series(CASE WHEN first_id IS NULL THEN 1 ELSE 2 END, targets));
    IF first_id IS NOT NULL THEN
        ids := first_id || ids;
    END IF;
    -- The rows stay legacy (one registration id each), so the worker builds each request with the
    -- clock of its attempt; the fan-out itself is not translated again.
    PERFORM set_config('herald.legacy_fanning_out', 'on', true);
    INSERT INTO herald.jobs (id, queue, priority, message, run_at, max_attempts, validate_only)
    SELECT ids[x.o], coalesce(_legacy_fan_out.queue, 'default'), coalesce(_legacy_fan_out.priority, 0),
           CASE WHEN tokens IS NULL THEN payload
                ELSE (payload - 'registration_ids') || jsonb_build_object('registration_ids', jsonb_build_array(tokens -> (x.o - 1))) END,
           coalesce(_legacy_fan_out.run_at, now()), coalesce(_legacy_fan_out.max_attempts, 25),
           (translation ->> 'validate_only')::boolean
    FROM generate_series(1, targets) AS x(o)
    WHERE first_id IS NULL OR x.o > 1;
    PERFORM set_config('herald.legacy_fanning_out', '', true);
    IF targets > 1 THEN
        INSERT INTO herald.legacy_multicasts (job_id, multicast_id, position)
        SELECT ids[o], ids[1], o - 1 FROM generate_series(1, targets) AS o;
        -- Memberships outlive their jobs only for a while: legacy_result takes job ids.
        DELETE FROM herald.legacy_multicasts m WHERE m.created_at < now() - interval '7 days';
    END IF;
    RETURN ids;
END
$fn$;

-- enqueue_legacy: one job per target, in target order; an invalid payload raises SQLSTATE 22023
-- naming its Table 9 code and legacy field, and nothing is enqueued.
CREATE FUNCTION herald.enqueue_legacy(payload jsonb, run_at timestamptz DEFAULT now(), queue text DEFAULT 'default',
                                      priority integer DEFAULT 0, max_attempts integer DEFAULT 25)
RETURNS bigint[] LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    translation jsonb := herald._legacy_raise(herald._legacy_translate(payload, floor(extract(epoch FROM now()))::bigint));
BEGIN
    RETURN herald._legacy_fan_out(payload, translation, run_at, queue, priority, max_attempts, NULL);
END
$fn$;

-- The plain-text form (Table 3): stored as the JSON payload it stands for.
CREATE FUNCTION herald.enqueue_legacy_form(body text, run_at timestamptz DEFAULT now(), queue text DEFAULT 'default',
                                           priority integer DEFAULT 0, max_attempts integer DEFAULT 25)
RETURNS bigint[] LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    payload jsonb := herald._legacy_raise(herald._legacy_form_payload(body));
BEGIN
    RETURN herald.enqueue_legacy(payload, run_at, queue, priority, max_attempts);
END
$fn$;

-- The row trigger for legacy payloads written straight into herald.jobs (see the top of this
-- file). It never raises for bad input: a refused row stays for the worker to dead-letter.
CREATE FUNCTION herald._legacy_row() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    translation jsonb;
BEGIN
    IF current_setting('herald.legacy_fanning_out', true) = 'on' OR NOT herald.is_legacy(NEW.message) THEN
        RETURN NEW;
    END IF;
    -- A single-target row is left to the worker, which translates it for every attempt anyway;
    -- translating it here too would cost a millisecond a row on bulk inserts.
    IF jsonb_typeof(NEW.message -> 'registration_ids') IS DISTINCT FROM 'array'
       OR jsonb_array_length(NEW.message -> 'registration_ids') < 2 THEN
        NEW.validate_only := NEW.validate_only OR coalesce(herald._legacy_flag(NEW.message -> 'dry_run'), false);
        RETURN NEW;
    END IF;
    translation := herald._legacy_translate(NEW.message, floor(extract(epoch FROM now()))::bigint);
    IF translation ? 'error' THEN
        RETURN NEW;
    END IF;
    NEW.validate_only := NEW.validate_only OR (translation ->> 'validate_only')::boolean;
    PERFORM herald._legacy_fan_out(NEW.message, translation, NEW.run_at, NEW.queue, NEW.priority, NEW.max_attempts, NEW.id);
    NEW.message := (NEW.message - 'registration_ids')
                   || jsonb_build_object('registration_ids', jsonb_build_array(NEW.message -> 'registration_ids' -> 0));
    RETURN NEW;
END
$fn$;

-- The WHEN clause keeps the cost of a v1 row to a few key lookups: the function runs only for
-- rows without a v1 target that have a legacy-only key (or a notification, checked inside).
CREATE TRIGGER jobs_legacy BEFORE INSERT ON herald.jobs
    FOR EACH ROW
    WHEN (NEW.kind = 'send'
          AND NOT NEW.message ?| ARRAY['token', 'topic', 'fid', 'android', 'apns', 'webpush']
          AND NEW.message ?| ARRAY['to', 'registration_ids', 'notification_key', 'priority', 'time_to_live', 'collapse_key',
                                   'content_available', 'mutable_content', 'restricted_package_name', 'dry_run', 'notification'])
    EXECUTE FUNCTION herald._legacy_row();

-- The job ids of the legacy request job_id belongs to, in registration_ids order (just job_id
-- when it was not a multicast).
CREATE FUNCTION herald.legacy_multicast(job_id bigint) RETURNS bigint[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce((SELECT array_agg(m.job_id ORDER BY m.position) FROM herald.legacy_multicasts m
                     WHERE m.multicast_id = (SELECT o.multicast_id FROM herald.legacy_multicasts o WHERE o.job_id = legacy_multicast.job_id)),
                    ARRAY[legacy_multicast.job_id])
$fn$;

-- A finished job's outcome as a legacy error string (Table 9; LEGACY.md 4.10), from the reason
-- recorded with it: a v1 error code, "gave up ...; last error: <code>: ...", or a legacy rejection.
CREATE FUNCTION herald._legacy_error(reason text, message jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE
        WHEN reason ~ '^(MissingRegistration|InvalidParameters|InvalidTtl|InvalidDataKey|MessageTooBig|InvalidJson) at legacy'
            THEN split_part(reason, ' ', 1)
        WHEN reason ~ '^message[.:]' THEN 'InvalidParameters'
        ELSE CASE split_part(coalesce(substring(reason FROM 'last error: (.*)$'), reason), ':', 1)
            WHEN 'UNREGISTERED' THEN 'NotRegistered'
            WHEN 'SENDER_ID_MISMATCH' THEN 'MismatchSenderId'
            WHEN 'PERMISSION_DENIED' THEN 'MismatchSenderId'
            WHEN 'UNAVAILABLE' THEN 'Unavailable'
            WHEN 'INTERNAL' THEN 'InternalServerError'
            WHEN 'THIRD_PARTY_AUTH_ERROR' THEN 'InvalidApnsCredential'
            WHEN 'APNS_AUTH_ERROR' THEN 'InvalidApnsCredential'
            WHEN 'QUOTA_EXCEEDED' THEN
                CASE WHEN message ?| ARRAY['topic', 'condition'] OR message ->> 'to' LIKE '/topics/%'
                     THEN 'TopicsMessageRateExceeded' ELSE 'DeviceMessageRateExceeded' END
            WHEN 'INVALID_ARGUMENT' THEN 'InvalidRegistration'
            ELSE 'InternalServerError'
        END
    END
$fn$;

-- legacy_result: the jobs' outcomes in the legacy multicast shape, results[i] for job_ids[i]:
-- {"message_id": ...}, {"error": "<Table 9 string>"}, or {"pending": true} while the job is not
-- final (then counted in neither success nor failure).
CREATE FUNCTION herald.legacy_result(job_ids bigint[]) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    results jsonb := '[]';
    item jsonb;
    success integer := 0;
    failure integer := 0;
    x record;
    job record;
    dead record;
BEGIN
    IF job_ids IS NULL OR cardinality(job_ids) = 0 THEN
        RAISE EXCEPTION 'herald.legacy_result: give the job ids herald.enqueue_legacy returned'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR x IN SELECT u.id, u.o FROM unnest(job_ids) WITH ORDINALITY AS u(id, o) ORDER BY u.o LOOP
        SELECT j.state, j.fcm_message_name, j.last_error, j.message INTO job FROM herald.jobs j WHERE j.id = x.id;
        IF FOUND THEN
            IF job.state = 'completed' THEN
                item := jsonb_build_object('message_id', regexp_replace(coalesce(job.fcm_message_name, x.id::text), '^.*/', ''));
            ELSIF job.state = 'discarded' AND (job.last_error LIKE 'UNREGISTERED%' OR job.last_error LIKE '%was pruned earlier%') THEN
                item := '{"error": "NotRegistered"}';
            ELSIF job.state IN ('discarded', 'cancelled') THEN
                -- Not a Table 9 string: nobody at FCM refused it, the job was stopped here.
                item := '{"error": "Cancelled"}';
            ELSE
                item := '{"pending": true}';
            END IF;
        ELSE
            SELECT d.reason, d.message INTO dead FROM herald.dead_letters d WHERE d.job_id = x.id ORDER BY d.dead_at DESC, d.id DESC LIMIT 1;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'herald.legacy_result: job % is neither in herald.jobs nor in herald.dead_letters', x.id
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Finished jobs are deleted after the worker''s --retention (24h by default); read results before then.';
            END IF;
            item := jsonb_build_object('error', herald._legacy_error(dead.reason, dead.message));
        END IF;
        IF item ? 'message_id' THEN success := success + 1; ELSIF item ? 'error' THEN failure := failure + 1; END IF;
        results := results || jsonb_build_array(item);
    END LOOP;
    RETURN jsonb_build_object(
        'multicast_id', coalesce((SELECT m.multicast_id FROM herald.legacy_multicasts m WHERE m.job_id = job_ids[1]), job_ids[1]),
        'success', success, 'failure', failure, 'canonical_ids', 0, 'results', results);
END
$fn$;
