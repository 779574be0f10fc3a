-- Cancels campaign $1 (herald.cancel_campaign); returns how many jobs became 'cancelled'.
SELECT herald.cancel_campaign($1)::text
