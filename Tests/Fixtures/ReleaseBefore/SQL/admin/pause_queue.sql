-- Pauses queue $1 (herald.pause_queue).
SELECT herald.pause_queue($1)
