-- The job ids of the legacy request job_id belongs to, in registration_ids order (just job_id
-- when it was not a multicast).
CREATE OR REPLACE FUNCTION herald.legacy_multicast(job_id bigint) RETURNS bigint[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce((SELECT array_agg(m.job_id ORDER BY m.position) FROM herald.legacy_multicasts m
                     WHERE m.multicast_id = (SELECT o.multicast_id FROM herald.legacy_multicasts o WHERE o.job_id = legacy_multicast.job_id)),
                    ARRAY[legacy_multicast.job_id])
$fn$;
