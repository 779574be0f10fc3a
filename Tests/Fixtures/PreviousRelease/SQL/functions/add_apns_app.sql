-- add_apns_app: registers an app of Apple's provider API (APNs) under `name`, in the one
-- registry FCM projects are in (herald.projects, service 'apns'), so names never collide and the
-- per-project machinery (pauses: herald.pause_project_sending, resume_project_sending,
-- remove_project; jobs.project; rates) serves it. `key_file` says WHERE the token-based .p8 key
-- is, never the key: an absolute file path, or env:VAR naming an environment variable of the
-- pool. `key_id` is the key's 10-character id, `team_id` the 10-character team id, `topic` the
-- app's bundle id (the apns-topic of an alert), `sandbox` true for Apple's development
-- environment. `max_rate` (messages per second) null: the pool's --max-rate. The rules on each
-- value are the table's constraints (migrations/180_projects.sql, 290_apns_apps.sql); a refusal
-- is reported here in words, and a refused key_file value is never repeated (it might be a
-- pasted key).
CREATE OR REPLACE FUNCTION herald.add_apns_app(name text, key_file text, key_id text, team_id text, topic text,
                                               sandbox boolean DEFAULT false, max_rate double precision DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    violated text;
    holder text;
BEGIN
    IF add_apns_app.name IS NULL OR add_apns_app.key_file IS NULL OR add_apns_app.key_id IS NULL
       OR add_apns_app.team_id IS NULL OR add_apns_app.topic IS NULL THEN
        RAISE EXCEPTION 'herald.add_apns_app: name, key_file, key_id, team_id and topic are all required (got null for %)',
            concat_ws(', ', CASE WHEN add_apns_app.name IS NULL THEN 'name' END,
                      CASE WHEN add_apns_app.key_file IS NULL THEN 'key_file' END,
                      CASE WHEN add_apns_app.key_id IS NULL THEN 'key_id' END,
                      CASE WHEN add_apns_app.team_id IS NULL THEN 'team_id' END,
                      CASE WHEN add_apns_app.topic IS NULL THEN 'topic' END)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT r.service INTO holder FROM herald.projects r WHERE r.name = add_apns_app.name;
    IF FOUND THEN
        RAISE EXCEPTION 'herald.add_apns_app: % named "%" is registered already; choose another name, or remove it first (herald.remove_project)',
            CASE holder WHEN 'apns' THEN 'an APNs app' ELSE 'an FCM project' END, add_apns_app.name
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'APNs apps and FCM projects share one namespace; herald.apns_apps and herald.project_registry list them.';
    END IF;
    BEGIN
        INSERT INTO herald.projects (name, service, fcm_project_id, credentials, apns_key_id, apns_team_id, apns_topic,
                                     apns_sandbox, max_rate)
        VALUES (add_apns_app.name, 'apns', NULL, add_apns_app.key_file, add_apns_app.key_id, add_apns_app.team_id,
                add_apns_app.topic, coalesce(add_apns_app.sandbox, false), add_apns_app.max_rate);
    EXCEPTION WHEN check_violation THEN
        GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
        CASE violated
        WHEN 'projects_name_slug' THEN
            RAISE EXCEPTION 'herald.add_apns_app: app name "%" is not a short slug; give 1 to 63 lowercase letters, digits, - or _, starting with a letter or digit (e.g. shop-ios)',
                left(add_apns_app.name, 100)
                USING ERRCODE = 'invalid_parameter_value';
        WHEN 'projects_credentials_reference' THEN
            RAISE EXCEPTION 'herald.add_apns_app: key_file must say where the .p8 key is (an absolute file path or env:VARIABLE), never hold the key; the value given (% characters) is not shown',
                length(add_apns_app.key_file)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Give e.g. /secrets/AuthKey_ABC123DEFG.p8 or env:SHOP_IOS_KEY; secrets stay out of the database.';
        WHEN 'projects_apns_key_id_shape' THEN
            RAISE EXCEPTION 'herald.add_apns_app: key_id "%" is not an APNs key id; give the 10 capital letters and digits Apple shows for the key (e.g. ABC123DEFG, as in AuthKey_ABC123DEFG.p8)',
                left(add_apns_app.key_id, 40)
                USING ERRCODE = 'invalid_parameter_value';
        WHEN 'projects_apns_team_id_shape' THEN
            RAISE EXCEPTION 'herald.add_apns_app: team_id "%" is not an Apple team id; give the 10 capital letters and digits of your developer account''s team (e.g. DEF123GHIJ)',
                left(add_apns_app.team_id, 40)
                USING ERRCODE = 'invalid_parameter_value';
        WHEN 'projects_apns_topic_shape' THEN
            RAISE EXCEPTION 'herald.add_apns_app: topic "%" is not a bundle id; give the app''s bundle id (letters, digits, - and ., e.g. com.example.shop)',
                left(add_apns_app.topic, 100)
                USING ERRCODE = 'invalid_parameter_value';
        WHEN 'projects_max_rate_positive' THEN
            RAISE EXCEPTION 'herald.add_apns_app: max_rate must be more than 0 messages per second (or null for the pool''s --max-rate), not %',
                add_apns_app.max_rate
                USING ERRCODE = 'invalid_parameter_value';
        ELSE
            RAISE;
        END CASE;
    END;
END $$;
