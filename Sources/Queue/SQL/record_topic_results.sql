-- Records the answers ($1, a JSON array) of Instance ID requests (functions/record_topic_results.sql).
SELECT herald.record_topic_results($1::jsonb)
