-- Corrects FCM project $1 (herald.update_project): credentials $2, fcm_project_id $3, max_rate $4
-- (each null: kept), $5 true: back on the pool's --max-rate. True when anything changed.
SELECT herald.update_project($1, $2, $3, $4, $5)
