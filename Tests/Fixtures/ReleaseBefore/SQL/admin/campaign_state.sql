-- Campaign $1's state.
SELECT state FROM herald.campaigns WHERE id = $1
