-- Herald: the topic claim of a worker carrying many projects reads each project's due rows.
--
-- herald.claim_carried_topic_work claims the due rows of the FCM projects a worker carries (the
-- registry's, less those a pool leaves to a pool of their own with --skip-project). Through the
-- index on run_at it read every due row of the other FCM projects before reaching its own: beside
-- 200,000 due rows of a skipped project, a claim of 20 rows took 262 to 378 ms, every poll of
-- every worker. This index gives each carried FCM project's due rows in the claim's order, so
-- the claim probes it once per project and never reads another project's rows: 3 to 13 ms for
-- the same claim over 1,000 registered projects (38 to 43 ms for a claim of 1,000 rows).

CREATE INDEX topic_subscriptions_project_due ON herald.topic_subscriptions (project, run_at, topic, token)
    WHERE state IN ('pending', 'removing');
