-- Removes registry entry $1 (herald.remove_project); with $2 (force) its pending jobs are
-- dead-lettered first. Returns how many were.
SELECT herald.remove_project($1, $2)
