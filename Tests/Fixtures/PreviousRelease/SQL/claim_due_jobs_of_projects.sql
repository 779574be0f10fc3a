-- Claims up to $5 due jobs over the projects $1 in that order ('': jobs of no project), each with
-- its FCM project $2[i] and that FCM project's rate $3[i], of the queues $4 (all when NULL),
-- under a lease of $6 seconds held by $7, each project at least $8 of the batch in turn; $9: the
-- time of the claim in seconds since 1970 (NULL: now). One row per job claimed, with its
-- project's visit (visit, project, whole_share, come_back_in and the FCM project's adapted rate);
-- a visit that took nothing is one row without a job.
-- (herald.claim_projects, Sources/Queue/SQL/functions/claim_projects.sql.)
SELECT c.visit, c.project AS visit_project, c.whole_share, c.come_back_in, c.adapted_per_second, c.adapted_at,
       c.regain_per_second, c.stated_per_second, c.stated_at, j.*
FROM herald.claim_projects($1::text[], $2::text[], $3::float8[], $4::text[], $5::integer, $6::float8, $7::text, $8::integer,
                           to_timestamp($9::float8)) c
LEFT JOIN LATERAL pg_catalog.unnest(c.claimed) j ON true
ORDER BY c.visit
