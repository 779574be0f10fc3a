-- Pauses registered project $1 with reason $2 (herald.pause_project_sending); true when it was enabled.
SELECT herald.pause_project_sending($1, $2)
