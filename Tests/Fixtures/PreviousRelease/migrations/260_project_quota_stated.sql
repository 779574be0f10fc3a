-- Herald: the project's quota as FCM states it.
--
-- FCM answers the project's quota with an ErrorInfo detail whose metadata states the limit
-- (quota_limit_value per quota_unit, e.g. 600000 per 1/min/{project}). The workers of a project
-- pace at a share of it (docs/fcm-limits.md) and share it through herald.project_rates:
-- stated_per_second (the limit, messages a second) and stated_at (when it was last stated).
-- NULL: no answer stated a limit yet; the rate is found by adapting, as before.

ALTER TABLE herald.project_rates
    ADD COLUMN stated_per_second double precision CHECK (stated_per_second > 0),
    ADD COLUMN stated_at timestamptz;
