-- queue_stats: per queue and state, the count; for available jobs the age of the oldest one;
-- `scheduled` repeats the count of jobs due later (kept for queries written before this state).
CREATE OR REPLACE VIEW herald.queue_stats AS
    SELECT queue, state, count(*) AS count,
           now() - min(run_at) FILTER (WHERE state = 'available') AS oldest_available_age,
           count(*) FILTER (WHERE state = 'scheduled') AS scheduled
    FROM herald.jobs GROUP BY queue, state
    UNION ALL
    SELECT queue, 'dead', count(*), NULL, 0 FROM herald.dead_letters GROUP BY queue;
