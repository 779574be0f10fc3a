-- Herald: a role's holder is known by its PostgreSQL session too.
--
-- herald.leaders held only a lease: a pool killed with SIGKILL kept its roles until their leases
-- ran out, although its sessions ended the moment it died. Now the holder's backend (its pid and
-- start, as pg_stat_activity shows them) is recorded with the lease, and a candidate that finds
-- that session gone takes the role at once (take_leadership.sql). A session still listed (a
-- silent partition, a stalled process) keeps the lease rule: the role changes hands only when
-- its lease has run out. NULL: a holder that did not say (a pool of an earlier release).

ALTER TABLE herald.leaders
    ADD COLUMN backend_pid integer,
    ADD COLUMN backend_start timestamptz;
