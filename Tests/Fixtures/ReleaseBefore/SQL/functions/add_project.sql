-- add_project: registers a Firebase project under `name` (the short name jobs and commands will
-- use). `credentials` says WHERE the service-account key is, never the key: an absolute file
-- path, or env:VAR naming an environment variable of the pool. `fcm_project_id` is the key's
-- project_id (herald projects add reads it from the key); one FCM project has one entry.
-- `max_rate` (messages per second) null: the pool's --max-rate. The rules on each value are the
-- table's constraints (migrations/180_projects.sql); a refusal is reported here in words, and a
-- refused credentials value is never repeated (it might be a pasted key).
CREATE OR REPLACE FUNCTION herald.add_project(name text, fcm_project_id text, credentials text,
                                              max_rate double precision DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    violated text;
    holder text;
BEGIN
    IF add_project.name IS NULL OR add_project.fcm_project_id IS NULL OR add_project.credentials IS NULL THEN
        RAISE EXCEPTION 'herald.add_project: name, fcm_project_id and credentials are all required (got null for %)',
            concat_ws(', ', CASE WHEN add_project.name IS NULL THEN 'name' END,
                      CASE WHEN add_project.fcm_project_id IS NULL THEN 'fcm_project_id' END,
                      CASE WHEN add_project.credentials IS NULL THEN 'credentials' END)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT r.name INTO holder FROM herald.projects r WHERE r.name = add_project.name;
    IF FOUND THEN
        RAISE EXCEPTION 'herald.add_project: a project named "%" is registered already; choose another name, or remove it first (herald.remove_project)',
            add_project.name
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'herald.project_registry lists the registered projects.';
    END IF;
    SELECT r.name INTO holder FROM herald.projects r WHERE r.fcm_project_id = add_project.fcm_project_id;
    IF FOUND THEN
        RAISE EXCEPTION 'herald.add_project: FCM project "%" is registered already as "%"; "%" would be a second entry for it (one FCM project has one entry: use "%", or remove it first)',
            add_project.fcm_project_id, holder, add_project.name, holder
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'herald.project_registry lists the registered projects.';
    END IF;
    BEGIN
        INSERT INTO herald.projects (name, fcm_project_id, credentials, max_rate)
        VALUES (add_project.name, add_project.fcm_project_id, add_project.credentials, add_project.max_rate);
    EXCEPTION WHEN check_violation THEN
        GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
        CASE violated
        WHEN 'projects_name_slug' THEN
            RAISE EXCEPTION 'herald.add_project: project name "%" is not a short slug; give 1 to 63 lowercase letters, digits, - or _, starting with a letter or digit (e.g. shop-prod)',
                left(add_project.name, 100)
                USING ERRCODE = 'invalid_parameter_value';
        WHEN 'projects_fcm_project_id_shape' THEN
            RAISE EXCEPTION 'herald.add_project: fcm_project_id "%" is not an FCM project id; give the project_id of the service-account key (lowercase letters, digits and -, e.g. shop-prod-1234)',
                left(add_project.fcm_project_id, 100)
                USING ERRCODE = 'invalid_parameter_value';
        WHEN 'projects_credentials_reference' THEN
            RAISE EXCEPTION 'herald.add_project: credentials must say where the service-account key is (an absolute file path or env:VARIABLE), never hold the key; the value given (% characters) is not shown',
                length(add_project.credentials)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Give e.g. /secrets/shop-prod.json or env:SHOP_PROD_CREDENTIALS; secrets stay out of the database.';
        WHEN 'projects_max_rate_positive' THEN
            RAISE EXCEPTION 'herald.add_project: max_rate must be more than 0 messages per second (or null for the pool''s --max-rate), not %',
                add_project.max_rate
                USING ERRCODE = 'invalid_parameter_value';
        ELSE
            RAISE;
        END CASE;
    END;
END $$;
