-- Herald: what a project's rate climbs back to after a storm of quota answers.
--
-- herald.project_rates.regain_per_second: set when a project quota answer came while FCM was
-- refusing most sends (a storm, or every send refused right after a pause), so the answers
-- measured no limit. From the lowering on, every worker doubles the project's rate each second
-- up to this figure, then raises it slowly as before (docs/fcm-limits.md). NULL: the last
-- lowering found a limit, the rate climbs slowly from it.

ALTER TABLE herald.project_rates
    ADD COLUMN regain_per_second double precision CHECK (regain_per_second > 0);
