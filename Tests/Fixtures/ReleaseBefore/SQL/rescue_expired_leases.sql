-- Takes back jobs whose lease ran out (their worker stopped): available again, the attempt kept.
UPDATE herald.jobs
SET state = 'available', locked_until = NULL, locked_by = NULL,
    last_error = 'lease expired: the worker that claimed attempt ' || attempts || ' stopped before recording it'
WHERE state = 'running' AND locked_until < now()
