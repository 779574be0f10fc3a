-- --with: no frequency cap on queue 'default' (what an earlier run set up goes first).
SELECT herald.set_frequency_cap('default', NULL, NULL)
