-- One operator action: what ($1), which ids ($2), its details ($3) and from where ($4).
INSERT INTO herald.admin_log (action, ids, details, source) VALUES ($1, $2::bigint[], $3::jsonb, $4)
