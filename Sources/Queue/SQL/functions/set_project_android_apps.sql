-- set_project_android_apps: the Android apps of a registry project whose delivery data FCM's
-- Data API is asked for (herald.delivery_data): their Firebase app ids, as the Firebase console
-- shows them (Project settings, Your apps, App ID: 1:<project number>:android:<hex>). The list
-- given replaces the old one; an empty array or NULL clears it (the project is no longer asked).
-- Repeated ids are kept once, in the order first given. Refused for an APNs app: Apple has no
-- such API. Returns the list stored.
CREATE OR REPLACE FUNCTION herald.set_project_android_apps(name text, android_apps text[])
RETURNS text[] LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p herald.projects := herald._known_project(set_project_android_apps.name, 'herald.set_project_android_apps');
    apps text[];
    bad text;
BEGIN
    IF p.service <> 'fcm' THEN
        RAISE EXCEPTION 'herald.set_project_android_apps: "%" is an APNs app; Apple has no delivery data API, so it has no Android apps to ask FCM about', p.name
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT coalesce(array_agg(a.id ORDER BY a.first), '{}') INTO apps
    FROM (SELECT g.id, min(g.n) AS first
          FROM unnest(coalesce(set_project_android_apps.android_apps, '{}')) WITH ORDINALITY AS g(id, n)
          GROUP BY g.id) a;
    SELECT a INTO bad FROM unnest(apps) a WHERE a IS NULL OR a !~ '^[0-9]+:[0-9]+:android:[0-9a-f]+$' LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'herald.set_project_android_apps: "%" is not a Firebase Android app id; give the App ID the Firebase console shows under Project settings, Your apps (e.g. 1:1234567890:android:0a1b2c3d4e5f6789)',
            left(coalesce(bad, 'null'), 100)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(apps) > 100 THEN
        RAISE EXCEPTION 'herald.set_project_android_apps: % Android apps given; a project holds at most 100', cardinality(apps)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE herald.projects r SET android_apps = apps, updated_at = now() WHERE r.name = p.name;
    RETURN apps;
END $$;
