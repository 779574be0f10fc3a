-- herald.jobs' live and dead row versions as PostgreSQL's statistics count them (updated by each
-- backend about once a second), and whether this role may VACUUM the table (its owner, a member
-- of the owner's role, the database's owner or a superuser).
SELECT s.n_live_tup AS live, s.n_dead_tup AS dead,
       pg_has_role(c.relowner, 'USAGE')
           OR pg_has_role((SELECT d.datdba FROM pg_database d WHERE d.datname = current_database()), 'USAGE') AS may_vacuum
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
WHERE s.relid = 'herald.jobs'::regclass
