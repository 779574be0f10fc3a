-- Looks at up to $1 rows of herald.token_sends in key order, after the key ($3, $4) (both NULL:
-- from the first row), and deletes those that hold no send inside their queue's cap period at $2
-- (epoch seconds; NULL: now), or whose queue has no cap any more: such a row holds no token back,
-- and the token's next capped claim starts it again. Returns how many it deleted, the last key it
-- looked at and how many rows it looked at. A pass reads at most $1 entries of the primary key,
-- whatever the table's size, and passes that go on from the key the last one returned sweep the
-- table from end to end. Queue names are never empty, so ('', '') comes before every key. The test
-- is made again on the row being deleted, so a row a claim has just given a new send (the claim
-- holds its lock until it commits) is kept.
WITH examined AS (
    SELECT s.queue, s.token
    FROM herald.token_sends s
    WHERE (s.queue, s.token) > (coalesce($3::text, ''), coalesce($4::text, ''))
    ORDER BY s.queue, s.token
    LIMIT $1
), removed AS (
    DELETE FROM herald.token_sends t USING examined e
    WHERE t.queue = e.queue AND t.token = e.token
      AND (cardinality(t.sent_at) = 0
           OR t.sent_at[cardinality(t.sent_at)] <= coalesce(to_timestamp($2::float8), now())
                                                   - coalesce((SELECT q.cap_per FROM herald.queues q WHERE q.name = t.queue), interval '0'))
    RETURNING 1
), last AS (
    SELECT e.queue, e.token FROM examined e ORDER BY e.queue DESC, e.token DESC LIMIT 1
)
SELECT (SELECT count(*) FROM removed), (SELECT l.queue FROM last l), (SELECT l.token FROM last l), (SELECT count(*) FROM examined)
