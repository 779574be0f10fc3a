-- Claims up to $3 due subscription wishes of project $1 for worker $2, leased for $4 seconds
-- (herald.claim_topic_work, functions/claim_topic_work.sql).
SELECT project, topic, token, state, generation, attempts FROM herald.claim_topic_work($1, $2, $3, $4)
