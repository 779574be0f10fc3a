-- --with projects, --with apns: the registry projects and the APNs app an earlier run added.
SELECT herald.remove_project(name) FROM herald.projects WHERE name IN ('bench-a', 'bench-b', 'bench-ios')
