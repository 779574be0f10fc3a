-- How many tokens FCM reported as gone.
SELECT count(*) FROM herald.pruned_tokens
