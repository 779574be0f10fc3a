-- Claims up to $5 due topic subscription rows for worker $4 under a lease of $6 seconds, of the
-- registry projects $2 (NULL: all) less $3, and with the pool's own FCM project $1 (NULL: none)
-- those of no project and of $1 (herald.claim_carried_topic_work).
SELECT registry_name, project, topic, token, state, generation, attempts
FROM herald.claim_carried_topic_work($1, $2, $3, $4, $5, $6)
