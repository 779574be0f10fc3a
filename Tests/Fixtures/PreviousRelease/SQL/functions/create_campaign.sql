-- create_campaign: a new campaign in state 'scheduled'; it runs when its first job is claimed.
-- project: the registry name of the Firebase project its jobs are sent for (herald.projects;
-- NULL: the pool's own credentials); its jobs take it (trigger jobs_campaign_project). A name
-- not in the registry is refused, naming it.
CREATE OR REPLACE FUNCTION herald.create_campaign(name text, max_per_second double precision DEFAULT NULL,
                                       analytics_label text DEFAULT NULL, max_errors integer DEFAULT 1000,
                                       project text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    new_id bigint;
BEGIN
    IF create_campaign.name IS NULL OR btrim(create_campaign.name) = '' THEN
        RAISE EXCEPTION 'herald.create_campaign: name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF create_campaign.max_per_second IS NOT NULL AND NOT create_campaign.max_per_second > 0 THEN
        RAISE EXCEPTION 'herald.create_campaign: max_per_second must be more than 0 (or null for no limit), not %', create_campaign.max_per_second
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF create_campaign.analytics_label IS NOT NULL AND create_campaign.analytics_label !~ '^[-a-zA-Z0-9_.~%]{1,50}$' THEN
        RAISE EXCEPTION 'herald.create_campaign: analytics_label "%" is not one FCM accepts: 1 to 50 of a-z A-Z 0-9 - _ . ~ %%', create_campaign.analytics_label
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF create_campaign.max_errors IS NULL OR create_campaign.max_errors < 1 THEN
        RAISE EXCEPTION 'herald.create_campaign: max_errors must be at least 1, not %', coalesce(create_campaign.max_errors::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF create_campaign.project IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM herald.projects p WHERE p.name = create_campaign.project) THEN
        RAISE EXCEPTION 'herald.create_campaign: no project named "%" in the registry (herald.projects)', left(create_campaign.project, 100)
            USING ERRCODE = 'foreign_key_violation',
                  HINT = 'Register it first (herald projects add NAME --credentials FILE, or herald.add_project), '
                      || 'or leave project NULL to send with the pool''s own credentials; herald projects list shows the names.';
    END IF;
    INSERT INTO herald.campaigns (name, max_per_second, analytics_label, max_errors, project)
    VALUES (create_campaign.name, create_campaign.max_per_second, create_campaign.analytics_label, create_campaign.max_errors,
            create_campaign.project)
    ON CONFLICT ON CONSTRAINT campaigns_name_key DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        RAISE EXCEPTION 'herald.create_campaign: a campaign named "%" exists already (id %)', create_campaign.name,
            (SELECT c.id FROM herald.campaigns c WHERE c.name = create_campaign.name)
            USING ERRCODE = 'unique_violation';
    END IF;
    RETURN new_id;
END $$;
