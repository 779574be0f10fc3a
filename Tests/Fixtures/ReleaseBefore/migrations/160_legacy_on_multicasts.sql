-- Herald: the legacy multicast is a multicast like the v1 one.
--
-- A legacy request with several registration_ids fans out one job per token, as
-- herald.enqueue_multicast does; both are now recorded in herald.multicasts and their results
-- read by the same function. herald.legacy_multicast(job_id) finds a row's siblings through
-- the index on job_ids. The memberships recorded so far move over; the old table goes.

CREATE INDEX multicasts_jobs ON herald.multicasts USING gin (job_ids);

INSERT INTO herald.multicasts (job_ids, tokens, created_at)
SELECT array_agg(m.job_id ORDER BY m.position),
       array_agg(coalesce(j.message -> 'registration_ids' ->> 0, d.message -> 'registration_ids' ->> 0, '') ORDER BY m.position),
       min(m.created_at)
FROM herald.legacy_multicasts m
LEFT JOIN herald.jobs j ON j.id = m.job_id
LEFT JOIN LATERAL (SELECT dl.message FROM herald.dead_letters dl WHERE dl.job_id = m.job_id ORDER BY dl.id DESC LIMIT 1) d ON j.id IS NULL
GROUP BY m.multicast_id;

DROP TABLE herald.legacy_multicasts;
