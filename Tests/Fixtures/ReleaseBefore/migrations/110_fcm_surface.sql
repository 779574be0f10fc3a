-- Herald: the FCM surface as the Admin SDKs present it.
--
-- * android_v2 (FCM's AndroidConfigV2, mutually exclusive with android) is a v1-only key: a row
--   holding it is never taken for a legacy payload (herald.is_legacy and the jobs_legacy
--   trigger's WHEN, in their function files, know it). Its validation rules live in the rule
--   file, like every other field's.
-- * v1 multicast: herald.enqueue_multicast(message, tokens, ...) makes one job per token and
--   returns a multicast id; herald.multicast_result(id) answers in the shape of the Admin SDKs'
--   BatchResponse, one entry per token in order.
-- * Durable topic subscriptions: herald.subscribe / herald.unsubscribe record the wish in
--   herald.topic_subscriptions inside the caller's transaction; the pool carries it out with
--   Instance ID batchAdd / batchRemove.
--
-- This migration holds the tables and indexes; the functions, the trigger and the view live in
-- Sources/Queue/SQL/functions/ and views/, one file each (docs/sql-layout.md).

-- ---------------------------------------------------------------------------------------------
-- v1 multicast

-- One row per herald.enqueue_multicast call: its jobs, in token order.
CREATE TABLE herald.multicasts (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_ids    bigint[] NOT NULL,
    tokens     text[] NOT NULL,
    dedupe_key text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX multicasts_dedupe ON herald.multicasts (dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX multicasts_created ON herald.multicasts (created_at);

-- ---------------------------------------------------------------------------------------------
-- Durable topic subscriptions

-- One row per (project, topic, token) Herald was asked about. project '' means the project of
-- whichever pool carries the row out (its service account's). state: pending (to subscribe),
-- subscribed (done), removing (to unsubscribe), failed (FCM refused this token: error says why).
-- An unsubscribed token has no row. generation changes with every new wish, so an answer to an
-- older request never overwrites a newer wish.
CREATE TABLE herald.topic_subscriptions (
    project      text        NOT NULL DEFAULT '',
    topic        text        NOT NULL,
    token        text        NOT NULL,
    state        text        NOT NULL CHECK (state IN ('pending', 'subscribed', 'removing', 'failed')),
    error        text,
    attempts     integer     NOT NULL DEFAULT 0,
    generation   bigint      NOT NULL DEFAULT 1,
    run_at       timestamptz NOT NULL DEFAULT now(),
    locked_until timestamptz,
    locked_by    text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, topic, token)
);
CREATE INDEX topic_subscriptions_due ON herald.topic_subscriptions (run_at) WHERE state IN ('pending', 'removing');
CREATE INDEX topic_subscriptions_token ON herald.topic_subscriptions (token);
