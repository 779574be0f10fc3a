-- Records what Instance ID answered for claimed topic subscription rows ($1, a JSON array;
-- herald.record_topic_results).
SELECT herald.record_topic_results($1::jsonb)
