-- The row trigger for legacy payloads written straight into herald.jobs. It never raises for bad
-- input: a refused row stays for the worker to dead-letter. A multicast is fanned out here, and
-- keeps its campaign and its project on every fanned-out job.
CREATE OR REPLACE FUNCTION herald._legacy_row() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    translation jsonb;
    fanned bigint[];
BEGIN
    IF current_setting('herald.legacy_fanning_out', true) = 'on' OR NOT herald.is_legacy(NEW.message) THEN
        RETURN NEW;
    END IF;
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
    fanned := herald._legacy_fan_out(NEW.message, translation, NEW.run_at, NEW.queue, NEW.priority, NEW.max_attempts, NEW.id,
                                     NEW.campaign_id);
    IF NEW.project IS NOT NULL THEN
        -- Sent for the same project as the row, never with the pool's own credentials.
        UPDATE herald.jobs j SET project = NEW.project WHERE j.id = ANY (fanned) AND j.id <> NEW.id;
    END IF;
    NEW.message := (NEW.message - 'registration_ids')
                   || jsonb_build_object('registration_ids', jsonb_build_array(NEW.message -> 'registration_ids' -> 0));
    RETURN NEW;
END
$fn$;

-- The WHEN clause keeps the cost of a v1 row to a few key lookups: the function runs only for
-- rows without a v1 target that have a legacy-only key (or a notification, checked inside).
CREATE OR REPLACE TRIGGER jobs_legacy BEFORE INSERT ON herald.jobs
    FOR EACH ROW
    WHEN (NEW.kind = 'send'
          AND NOT NEW.message ?| ARRAY['token', 'topic', 'fid', 'android', 'android_v2', 'apns', 'webpush']
          AND NEW.message ?| ARRAY['to', 'registration_ids', 'notification_key', 'priority', 'time_to_live', 'collapse_key',
                                   'content_available', 'mutable_content', 'restricted_package_name', 'dry_run', 'notification'])
    EXECUTE FUNCTION herald._legacy_row();
