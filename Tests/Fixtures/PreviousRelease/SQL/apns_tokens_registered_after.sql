-- APNs answered 410 for the tokens in $1 (a JSON array of {token, since}; since: Apple's
-- timestamp, seconds since 1970, from when APNs knew the token was no longer valid for the
-- topic): those registered again after that time (a herald.device_tokens row made or seen
-- since) are not pruned.
SELECT x.token
FROM jsonb_to_recordset($1::jsonb) AS x(token text, since float8)
JOIN herald.device_tokens d ON d.token = x.token
WHERE greatest(d.created_at, d.last_seen_at) > to_timestamp(x.since)
