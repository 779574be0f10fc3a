-- The job ids of the legacy request job_id belongs to, in registration_ids order (just job_id
-- when it was not a multicast).
CREATE OR REPLACE FUNCTION herald.legacy_multicast(job_id bigint) RETURNS bigint[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce((SELECT m.job_ids FROM herald.multicasts m WHERE m.job_ids @> ARRAY[legacy_multicast.job_id]
                     ORDER BY m.id DESC LIMIT 1),
                    ARRAY[legacy_multicast.job_id])
$fn$;
