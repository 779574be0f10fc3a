-- Topic $1's subscription counts, per project (herald.topic_stats).
SELECT project, topic, subscribed, pending, removing, failed FROM herald.topic_stats WHERE topic = $1 ORDER BY project
