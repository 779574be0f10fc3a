-- Per topic: subscribers and the tokens still waiting or refused (herald topics list).
CREATE OR REPLACE VIEW herald.topic_stats AS
SELECT project, topic,
       count(*) FILTER (WHERE state = 'subscribed') AS subscribed,
       count(*) FILTER (WHERE state = 'pending') AS pending,
       count(*) FILTER (WHERE state = 'removing') AS removing,
       count(*) FILTER (WHERE state = 'failed') AS failed,
       max(updated_at) AS updated_at
FROM herald.topic_subscriptions
GROUP BY project, topic;
