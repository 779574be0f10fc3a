-- record_admin_action: how an operator's action (herald dead, herald dashboard) reaches the audit
-- log, herald.admin_log. An operator holds no privilege on that table: this appends one row, with
-- the role that called (session_user) in recorded_by, and never changes or deletes one.
CREATE OR REPLACE FUNCTION herald.record_admin_action(action text, ids bigint[], details jsonb, source text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO herald.admin_log (action, ids, details, source, recorded_by)
    VALUES (action, coalesce(ids, '{}'), coalesce(details, '{}'), source, session_user)
$$;
