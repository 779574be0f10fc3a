-- _registry_refusal: raises, in words, the refusal of a value a registry constraint
-- (herald.projects, migrations/180_projects.sql, 290_apns_apps.sql) did not take on a change of an
-- entry (herald.update_project, herald.update_apns_app): `caller` starts the message,
-- `constraint_name` is the constraint PostgreSQL named, `value` the value it judged. A key
-- reference is never repeated (it might be a pasted key). Any other constraint is raised as
-- PostgreSQL named it.
CREATE OR REPLACE FUNCTION herald._registry_refusal(caller text, constraint_name text, value text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    CASE constraint_name
    WHEN 'projects_credentials_reference' THEN
        RAISE EXCEPTION '%: the key reference must say where the key is (an absolute file path or env:VARIABLE), never hold the key; the value given (% characters) is not shown',
            caller, length(value)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give e.g. /secrets/AuthKey_ABC123DEFG.p8 or env:SHOP_IOS_KEY; secrets stay out of the database.';
    WHEN 'projects_apns_key_id_shape' THEN
        RAISE EXCEPTION '%: key_id "%" is not an APNs key id; give the 10 capital letters and digits Apple shows for the key (e.g. ABC123DEFG, as in AuthKey_ABC123DEFG.p8)',
            caller, left(value, 40) USING ERRCODE = 'invalid_parameter_value';
    WHEN 'projects_apns_team_id_shape' THEN
        RAISE EXCEPTION '%: team_id "%" is not an Apple team id; give the 10 capital letters and digits of your developer account''s team (e.g. DEF123GHIJ)',
            caller, left(value, 40) USING ERRCODE = 'invalid_parameter_value';
    WHEN 'projects_apns_topic_shape' THEN
        RAISE EXCEPTION '%: topic "%" is not a bundle id; give the app''s bundle id (letters, digits, - and ., e.g. com.example.shop)',
            caller, left(value, 100) USING ERRCODE = 'invalid_parameter_value';
    WHEN 'projects_fcm_project_id_shape' THEN
        RAISE EXCEPTION '%: fcm_project_id "%" is not an FCM project id; give the project_id of the service-account key (lowercase letters, digits and -, e.g. shop-prod-1234)',
            caller, left(value, 100) USING ERRCODE = 'invalid_parameter_value';
    WHEN 'projects_max_rate_positive' THEN
        RAISE EXCEPTION '%: max_rate must be more than 0 messages per second (or none for the pool''s --max-rate), not %', caller, value
            USING ERRCODE = 'invalid_parameter_value';
    ELSE
        RAISE EXCEPTION '%: the registry refused the change (constraint %)', caller, constraint_name
            USING ERRCODE = 'check_violation';
    END CASE;
END $$;
