-- Herald: campaigns, steerable queues, rate limits shared by every pool, and fair claiming.
--
-- * herald.campaigns: a named batch of jobs (herald.jobs.campaign_id) with a state, an optional
--   rate (max_per_second), an analytics label put on its messages, and max_errors, after which it
--   pauses itself. Its counts are kept as its jobs are inserted and recorded, so reading the
--   progress of a campaign of a million jobs costs a few index lookups, not a count.
-- * herald.queues: per queue, paused, max_per_second and max_in_flight. A queue without a row
--   has no limits.
-- * herald.project_rates: the FCM project's rate (herald work --max-rate), shared by every pool.
-- * herald.claim_jobs: the claim. It takes the due jobs of every (queue, campaign) pair in turn,
--   so a backlog in one never delays another, and spends the token buckets of the project, the
--   queues and the campaigns it claims for, under row locks: the limits hold across processes
--   and hosts with no other server. When a limit held it back, it returns one extra row without
--   a job that says in how many seconds to come back.

CREATE TABLE herald.campaigns (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text NOT NULL,
    state           text NOT NULL DEFAULT 'scheduled'
                    CHECK (state IN ('scheduled', 'running', 'paused', 'cancelled', 'finished')),
    max_per_second  double precision CHECK (max_per_second > 0),
    analytics_label text CHECK (analytics_label ~ '^[-a-zA-Z0-9_.~%]{1,50}$'),
    max_errors      integer NOT NULL DEFAULT 1000 CHECK (max_errors > 0),
    paused_reason   text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    -- Kept by Herald: every job of the campaign is in exactly one of completed, dead, discarded
    -- (pruned included), cancelled, or still pending or running.
    total           bigint NOT NULL DEFAULT 0,
    completed       bigint NOT NULL DEFAULT 0,
    dead            bigint NOT NULL DEFAULT 0,
    discarded       bigint NOT NULL DEFAULT 0,
    cancelled       bigint NOT NULL DEFAULT 0,
    -- Dead letters since the campaign was last resumed (what max_errors is compared with).
    errors          bigint NOT NULL DEFAULT 0,
    -- The rate limit's token bucket.
    tokens          double precision NOT NULL DEFAULT 0,
    refilled_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT campaigns_name_key UNIQUE (name)
);

CREATE TABLE herald.queues (
    name           text PRIMARY KEY,
    paused         boolean NOT NULL DEFAULT false,
    max_per_second double precision CHECK (max_per_second > 0),
    max_in_flight  integer CHECK (max_in_flight > 0),
    tokens         double precision NOT NULL DEFAULT 0,
    refilled_at    timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE herald.project_rates (
    project_id     text PRIMARY KEY,
    max_per_second double precision NOT NULL CHECK (max_per_second > 0),
    tokens         double precision NOT NULL,
    refilled_at    timestamptz NOT NULL
);

ALTER TABLE herald.jobs ADD COLUMN campaign_id bigint
    CONSTRAINT jobs_campaign_id_fkey REFERENCES herald.campaigns (id);
ALTER TABLE herald.dead_letters ADD COLUMN campaign_id bigint;

-- The claim walks one (queue, campaign) pair at a time, in priority order within it.
CREATE INDEX jobs_claim_unit ON herald.jobs (queue, (coalesce(campaign_id, 0)), priority, run_at, id)
    WHERE state = 'available';
DROP INDEX herald.jobs_claim;
-- A campaign's jobs not yet finished (running counts, cancel, finish), and its recent deliveries.
CREATE INDEX jobs_campaign_pending ON herald.jobs (campaign_id, state)
    WHERE campaign_id IS NOT NULL AND state IN ('scheduled', 'available', 'running');
CREATE INDEX jobs_campaign_sent ON herald.jobs (campaign_id, finished_at)
    WHERE campaign_id IS NOT NULL AND state = 'completed';
CREATE INDEX dead_letters_campaign ON herald.dead_letters (campaign_id) WHERE campaign_id IS NOT NULL;

-- enqueue gains campaign_id (and keeps every other parameter of migration 051).
DROP FUNCTION IF EXISTS herald.enqueue(jsonb, timestamptz, text, integer, integer, text, boolean);

DROP FUNCTION IF EXISTS herald.enqueue_legacy_form(text, timestamptz, text, integer, integer);
DROP FUNCTION IF EXISTS herald.enqueue_legacy(jsonb, timestamptz, text, integer, integer);
