-- Deletes up to $1 rows of herald.token_sends that hold no send inside their queue's cap period at
-- $2 (epoch seconds; NULL: now), or whose queue has no cap any more: such a row holds no token
-- back, and the token's next capped claim starts it again. The test is made again on the row
-- being deleted, so a row a claim has just given a new send (the claim holds its lock until it
-- commits) is kept.
DELETE FROM herald.token_sends t
WHERE (t.queue, t.token) IN (
        SELECT s.queue, s.token
        FROM herald.token_sends s LEFT JOIN herald.queues q ON q.name = s.queue
        WHERE q.cap_per IS NULL OR cardinality(s.sent_at) = 0
           OR s.sent_at[cardinality(s.sent_at)] <= coalesce(to_timestamp($2::float8), now()) - q.cap_per
        LIMIT $1)
  AND (cardinality(t.sent_at) = 0
       OR t.sent_at[cardinality(t.sent_at)] <= coalesce(to_timestamp($2::float8), now())
                                               - coalesce((SELECT q.cap_per FROM herald.queues q WHERE q.name = t.queue), interval '0'))
