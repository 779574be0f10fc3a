-- events_since: up to max events with an id above after_id, in id order. A consumer remembers
-- the last id it handled and asks again (on NOTIFY herald_events, or on a timer).
--
-- Never skipping an id: ids are taken from a sequence when a row is written, but rows become
-- visible when their transaction commits, so id 8 may commit after id 12. Returning 12 to a
-- consumer that then asks for "after 12" would lose 8. So only ids up to a horizon every writer
-- of which has finished are returned:
--   1. read the sequence's last value H (every id up to H is taken);
--   2. take this transaction's own xid X. Each event row's id is taken after its writer's xid
--      was assigned (the statement trigger events_id), so the writer of any id <= H got its xid before X;
--   3. wait until the oldest transaction still running (pg_snapshot_xmin of a fresh snapshot)
--      is X itself or younger: every writer of an id <= H has then committed or rolled back.
-- Then the rows above after_id up to H are read with a new snapshot. The wait is on every
-- transaction older than the call that holds an xid, not only on event writers: a transaction
-- left open stalls the events (the call returns none after waiting 2 seconds; ask again).
-- Needs READ COMMITTED (each statement its own snapshot), PostgreSQL's default, and a
-- transaction that has not written yet (its xid would be older than writers started since).
CREATE OR REPLACE FUNCTION herald.events_since(after_id bigint, max integer)
RETURNS SETOF herald.events LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    horizon bigint;
    me xid8;
    deadline timestamptz := clock_timestamp() + interval '2 seconds';
BEGIN
    IF events_since.after_id IS NULL OR events_since.after_id < 0 THEN
        RAISE EXCEPTION 'herald.events_since: after_id must be 0 or the last id handled, not %', coalesce(events_since.after_id::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF events_since.max IS NULL OR events_since.max < 1 OR events_since.max > 10000 THEN
        RAISE EXCEPTION 'herald.events_since: max must be between 1 and 10000, not %', coalesce(events_since.max::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'herald.events_since needs READ COMMITTED, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state', HINT = 'Call it outside a REPEATABLE READ or SERIALIZABLE transaction.';
    END IF;
    -- A transaction that has written already holds an older xid than writers started since:
    -- step 3 would not wait for them.
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'herald.events_since: call it before this transaction writes anything (it has written already)'
            USING ERRCODE = 'invalid_transaction_state', HINT = 'Call it in a transaction of its own, or first in the transaction.';
    END IF;
    SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END INTO horizon FROM herald.events_id_seq s;
    me := pg_current_xact_id();
    WHILE pg_snapshot_xmin(pg_current_snapshot()) < me LOOP
        IF clock_timestamp() > deadline THEN
            RETURN;
        END IF;
        PERFORM pg_sleep(0.002);
    END LOOP;
    RETURN QUERY SELECT e.* FROM herald.events e
        WHERE e.id > events_since.after_id AND e.id <= horizon ORDER BY e.id LIMIT events_since.max;
END $$;
