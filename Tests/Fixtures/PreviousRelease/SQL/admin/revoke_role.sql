-- herald grant --revoke: take back what role $1 was granted in schema herald, and its record.
SELECT herald.revoke_role($1)
