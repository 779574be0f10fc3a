-- Registers APNs app $1: its .p8 key at $2 (a path or env:VAR), key id $3, team id $4, topic $5, sandbox $6, max_rate $7 (herald.add_apns_app).
SELECT herald.add_apns_app($1, $2, $3, $4, $5, $6::boolean, $7::float8)
