-- Campaign $1's state and name, locked until the action on it commits.
SELECT state, name FROM herald.campaigns WHERE id = $1 FOR UPDATE
