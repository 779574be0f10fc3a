-- _enqueue_before_290: herald.enqueue as releases before migration 290 had it (without
-- apns_app), kept for calls of those releases in flight. 290 renamed it aside instead of dropping
-- it, so an application's call that resolved herald.enqueue before that herald migrate committed
-- still finds its function (it keeps its OID) instead of failing with "cache lookup failed for
-- function N"; this body hands the call to the new enqueue as Herald's own role (SECURITY DEFINER,
-- as enqueue is), so the caller needs no grant on the new function for it. Kept under the name
-- enqueue, it would make every call without apns_app ambiguous. Dropped by a later release
-- (docs/sql-layout.md).
CREATE OR REPLACE FUNCTION herald._enqueue_before_290(message jsonb, run_at timestamptz DEFAULT now(),
                               queue text DEFAULT 'default', priority integer DEFAULT 0,
                               max_attempts integer DEFAULT 25, dedupe_key text DEFAULT NULL,
                               validate_only boolean DEFAULT false, campaign_id bigint DEFAULT NULL,
                               dedupe_for interval DEFAULT NULL, project text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN herald.enqueue(message, run_at, queue, priority, max_attempts, dedupe_key, validate_only, campaign_id,
                          dedupe_for, project);
END
$$;
