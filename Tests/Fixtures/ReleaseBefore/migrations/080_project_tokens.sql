-- Herald: the project's token bucket (herald work --max-rate) is spent in a statement of its own.
--
-- Until now herald.claim_jobs spent it with an INSERT ... ON CONFLICT on herald.project_rates at
-- its start, so the row stayed locked until the claim committed and the claims of every worker of
-- one project ran one after another. Now a worker first takes up to a claim's worth of tokens
-- with herald.take_project_tokens, in its own short transaction, then claims within what it was
-- granted, and the claim gives back what it did not use as its last write (a lock held from
-- there to the commit only). Tokens are never spent twice: a grant leaves the bucket at once, and
-- a worker that stops between the two statements only leaves its grant unspent.
--
-- herald.claim_jobs gains p_project_granted; called without it (a worker of an older version),
-- it takes the tokens itself within the claim, as before.

-- The claim of migration 070, spending tokens granted beforehand (p_project_granted) when given.
DROP FUNCTION IF EXISTS herald.claim_jobs(text[], integer, double precision, text, text, double precision);
