-- claim_projects: one claim over several projects, for a worker that carries many (StoreProjects
-- in Sources/Worker). p_projects are served in the order given ('': the jobs of no project), each
-- with its FCM project p_fcm_projects[i] (NULL: none, as an APNs app) and that FCM project's rate
-- p_fcm_rates[i] a second (0: none). Each project gets its share of the batch in turn (at least
-- p_min_share, so a batch over a thousand projects with due jobs visits a few dozen of them, and
-- the caller's rotation reaches the others in the claims that follow), then what is left goes to
-- those that took their whole share. Within a project the claim is herald.claim_batch, as a
-- worker of that project alone claims: its queues and campaigns in turn, its registry pause, its
-- FCM project's quota hold and token bucket, every rate limit.
--
-- One statement instead of one a project: the claim of a worker carrying a thousand projects
-- costs it one round trip, not thirty. Its FCM projects' buckets stay locked until it commits, so
-- a bucket another claim holds is not waited for: its project sits this claim out (come_back_in
-- 0.02) and the claim goes on with the next. Two claims that visit the same projects in other
-- orders therefore never wait for each other in a circle.
--
-- Returns one row per project visited (visit: 1, 2, ... in the order visited; a project that
-- took its whole share may be visited again): the jobs it took (claimed), whether they were its
-- whole share (whole_share), come_back_in as herald.claim_batch gives it (NULL: no limit held
-- its jobs back), and its FCM project's adapted rate as it is now stored (herald.project_rates;
-- all NULL when nothing was adapted), which the caller uses for that project's next claim
-- instead of reading it with a statement of its own.
CREATE OR REPLACE FUNCTION herald.claim_projects(
    p_projects text[], p_fcm_projects text[], p_fcm_rates double precision[],
    p_queues text[], p_limit integer, p_lease double precision, p_worker text, p_min_share integer,
    p_now timestamptz DEFAULT NULL)
RETURNS TABLE (visit integer, project text, claimed herald.claimed_job[], whole_share boolean, come_back_in double precision,
               adapted_per_second double precision, adapted_at double precision, regain_per_second double precision,
               stated_per_second double precision, stated_at double precision)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    n integer := coalesce(array_length(p_projects, 1), 0);
    budget integer := p_limit;
    more boolean[];
    share integer;
    fcm text;
    rate double precision;
    got integer;
    busy boolean;
BEGIN
    IF coalesce(array_length(p_fcm_projects, 1), 0) <> n OR coalesce(array_length(p_fcm_rates, 1), 0) <> n THEN
        RAISE EXCEPTION 'herald.claim_projects: p_projects (%), p_fcm_projects (%) and p_fcm_rates (%) must be as long as each other',
            n, coalesce(array_length(p_fcm_projects, 1), 0), coalesce(array_length(p_fcm_rates, 1), 0)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    more := array_fill(false, ARRAY[n]);
    visit := 0;
    FOR pass IN 1..2 LOOP
        FOR i IN 1..n LOOP
            EXIT WHEN budget <= 0;
            CONTINUE WHEN pass = 2 AND NOT more[i];
            share := CASE WHEN pass = 1 THEN least(budget, greatest(p_min_share, ceil(budget::numeric / (n - i + 1))::integer))
                          ELSE budget END;
            more[i] := false;
            visit := visit + 1;
            project := nullif(p_projects[i], '');
            fcm := p_fcm_projects[i];
            rate := coalesce(p_fcm_rates[i], 0);
            claimed := '{}';
            whole_share := false;
            come_back_in := NULL;
            adapted_per_second := NULL; adapted_at := NULL; regain_per_second := NULL; stated_per_second := NULL; stated_at := NULL;
            busy := false;
            IF fcm IS NOT NULL AND rate > 0 THEN
                -- The bucket's row, unless another claim holds it (then this project sits out).
                PERFORM 1 FROM herald.project_rates r WHERE r.project_id = fcm FOR UPDATE SKIP LOCKED;
                busy := NOT FOUND AND EXISTS (SELECT 1 FROM herald.project_rates r WHERE r.project_id = fcm);
            END IF;
            IF busy THEN
                come_back_in := 0.02;
            ELSE
                SELECT coalesce(b.claimed, '{}'), b.come_back_in INTO claimed, come_back_in
                FROM herald.claim_batch(p_queues, share, p_lease, p_worker, fcm, rate, NULL, p_now, project) b;
                got := cardinality(claimed);
                budget := budget - got;
                whole_share := got >= share;
                more[i] := pass = 1 AND whole_share;
            END IF;
            IF fcm IS NOT NULL THEN
                SELECT r.adapted_per_second, extract(epoch FROM r.adapted_at)::float8, r.regain_per_second,
                       r.stated_per_second, extract(epoch FROM r.stated_at)::float8
                INTO adapted_per_second, adapted_at, regain_per_second, stated_per_second, stated_at
                FROM herald.project_rates r WHERE r.project_id = fcm;
            END IF;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END
$fn$;
