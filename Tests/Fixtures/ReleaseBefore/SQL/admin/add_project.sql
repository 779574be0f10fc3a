-- Registers project $1 for FCM project $2, its credentials at $3 (a path or env:VAR), max_rate $4 (herald.add_project).
SELECT herald.add_project($1, $2, $3, $4::float8)
