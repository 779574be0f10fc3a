-- Queue $1's settings, locked until the action on it commits (no row: none set).
SELECT paused, max_per_second, max_in_flight FROM herald.queues WHERE name = $1 FOR UPDATE
