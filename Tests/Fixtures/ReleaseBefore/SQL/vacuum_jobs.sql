-- Removes the dead row versions of herald.jobs and their index entries (see JobsVacuumPolicy).
-- INDEX_CLEANUP ON: the index entries are the point; left to itself, VACUUM skips the indexes
-- when dead rows sit on few heap pages, which is how claimed jobs lie.
VACUUM (INDEX_CLEANUP ON) herald.jobs
