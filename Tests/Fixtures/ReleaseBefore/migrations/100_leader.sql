-- Herald: leadership held as a lease in a table, not as a session's advisory lock.
--
-- The maintenance leader (it takes back expired leases, finishes campaigns, deletes finished
-- jobs past their retention) and the process that vacuums herald.jobs were chosen with
-- pg_try_advisory_lock. A session lock lives as long as the server thinks the session does: a
-- pool cut off from PostgreSQL by a silent network path kept it for as long as the server's
-- TCP keepalive took to give up, and no other pool took back the jobs it held. Now each role
-- has a row here; its leader renews expires_at on every pass (one statement), anyone takes it
-- over once it has expired, and a leader that cannot renew stops acting before it runs out.

CREATE TABLE herald.leaders (
    -- The role: 'maintenance' or 'vacuum'.
    name        text PRIMARY KEY,
    -- The process that holds it (host:pid:random, as herald.jobs.locked_by).
    leader_id   text NOT NULL,
    -- When this leader took it (kept while it renews).
    elected_at  timestamptz NOT NULL DEFAULT now(),
    -- The lease's end: after it, any process may take the role.
    expires_at  timestamptz NOT NULL
);
