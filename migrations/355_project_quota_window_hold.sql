-- Herald: a spent quota window, held by every pool of the FCM project.
--
-- FCM counts a project's quota per minute and, once a minute's worth is spent, refuses every
-- send until the quota is refilled in the following minute. When its quota answers keep coming
-- while the workers already pace at the limit the answer states, that minute is spent: every
-- worker of the FCM project sends about one message a second (probes) until one is accepted,
-- then paces at the stated limit again (docs/fcm-limits.md). The hold is shared through
-- herald.project_rates:
-- * window_held_until: until when the hold lasts at the latest (NULL: no hold);
-- * window_seen_at: when the request was sent whose answer last held the window or ended the
--   hold; an answer to a request sent earlier changes neither, so a late refusal does not hold
--   a window a later probe found renewed.

ALTER TABLE herald.project_rates
    ADD COLUMN window_held_until timestamptz,
    ADD COLUMN window_seen_at timestamptz;
