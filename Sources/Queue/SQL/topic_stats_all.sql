-- Every topic's subscription counts, per project (herald topics, the dashboard).
SELECT project, topic, subscribed, pending, removing, failed FROM herald.topic_stats ORDER BY topic, project
