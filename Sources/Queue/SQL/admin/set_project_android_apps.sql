-- Sets the Android apps of registry project $1 to the JSON array of app ids $2 (herald.set_project_android_apps); returns them.
SELECT pg_catalog.array_to_json(herald.set_project_android_apps($1, ARRAY(SELECT pg_catalog.jsonb_array_elements_text($2::jsonb))))::text
