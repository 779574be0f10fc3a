-- enqueue_group_op: a device-group operation ('create', 'add' or 'remove') run by the worker
-- under the same retry rules as a send. project: the registry name of the Firebase project whose
-- key runs it (herald.projects; NULL: the pool's own credentials); a name not in the registry is
-- refused, naming it, by the jobs_project trigger as for herald.enqueue.
CREATE OR REPLACE FUNCTION herald.enqueue_group_op(operation text, name text, tokens text[],
                                        queue text DEFAULT 'default', run_at timestamptz DEFAULT now(),
                                        project text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    new_id bigint;
BEGIN
    IF operation IS NULL OR operation NOT IN ('create', 'add', 'remove') THEN
        RAISE EXCEPTION 'herald.enqueue_group_op: operation must be create, add or remove, not %', coalesce(operation, 'null');
    END IF;
    IF name IS NULL OR name = '' THEN
        RAISE EXCEPTION 'herald.enqueue_group_op: name must be a non-empty notification_key_name';
    END IF;
    IF tokens IS NULL OR cardinality(tokens) = 0 THEN
        RAISE EXCEPTION 'herald.enqueue_group_op: tokens must hold at least one registration token';
    END IF;
    INSERT INTO herald.jobs (kind, message, queue, run_at, project)
    VALUES ('group', jsonb_build_object('operation', operation, 'notification_key_name', name,
                                        'registration_ids', to_jsonb(tokens)),
            coalesce(enqueue_group_op.queue, 'default'), coalesce(enqueue_group_op.run_at, now()), enqueue_group_op.project)
    RETURNING id INTO new_id;
    RETURN new_id;
END $$;
