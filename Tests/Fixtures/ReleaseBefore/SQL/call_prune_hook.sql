-- Calls herald.prune_token (which an application may have replaced) for each pruned token in $1,
-- a JSON array of {id, token, err}.
SELECT count(herald.prune_token(x.token, x.err, x.id))
FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, token text, err text)
