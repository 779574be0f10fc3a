-- Corrects APNs app $1 (herald.update_apns_app): key_file $2, key_id $3, team_id $4, topic $5,
-- sandbox $6, max_rate $7 (each null: kept), $8 true: back on the pool's --max-rate. True when
-- anything changed.
SELECT herald.update_apns_app($1, $2, $3, $4, $5, $6, $7, $8)
