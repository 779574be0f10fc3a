-- Whether herald.jobs has the project column (migration 190): jobs addressed to registry projects.
SELECT EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = to_regclass('herald.jobs') AND attname = 'project' AND NOT attisdropped)
