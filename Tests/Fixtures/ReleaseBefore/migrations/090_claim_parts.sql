-- Herald: the claim in named parts, its "come back in" a column of its own.
--
-- herald.claim_batch (Sources/Queue/SQL/functions/claim_batch.sql) claims for this release's
-- workers: one row, the jobs claimed (herald.claimed_job[]) and come_back_in, the seconds after
-- which a limit that held jobs back lets them go (NULL: none did). Its parts, one file each:
-- herald._claim_units (the skip scan of the (queue, campaign) pairs with due jobs),
-- herald._claim_allowance (what the buckets and max_in_flight allow a pair),
-- herald._claim_unit (the claim of one pair's jobs), herald._spend_claim_tokens (the buckets'
-- write-back) and herald._claim_wait (when to come back). Each takes the time as a parameter,
-- so a test can move it. herald.claim_jobs keeps the shape workers of the previous release read,
-- as a wrapper of claim_batch, so a rolling upgrade never stops a pool.

-- A claimed job as the worker reads it.
CREATE TYPE herald.claimed_job AS (
    id            bigint,
    queue         text,
    kind          text,
    message       text,
    attempt       integer,
    max_attempts  integer,
    token_pruned  boolean,
    last_error    text,
    created_at    double precision,
    due_at        double precision,
    group_key     text,
    group_members text,
    validate_only boolean,
    campaign_id   bigint
);

-- take_project_tokens gains p_now (the time to refill the bucket to; NULL: now()); callers that
-- pass three arguments get the new one.
DROP FUNCTION IF EXISTS herald.take_project_tokens(text, double precision, integer);
