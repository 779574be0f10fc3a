-- Resumes campaign $1 (herald.resume_campaign).
SELECT herald.resume_campaign($1)::text
