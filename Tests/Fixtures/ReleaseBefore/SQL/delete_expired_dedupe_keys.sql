-- Deletes up to $1 dedupe keys whose period (herald.enqueue's dedupe_for) is over.
DELETE FROM herald.dedupe_keys WHERE key IN (
    SELECT key FROM herald.dedupe_keys WHERE expires_at <= now() ORDER BY expires_at LIMIT $1)
