-- Removes project $1 from the registry (herald.remove_project).
SELECT herald.remove_project($1)
