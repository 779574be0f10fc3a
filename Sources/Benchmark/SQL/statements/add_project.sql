-- --with projects: registry project $1 for FCM project $2, its key at $3.
SELECT herald.add_project($1, $2, $3)
