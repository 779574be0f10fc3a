-- Claims up to $2 due jobs of the queues $1 (all when NULL) into 'running' under a lease of $3
-- seconds held by $4: every (queue, campaign) pair in turn, priority first within each, within
-- the rates of FCM project $5 ($6 per second; 0: none), of the queues and of the campaigns, and
-- nothing while the project is held back after a quota answer. $7: the project tokens taken
-- beforehand with take_project_tokens.sql (the claim gives back what it does not use; null: no
-- project rate). A row with a null id, when present, says in how many seconds a limit lets
-- held-back jobs go (herald.claim_jobs, migrations/070_campaigns.sql and 080_project_tokens.sql).
SELECT * FROM herald.claim_jobs($1::text[], $2::integer, $3::float8, $4::text, $5::text, $6::float8, $7::integer)
