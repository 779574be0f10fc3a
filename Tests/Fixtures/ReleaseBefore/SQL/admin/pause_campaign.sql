-- Pauses campaign $1 (herald.pause_campaign).
SELECT herald.pause_campaign($1)::text
