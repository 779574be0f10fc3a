-- update_project: corrects a registered FCM project in place: where its service-account key is
-- (`credentials`, a path or env:VAR, never the key), the FCM project id that key must be for
-- (herald projects update reads it from the key) and `max_rate`. A value left null is kept;
-- `clear_max_rate` puts the project back on the pool's --max-rate. One FCM project still has
-- one entry. The project's pause, if any, stays: resume it once it is right. Every running pool
-- takes the new entry up at its next claim of the project (the NOTIFY below), not at its next
-- reading of the registry. Returns whether anything changed.
CREATE OR REPLACE FUNCTION herald.update_project(name text, credentials text DEFAULT NULL, fcm_project_id text DEFAULT NULL,
                                                 max_rate double precision DEFAULT NULL, clear_max_rate boolean DEFAULT false)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p herald.projects := herald._known_project(update_project.name, 'herald.update_project');
    after herald.projects;
    violated text;
    holder text;
BEGIN
    IF p.service <> 'fcm' THEN
        RAISE EXCEPTION 'herald.update_project: "%" is an APNs app, not an FCM project', p.name
            USING ERRCODE = 'invalid_parameter_value', HINT = 'herald.update_apns_app changes an APNs app.';
    END IF;
    IF update_project.max_rate IS NOT NULL AND coalesce(update_project.clear_max_rate, false) THEN
        RAISE EXCEPTION 'herald.update_project: give max_rate or clear_max_rate, not both'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT r.name INTO holder FROM herald.projects r
    WHERE r.fcm_project_id = update_project.fcm_project_id AND r.name <> p.name;
    IF FOUND THEN
        RAISE EXCEPTION 'herald.update_project: FCM project "%" is registered already as "%"; one FCM project has one entry',
            update_project.fcm_project_id, holder
            USING ERRCODE = 'invalid_parameter_value', HINT = 'herald.project_registry lists the registered projects.';
    END IF;
    BEGIN
        UPDATE herald.projects r
        SET credentials = coalesce(update_project.credentials, r.credentials),
            fcm_project_id = coalesce(update_project.fcm_project_id, r.fcm_project_id),
            max_rate = CASE WHEN coalesce(update_project.clear_max_rate, false) THEN NULL
                            ELSE coalesce(update_project.max_rate, r.max_rate) END
        WHERE r.name = p.name
        RETURNING r.* INTO after;
    EXCEPTION WHEN check_violation THEN
        GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
        PERFORM herald._registry_refusal('herald.update_project', violated,
            CASE violated WHEN 'projects_credentials_reference' THEN update_project.credentials
                          WHEN 'projects_fcm_project_id_shape' THEN update_project.fcm_project_id
                          ELSE update_project.max_rate::text END);
    END;
    IF after IS NOT DISTINCT FROM p THEN
        RETURN false;
    END IF;
    UPDATE herald.projects r SET updated_at = now() WHERE r.name = p.name;
    PERFORM pg_notify('herald_jobs', 'registry:' || p.name);
    RETURN true;
END $$;
