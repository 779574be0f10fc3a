-- Claims up to $3 due topic subscription rows of FCM project $1 (and of no project) for worker $2
-- under a lease of $4 seconds (herald.claim_topic_work).
SELECT project, topic, token, state, generation, attempts FROM herald.claim_topic_work($1, $2, $3, $4)
