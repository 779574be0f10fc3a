-- Herald: respect for the people on the other end (the tables; the functions live in their own
-- files under Sources/Queue/SQL/functions).
--
-- * herald.dedupe_keys: a dedupe key enqueued with dedupe_for holds its row here for that period,
--   whatever becomes of its job (retention deletes finished jobs, not these rows), so a key is
--   refused by a primary-key lookup, never a scan of herald.jobs. The maintenance leader deletes
--   rows past their period.
-- * herald.events: the outbox of delivery events an application can follow
--   (herald.events_since), written in the transaction that makes the change, for the queues
--   switched on with herald.set_queue_events.

-- ---------------------------------------------------------------------------------------------
-- Idempotency by period

CREATE TABLE herald.dedupe_keys (
    key        text        PRIMARY KEY,
    job_id     bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX dedupe_keys_expires ON herald.dedupe_keys (expires_at);

-- enqueue gains dedupe_for (and keeps every other parameter of migration 070).
DROP FUNCTION IF EXISTS herald.enqueue(jsonb, timestamptz, text, integer, integer, text, boolean, bigint);

-- ---------------------------------------------------------------------------------------------
-- Delivery events

-- Per queue: whether its jobs write events (off by default: a row per job).
ALTER TABLE herald.queues ADD COLUMN events boolean NOT NULL DEFAULT false;

-- id comes from herald.events_id_seq through the trigger events_id (functions/_event_id.sql),
-- which gives the writing transaction its transaction id first: herald.events_since relies on
-- every id being taken after its writer's transaction id (see functions/events_since.sql).
CREATE SEQUENCE herald.events_id_seq AS bigint;
CREATE TABLE herald.events (
    id       bigint      PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind     text        NOT NULL CHECK (kind IN ('completed', 'dead', 'discarded', 'pruned', 'campaign_finished',
                                                  'campaign_paused', 'subscription_failed')),
    queue    text,
    job_id   bigint,
    campaign_id bigint,
    token    text,
    detail   jsonb       NOT NULL DEFAULT '{}'
);
ALTER SEQUENCE herald.events_id_seq OWNED BY herald.events.id;
CREATE INDEX events_at ON herald.events (at);

-- ---------------------------------------------------------------------------------------------
-- A token registry that ages

-- last_seen_at: when the app last reported the token (herald.touch_token); stale_at: when the
-- aging rule (herald.age_tokens) found it idle past stale_after (NULL: fresh). A token idle past
-- prune_after leaves the registry for herald.pruned_tokens.
ALTER TABLE herald.device_tokens
    ADD COLUMN last_seen_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN project      text,
    ADD COLUMN time_zone    text,
    ADD COLUMN stale_at     timestamptz;
CREATE INDEX device_tokens_last_seen ON herald.device_tokens (last_seen_at);
CREATE INDEX device_tokens_fresh ON herald.device_tokens (last_seen_at) WHERE stale_at IS NULL;

-- The aging rule's settings (one row; herald.set_token_aging).
CREATE TABLE herald.token_aging (
    one                      boolean  PRIMARY KEY DEFAULT true CHECK (one),
    stale_after              interval NOT NULL DEFAULT '30 days',
    prune_after              interval NOT NULL DEFAULT '270 days',
    skip_stale_for_campaigns boolean  NOT NULL DEFAULT false,
    CHECK (stale_after > interval '0' AND prune_after > stale_after)
);
INSERT INTO herald.token_aging DEFAULT VALUES;

-- ---------------------------------------------------------------------------------------------
-- Frequency caps and quiet hours per queue (herald.set_frequency_cap, herald.set_quiet_hours),
-- enforced in the claim (functions/_audience_hold.sql).

ALTER TABLE herald.queues
    ADD COLUMN cap_max     integer CHECK (cap_max > 0),
    ADD COLUMN cap_per     interval,
    ADD COLUMN cap_discard boolean NOT NULL DEFAULT false,
    ADD COLUMN quiet_from  time,
    ADD COLUMN quiet_until time;
-- A job's own time zone for quiet hours (else its token's in herald.device_tokens, else UTC).
ALTER TABLE herald.jobs ADD COLUMN time_zone text;
-- Per capped queue and token: when its recent sends were claimed (within the cap's period).
CREATE TABLE herald.token_sends (
    queue   text          NOT NULL,
    token   text          NOT NULL,
    sent_at timestamptz[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (queue, token)
);
