-- One operator action: what ($1), which ids ($2), its details ($3) and from where ($4); the
-- function records the role that took it (an operator role may not write herald.admin_log itself).
SELECT herald.record_admin_action($1, $2::bigint[], $3::jsonb, $4)
