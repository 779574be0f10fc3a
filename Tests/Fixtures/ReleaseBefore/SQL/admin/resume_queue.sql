-- Resumes queue $1 (herald.resume_queue).
SELECT herald.resume_queue($1)
