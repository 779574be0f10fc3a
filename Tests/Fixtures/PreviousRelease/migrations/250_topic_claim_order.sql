-- Herald: the topic-subscription claim reads its rows in index order.
--
-- herald.claim_topic_work takes the first 1,000 due rows ORDER BY run_at, topic, token. The index
-- on run_at alone left the rest of that order to a sort of every due row: after one
-- herald.subscribe of 100,000 tokens (all with the same run_at), each claim sorted all of them,
-- 1.2 to 1.7 s a claim, so the pool made one request every 1.4 s. This index hands the rows over
-- in the claim's order and the claim stops after 1,000 (0.25 s, most of it the UPDATE). It
-- starts with run_at, so it also serves what the old one did, which goes.

CREATE INDEX topic_subscriptions_due_order ON herald.topic_subscriptions (run_at, topic, token)
    WHERE state IN ('pending', 'removing');
DROP INDEX herald.topic_subscriptions_due;
