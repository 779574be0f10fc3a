-- Up to $2 tokens FCM refused to subscribe to topic $1, with the error, newest first.
SELECT token, coalesce(error, '') FROM herald.topic_subscriptions
WHERE topic = $1 AND state = 'failed' ORDER BY updated_at DESC, token LIMIT $2
