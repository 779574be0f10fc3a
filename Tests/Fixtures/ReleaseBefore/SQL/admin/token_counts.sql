-- The token registry: fresh and stale tokens, pruned ones by why (the aging rule's reasons start
-- with IDLE:). A count over herald.device_tokens: a scrape of a registry of millions reads it all.
SELECT (SELECT count(*) FROM herald.device_tokens WHERE stale_at IS NULL),
       (SELECT count(*) FROM herald.device_tokens WHERE stale_at IS NOT NULL),
       (SELECT count(*) FROM herald.pruned_tokens WHERE reason NOT LIKE 'IDLE:%'),
       (SELECT count(*) FROM herald.pruned_tokens WHERE reason LIKE 'IDLE:%')
