-- Gives up the leadership $1 if process $2 holds it (a clean stop), so another process takes it
-- at its next pass instead of after the lease.
DELETE FROM herald.leaders WHERE name = $1 AND leader_id = $2
