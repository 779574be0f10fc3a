-- Herald: one word for each kind of project in the claim's parameters.
--
-- The FCM project (Google's project id whose rate and quota pauses the claim honours:
-- herald.project_rates, herald.project_pauses) is p_fcm_project; a project of the registry
-- (herald.projects, herald.jobs.project) is p_project. claim_batch's p_project, p_project_rate and
-- p_project_granted become p_fcm_project, p_fcm_project_rate and p_fcm_project_granted, and its
-- p_jobs_project becomes p_project; claim_jobs, take_project_tokens, claim_topic_work and
-- _give_back_project_tokens name the FCM project p_fcm_project; _claim_allowance and _claim_wait
-- name the FCM project's tokens p_fcm_project_tokens.
--
-- CREATE OR REPLACE cannot rename a parameter, so the new definitions (Sources/Queue/SQL/functions)
-- are new functions. The old ones are renamed aside here, not dropped: a renamed function keeps
-- its OID, so a call the previous release's pool resolved before herald migrate committed still
-- finds its function ("cache lookup failed for function N" otherwise), while every call parsed
-- afterwards finds the new one by its name. Their argument types are unchanged, so callers that
-- pass arguments by position, as every statement of this release and of the previous one does,
-- are not affected; one that passes p_jobs_project => or p_project => by name must use the new
-- names. The renamed ones (herald._claim_batch_before_280 and so on) are dropped by a later
-- release, once no release that called them is upgraded from (docs/sql-layout.md). A database
-- that has none of them (a new one) renames nothing.
--
-- (As released, this migration dropped them; a database it ran on so is recognised by its
-- released checksum, Migrator.releasedChecksums.)

DO $$
DECLARE
    old regprocedure;
BEGIN
    FOREACH old IN ARRAY ARRAY[
        to_regprocedure('herald.claim_batch(text[], integer, double precision, text, text, double precision, integer, timestamptz, text)'),
        to_regprocedure('herald.claim_jobs(text[], integer, double precision, text, text, double precision, integer)'),
        to_regprocedure('herald.take_project_tokens(text, double precision, integer, timestamptz)'),
        to_regprocedure('herald.claim_topic_work(text, text, integer, double precision)'),
        to_regprocedure('herald._give_back_project_tokens(text, double precision)'),
        to_regprocedure('herald._claim_allowance(text, bigint, integer, double precision, text[], bigint[], timestamptz)'),
        to_regprocedure('herald._claim_wait(integer, integer, double precision, double precision, double precision, '
                        'double precision, double precision, double precision, integer)')]
    LOOP
        CONTINUE WHEN old IS NULL;
        EXECUTE pg_catalog.format('ALTER FUNCTION %s RENAME TO %I', old,
            '_' || pg_catalog.ltrim((SELECT p.proname FROM pg_catalog.pg_proc p WHERE p.oid = old), '_') || '_before_280');
    END LOOP;
END
$$;
