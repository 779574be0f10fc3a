-- --with: no quiet hours on queue 'default' (what an earlier run set up goes first).
SELECT herald.set_quiet_hours('default', NULL, NULL)
