-- An APNs job (a message with apns_token, for Apple's provider API) is checked when it is
-- written, by herald.enqueue or by an INSERT ... SELECT of the application's own, so what cannot
-- be sent is refused naming the field rather than dead-lettered later:
-- * its project (herald.jobs.project) is an APNs app of the registry (service 'apns'); left NULL,
--   it is the one APNs app registered, and with none or several the row is refused, saying so;
-- * the message passes the APNs rules (herald.validate_apns_message; every issue is named).
-- The trigger runs only for rows whose message has apns_token, so FCM jobs cost one key lookup of
-- their message. Named to run before jobs_project (BEFORE triggers run in name order), which
-- then finds the project it set. The worker checks a claimed row again (APNsMessageRules), as
-- rows can be older than the rules.
CREATE OR REPLACE FUNCTION herald._check_apns_job() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    apps text[];
    entry_service text;
    issues text[];
BEGIN
    IF NEW.project IS NULL THEN
        apps := ARRAY(SELECT p.name FROM herald.projects p WHERE p.service = 'apns' ORDER BY p.name LIMIT 3);
        IF cardinality(apps) = 0 THEN
            RAISE EXCEPTION 'herald.jobs.project: an APNs message (with apns_token) is sent for an APNs app, and none is registered'
                USING ERRCODE = 'foreign_key_violation',
                      HINT = 'Register the app first: herald apns add APP --key-file FILE --key-id KID --team-id TEAM --topic BUNDLE_ID (or herald.add_apns_app).';
        ELSIF cardinality(apps) > 1 THEN
            RAISE EXCEPTION 'herald.jobs.project: an APNs message (with apns_token) must name its app when several are registered (%)',
                    array_to_string(apps[1:2], ', ') || CASE WHEN cardinality(apps) > 2 THEN ', ...' ELSE '' END
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Pass apns_app => ''APP'' to herald.enqueue, or set the project column; herald apns list shows the apps.';
        END IF;
        NEW.project := apps[1];
    ELSE
        SELECT p.service INTO entry_service FROM herald.projects p WHERE p.name = NEW.project;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'herald.jobs.project: no APNs app named "%" in the registry', left(NEW.project, 100)
                USING ERRCODE = 'foreign_key_violation',
                      HINT = 'herald apns list shows the apps; herald apns add (or herald.add_apns_app) registers one.';
        ELSIF entry_service <> 'apns' THEN
            RAISE EXCEPTION 'herald.jobs.project: "%" is an FCM project, not an APNs app; a message with apns_token is sent for an APNs app',
                    NEW.project
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Give an APNs app (herald apns list), or send through FCM with token instead of apns_token.';
        END IF;
    END IF;
    -- A message over the door's byte count (jobs_size_limits, 32,768 bytes for a send) is
    -- refused there, by one octet_length, after this trigger: walking it for the APNs rules
    -- first would spend a second on a few megabytes for the same refusal.
    IF pg_column_size(NEW.message) > 4096 AND octet_length(NEW.message::text) > 32768 THEN
        RETURN NEW;
    END IF;
    issues := herald.validate_apns_message(NEW.message);
    IF cardinality(issues) > 0 THEN
        RAISE EXCEPTION 'herald.jobs.message: an APNs message that cannot be sent: %', array_to_string(issues, '; ')
            USING ERRCODE = 'check_violation',
                  HINT = 'herald.validate_apns_message(message) lists the issues; docs/sql-api.md describes an APNs message.';
    END IF;
    RETURN NEW;
END
$fn$;

CREATE OR REPLACE TRIGGER jobs_apns BEFORE INSERT OR UPDATE OF message, project ON herald.jobs
    FOR EACH ROW WHEN (NEW.message ? 'apns_token')
    EXECUTE FUNCTION herald._check_apns_job();
