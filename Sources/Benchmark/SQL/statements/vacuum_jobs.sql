-- Reclaims the rows of the bench's deleted jobs.
VACUUM herald.jobs
