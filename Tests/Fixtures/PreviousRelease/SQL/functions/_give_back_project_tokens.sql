-- Puts back FCM project tokens a claim was granted and did not use, up to the bucket's burst.
CREATE OR REPLACE FUNCTION herald._give_back_project_tokens(p_fcm_project text, p_tokens double precision) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    UPDATE herald.project_rates r SET tokens = least(herald._burst(r.max_per_second), r.tokens + p_tokens)
    WHERE r.project_id = p_fcm_project AND p_tokens > 0
$$;
