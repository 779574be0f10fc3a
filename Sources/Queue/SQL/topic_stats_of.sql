-- Topic $1's subscription counts, one row per project it has rows under.
SELECT project, topic, subscribed, pending, removing, failed FROM herald.topic_stats WHERE topic = $1 ORDER BY project
