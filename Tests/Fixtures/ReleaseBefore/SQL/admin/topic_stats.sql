-- Every topic's subscription counts, per project (herald.topic_stats).
SELECT project, topic, subscribed, pending, removing, failed FROM herald.topic_stats ORDER BY topic, project
