-- Herald: several Firebase projects seen per project, and campaigns and device-group operations
-- addressed to one.
--
-- * dead_letters_project: the dead letters of registry projects, so `herald stats`, the
--   dashboard and its JSON API count each project's dead letters without reading the table
--   (partial: the dead letters of no project, all of them before projects, are left out).

CREATE INDEX dead_letters_project ON herald.dead_letters (project) WHERE project IS NOT NULL;
