-- --with projects: the registry projects an earlier run added.
SELECT herald.remove_project(name) FROM herald.projects WHERE name IN ('bench-a', 'bench-b')
