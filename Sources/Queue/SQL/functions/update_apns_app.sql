-- update_apns_app: corrects a registered APNs app in place: where its .p8 key is (`key_file`, a
-- path or env:VAR, never the key), its key id, team id, topic (bundle id), environment
-- (`sandbox`: true for Apple's development environment, false for production) and `max_rate`. A
-- value left null is kept; `clear_max_rate` puts the app back on the pool's --max-rate. The
-- app's pause, if any, stays: resume it once it is right (herald.resume_project_sending). Every
-- running pool takes the new entry up at its next claim of the app (the NOTIFY below), not at
-- its next reading of the registry. Returns whether anything changed.
CREATE OR REPLACE FUNCTION herald.update_apns_app(name text, key_file text DEFAULT NULL, key_id text DEFAULT NULL,
                                                  team_id text DEFAULT NULL, topic text DEFAULT NULL,
                                                  sandbox boolean DEFAULT NULL, max_rate double precision DEFAULT NULL,
                                                  clear_max_rate boolean DEFAULT false)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p herald.projects := herald._known_project(update_apns_app.name, 'herald.update_apns_app');
    after herald.projects;
    violated text;
BEGIN
    IF p.service <> 'apns' THEN
        RAISE EXCEPTION 'herald.update_apns_app: "%" is an FCM project, not an APNs app', p.name
            USING ERRCODE = 'invalid_parameter_value', HINT = 'herald.update_project changes an FCM project.';
    END IF;
    IF update_apns_app.max_rate IS NOT NULL AND coalesce(update_apns_app.clear_max_rate, false) THEN
        RAISE EXCEPTION 'herald.update_apns_app: give max_rate or clear_max_rate, not both'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    BEGIN
        UPDATE herald.projects r
        SET credentials = coalesce(update_apns_app.key_file, r.credentials),
            apns_key_id = coalesce(update_apns_app.key_id, r.apns_key_id),
            apns_team_id = coalesce(update_apns_app.team_id, r.apns_team_id),
            apns_topic = coalesce(update_apns_app.topic, r.apns_topic),
            apns_sandbox = coalesce(update_apns_app.sandbox, r.apns_sandbox),
            max_rate = CASE WHEN coalesce(update_apns_app.clear_max_rate, false) THEN NULL
                            ELSE coalesce(update_apns_app.max_rate, r.max_rate) END
        WHERE r.name = p.name
        RETURNING r.* INTO after;
    EXCEPTION WHEN check_violation THEN
        GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
        PERFORM herald._registry_refusal('herald.update_apns_app', violated,
            CASE violated WHEN 'projects_credentials_reference' THEN update_apns_app.key_file
                          WHEN 'projects_apns_key_id_shape' THEN update_apns_app.key_id
                          WHEN 'projects_apns_team_id_shape' THEN update_apns_app.team_id
                          WHEN 'projects_apns_topic_shape' THEN update_apns_app.topic
                          ELSE update_apns_app.max_rate::text END);
    END;
    IF after IS NOT DISTINCT FROM p THEN
        RETURN false;
    END IF;
    UPDATE herald.projects r SET updated_at = now() WHERE r.name = p.name;
    PERFORM pg_notify('herald_jobs', 'registry:' || p.name);
    RETURN true;
END $$;
