-- Resumes registered project $1 (herald.resume_project_sending); true when it was paused.
SELECT herald.resume_project_sending($1)
