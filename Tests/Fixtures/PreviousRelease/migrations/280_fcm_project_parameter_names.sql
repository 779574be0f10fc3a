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
-- CREATE OR REPLACE cannot rename a parameter, so the functions are dropped here (their argument
-- types are unchanged) and defined again from Sources/Queue/SQL/functions. Callers that pass
-- arguments by position, as every statement of this release and of the previous one does, are
-- not affected; one that passes p_jobs_project => or p_project => by name must use the new names.
-- None of them is granted to a role kind, and none is referenced by a view, a trigger or a
-- BEGIN ATOMIC body, so nothing else goes with them.

DROP FUNCTION IF EXISTS herald.claim_batch(text[], integer, double precision, text, text, double precision, integer,
                                           timestamptz, text);
DROP FUNCTION IF EXISTS herald.claim_jobs(text[], integer, double precision, text, text, double precision, integer);
DROP FUNCTION IF EXISTS herald.take_project_tokens(text, double precision, integer, timestamptz);
DROP FUNCTION IF EXISTS herald.claim_topic_work(text, text, integer, double precision);
DROP FUNCTION IF EXISTS herald._give_back_project_tokens(text, double precision);
DROP FUNCTION IF EXISTS herald._claim_allowance(text, bigint, integer, double precision, text[], bigint[], timestamptz);
DROP FUNCTION IF EXISTS herald._claim_wait(integer, integer, double precision, double precision, double precision,
                                           double precision, double precision, double precision, integer);
