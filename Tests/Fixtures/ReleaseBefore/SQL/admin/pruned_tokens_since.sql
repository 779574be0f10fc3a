-- Tokens pruned at or after $1.
SELECT count(*) FROM herald.pruned_tokens WHERE pruned_at >= $1::timestamptz
